import { describe, expect, it } from "vitest";
import { DatabaseCorrupt, QueryNotReadOnly, SchemaTooNew, type Batch, type Storage, type TaskRecord } from "../src/index.ts";
import { openSqliteDatabase } from "../src/storage/sqlite/wasm.ts";
import { openSqliteStorage } from "../src/storage/sqlite/open-storage.ts";
import { backends } from "./support.ts";

const empty = (): Batch => ({ tasks: [], conversations: [], entries: [], submissions: [], documents: [] });

function task(id: number, status: "pending" | "running" | "terminal", extra: Partial<TaskRecord> = {}): TaskRecord {
  const state =
    status === "terminal"
      ? ({ status, outcome: { status: "completed", result: id } } as const)
      : ({ status, checkpoint: { phase: "p", n: id } } as const);
  return { id, conversationId: 1, kind: "k", version: 1, input: null, background: false, abortRequested: false, state, ...extra };
}

/** The storage contract, run against every backend (S11). */
for (const backend of backends) {
  describe(`storage conformance: ${backend.name}`, () => {
    async function seeded(): Promise<Storage> {
      const storage = await backend.create();
      await storage.apply({
        ...empty(),
        nextId: 10,
        rootConversationId: 1,
        conversations: [{ id: 1, createdAt: 5 }],
        tasks: [task(2, "pending"), task(3, "running", { memos: { a: 1 }, restarts: 2 }), task(4, "terminal")],
        entries: [
          { id: 5, conversationId: 1, kind: "pi.user", payload: { text: "hi" }, at: 6 },
          { id: 6, conversationId: 1, kind: "pi.assistant", payload: { text: "yo" }, byTaskId: 3, at: 7 },
        ],
        submissions: [
          { id: 7, conversationId: 1, type: "input", requestId: "r1", status: "queued", payload: "hi", createdAt: 8 },
          { id: 8, conversationId: 1, type: "input", status: "done", payload: "x", createdAt: 8, result: { answer: "y" } },
        ],
        documents: [
          { scope: "conversation:1", key: "pi.live", value: { run: 3 } },
          { scope: "conversation:1", key: "pi.usage", value: { tokens: 1 } },
        ],
      });
      return storage;
    }

    it("S11: a batch is stored whole and read back as detached copies", async () => {
      const storage = await seeded();
      const state = await storage.load();
      expect(state.nextId).toBe(10);
      expect(state.rootConversationId).toBe(1);
      expect(state.liveTasks.map((t) => t.id)).toEqual([2, 3]);
      expect(state.liveTasks[1]).toEqual(task(3, "running", { memos: { a: 1 }, restarts: 2 }));
      expect(state.documents).toHaveLength(2);
      expect(state.openSubmissions.map((s) => s.id)).toEqual([7]);
      expect((await storage.getTask(4))!.state).toEqual({ status: "terminal", outcome: { status: "completed", result: 4 } });
      expect(await storage.getTask(99)).toBeUndefined();
      expect((await storage.listTasks({ status: "pending" })).map((t) => t.id)).toEqual([2]);
      expect((await storage.listEntries(1)).map((e) => e.id)).toEqual([5, 6]);
      expect((await storage.listEntries(1, { afterId: 5 })).map((e) => e.id)).toEqual([6]);
      expect((await storage.getEntry(6))!.byTaskId).toBe(3);
      expect(await storage.getDocument("conversation:1", "pi.live")).toEqual({ run: 3 });
      expect((await storage.listDocuments("conversation:1")).map((d) => d.key)).toEqual(["pi.live", "pi.usage"]);
      expect((await storage.findSubmission(1, "r1"))!.id).toBe(7);
      expect(await storage.findSubmission(1, "r2")).toBeUndefined();
      expect((await storage.listSubmissions(1)).map((s) => s.id)).toEqual([7, 8]);
      const copy = (await storage.getTask(3))!;
      copy.memos!.a = 2;
      expect((await storage.getTask(3))!.memos).toEqual({ a: 1 });
    });

    it("S11: replacing and deleting: a terminal task leaves the live set; a null document is deleted", async () => {
      const storage = await seeded();
      await storage.apply({
        ...empty(),
        tasks: [task(3, "terminal")],
        documents: [{ scope: "conversation:1", key: "pi.live", value: null }],
        submissions: [{ id: 7, conversationId: 1, type: "input", requestId: "r1", status: "done", payload: "hi", createdAt: 8 }],
      });
      const state = await storage.load();
      expect(state.liveTasks.map((t) => t.id)).toEqual([2]);
      expect(await storage.getDocument("conversation:1", "pi.live")).toBeUndefined();
      expect(state.openSubmissions).toEqual([]);
      expect(state.nextId).toBe(10);
    });

    it("S11: a commit that fails halfway rolls back completely", async () => {
      const storage = await seeded();
      const circular: Record<string, unknown> = {};
      circular.self = circular;
      await expect(
        storage.apply({
          ...empty(),
          nextId: 20,
          tasks: [task(2, "terminal")],
          entries: [{ id: 11, conversationId: 1, kind: "pi.user", payload: circular as never, at: 1 }],
        }),
      ).rejects.toThrow();
      const state = await storage.load();
      expect(state.nextId).toBe(10);
      expect(state.liveTasks.map((t) => t.id)).toEqual([2, 3]);
      expect(await storage.getEntry(11)).toBeUndefined();
    });

    it("S1: the global id counter never goes back, also when ids were minted that no row carries", async () => {
      const storage = await seeded(); // nextId 10, rows up to 8
      await storage.apply({ ...empty(), nextId: 13, tasks: [task(10, "pending")] }); // 11 and 12 minted, unused
      expect((await storage.load()).nextId).toBe(13);
      await storage.apply({ ...empty(), nextId: 15, tasks: [task(13, "pending"), task(14, "pending")] });
      const copy = await backend.fromImage(await storage.exportImage());
      expect((await copy.load()).nextId).toBe(15);
    });

    it("S4: recoverRunning turns running tasks into pending in place: same checkpoint and memos, restarts + 1", async () => {
      const storage = await seeded(); // task 3 running with memos { a: 1 } and restarts 2; task 2 pending
      await storage.apply({ ...empty(), tasks: [task(12, "running")] });
      expect(await storage.recoverRunning()).toEqual([3, 12]);
      expect(await storage.getTask(3)).toEqual({ ...task(3, "pending", { memos: { a: 1 }, restarts: 2 }), restarts: 3 });
      expect(await storage.getTask(12)).toEqual({ ...task(12, "pending"), restarts: 1 });
      expect(await storage.getTask(2)).toEqual(task(2, "pending"));
      expect((await storage.listTasks({ status: "running" })).map((t) => t.id)).toEqual([]);
      expect(await storage.recoverRunning()).toEqual([]);
      // A later state change goes through as usual (the SQLite storage's status cache followed along).
      await storage.apply({ ...empty(), tasks: [task(3, "running")] });
      expect((await storage.listTasks({ status: "running" })).map((t) => t.id)).toEqual([3]);
    });

    it("S11: an exported image opens as an independent copy", async () => {
      const storage = await seeded();
      const copy = await backend.fromImage(await storage.exportImage());
      await storage.apply({ ...empty(), tasks: [task(2, "terminal")] });
      expect((await copy.load()).liveTasks.map((t) => t.id)).toEqual([2, 3]);
      const readOnly = await backend.fromImage(await storage.exportImage(), { readOnly: true });
      expect(readOnly.readOnly).toBe(true);
      await expect(readOnly.apply({ ...empty(), tasks: [task(3, "terminal")] })).rejects.toThrow();
      expect((await readOnly.load()).liveTasks.map((t) => t.id)).toEqual([3]);
    });
  });
}

describe("SQLite storage: schema, bad input and read-only SQL", () => {
  it("S11: the seed's query runs unchanged on the tasks table", async () => {
    const storage = await openSqliteStorage({ vfs: "memory" });
    await storage.apply({ ...empty(), tasks: [task(7, "pending", { memos: { "printed-1": true } })] });
    const rows = await storage.query(
      "SELECT id, status, record ->> '$.state.checkpoint.n' AS n, record ->> '$.memos' AS memos, record ->> '$.restarts' AS restarts FROM tasks;",
    );
    expect(rows).toEqual([{ id: 7, status: "pending", n: 7, memos: '{"printed-1":true}', restarts: null }]);
  });

  it("storage.query() refuses statements that write, and leaves the data unchanged", async () => {
    const storage = await openSqliteStorage({ vfs: "memory" });
    await storage.apply({ ...empty(), tasks: [task(2, "pending")] });
    for (const sql of ["DELETE FROM tasks", "UPDATE tasks SET status = 'x'", "DROP TABLE tasks", "SELECT 1; DELETE FROM tasks", "PRAGMA user_version = 3"]) {
      await expect(storage.query(sql)).rejects.toThrow(QueryNotReadOnly);
    }
    await expect(storage.query("WITH x AS (SELECT 1) DELETE FROM tasks")).rejects.toThrow(QueryNotReadOnly);
    expect((await storage.query("SELECT count(*) AS n FROM tasks WHERE id = ?", 2))[0]).toEqual({ n: 1 });
    await storage.apply({ ...empty(), tasks: [task(3, "pending")] }); // writes still work afterwards
    expect((await storage.load()).liveTasks).toHaveLength(2);
  });

  it("bad input: a database with a newer schema version is refused with a clear error and left unmodified", async () => {
    const storage = await openSqliteStorage({ vfs: "memory" });
    const db = (storage as unknown as { database: { run(sql: string, ...p: unknown[]): Promise<number> } }).database;
    await db.run("UPDATE meta SET value = '99' WHERE key = 'schema_version'");
    const image = await storage.exportImage();
    await expect(openSqliteStorage({ vfs: "memory", image })).rejects.toThrow(SchemaTooNew);
    await expect(openSqliteStorage({ vfs: "memory", image })).rejects.toThrow(/schema version 99.*at most 1.*left unmodified/);
    const raw = await openSqliteDatabase({ vfs: "memory", image });
    expect(await raw.get("SELECT value FROM meta WHERE key = 'schema_version'")).toEqual({ value: "99" });
    expect(await raw.exportImage()).toEqual(image);
  });

  it("bad input: bytes that are not a SQLite database are refused with a clear error", async () => {
    const garbage = new TextEncoder().encode("this is not a database ".repeat(400));
    await expect(openSqliteStorage({ vfs: "memory", image: garbage })).rejects.toThrow(DatabaseCorrupt);
  });

  it("bad input: a SQLite database of some other application is refused and left unmodified", async () => {
    const other = await openSqliteDatabase({ vfs: "memory" });
    await other.exec("CREATE TABLE notes (id INTEGER PRIMARY KEY, body TEXT)");
    const image = await other.exportImage();
    await expect(openSqliteStorage({ vfs: "memory", image })).rejects.toThrow(/not a pi-durable one/);
  });
});

describe("SQLite storage: queries and commits interleaved", () => {
  it("a read-only query never makes a commit queued beside it fail", async () => {
    const storage = await openSqliteStorage({ vfs: "memory" });
    const results = await Promise.allSettled(
      Array.from({ length: 20 }, (_, i) =>
        i % 2 === 0 ? storage.query("SELECT count(*) AS n FROM tasks") : storage.apply({ ...empty(), tasks: [task(100 + i, "pending")] }),
      ),
    );
    expect(results.filter((r) => r.status === "rejected")).toEqual([]);
    expect((await storage.load()).liveTasks).toHaveLength(10);
  });
});
