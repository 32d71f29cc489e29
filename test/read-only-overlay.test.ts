import { createHash } from "node:crypto";
import fc from "fast-check";
import { describe, expect, it } from "vitest";
import { counterTask } from "../examples/counter-task.ts";
import { ReadOnlySession, TasksBehindLog } from "../src/errors.ts";
import { memoryArbiter } from "../src/follow/arbiter.ts";
import { createRegistry, BACKGROUND_CONTEXT as ctx, defineExtension, Harness } from "../src/index.ts";
import type { Batch, TaskRecord } from "../src/storage/records.ts";
import type { SqliteDatabase } from "../src/storage/sqlite/database.ts";
import { openSqliteStorage } from "../src/storage/sqlite/open-storage.ts";
import { TASKS_BEHIND_LOG } from "../src/storage/sqlite/schema.ts";
import { SqliteStorage } from "../src/storage/sqlite/storage.ts";
import { openSqliteDatabase } from "../src/storage/sqlite/wasm.ts";
import { createManualClock } from "../src/testing/index.ts";
import { SEED_QUERY } from "./deferred-support.ts";
import { taskRecord } from "./task-record.ts";

// Decision 0088 (issue 27, the seam decision 0081 left): a read-only open of a file whose task rows are behind its log
// (a crash under a lease while fenced steps' rows waited in memory) replays the log past the mark into the connection's
// TEMP schema and reads through it. S5: it changes nothing (the file's bytes are the same) and reads, views, inspect()
// and SQL queries work — showing what a writable open shows before S4's recount. Every test here fails on the old code,
// which refused such a file with TasksBehindLog.

const sha = (bytes: Uint8Array) => createHash("sha256").update(bytes).digest("hex");

const batch = (tasks: TaskRecord[], position?: number): Batch => ({
  ...(position === undefined ? {} : { fence: { epoch: 1, position } }),
  tasks,
  conversations: [],
  entries: [],
  submissions: [],
  documents: [],
});
type Status = "running" | "pending" | "sleeping";
const task = (id: number, n: number, status: Status = "running") =>
  taskRecord(
    id,
    status === "sleeping" ? { status, until: 10_000 + n, checkpoint: { phase: "step", n } } : { status, checkpoint: { phase: "step", n } },
  );

const behindMark = async (image: Uint8Array) => {
  const db = await openSqliteDatabase({ vfs: "memory", image, readOnly: true });
  const row = await db.get("SELECT value FROM pi_durable_meta WHERE key = ?", TASKS_BEHIND_LOG);
  await db.close();
  return row?.value;
};

/** Everything a reader of the storage sees of the tasks: load, the lists, each task, the seed's SQL and a snapshot. */
async function seen(storage: SqliteStorage, ids: readonly number[]) {
  const loaded = await storage.load();
  const snapshot = await storage.readSnapshot();
  return {
    live: loaded.liveTasks,
    nextId: loaded.nextId,
    all: await storage.listTasks(),
    running: await storage.listTasks({ status: "running" }),
    one: await Promise.all([...ids, 999].map((id) => storage.getTask(id))),
    seed: await storage.query(SEED_QUERY),
    counted: await storage.query("SELECT status, count(*) AS n FROM tasks GROUP BY status ORDER BY status"),
    snapshotTasks: snapshot?.batch.tasks,
    head: snapshot?.batch.fence,
  };
}

/** Opens `image` read-only and writable: the read-only one must see what the writable one does, and leave the file as it was. */
async function compare(image: Uint8Array, ids: readonly number[]) {
  const before = sha(image);
  const viewer = await openSqliteStorage({ vfs: "memory", image, readOnly: true });
  const shown = await seen(viewer, ids);
  const after = sha(await viewer.database.exportImage());
  await viewer.close();
  const writable = await openSqliteStorage({ vfs: "memory", image: image.slice() });
  const truth = await seen(writable, ids);
  await writable.close();
  expect(shown).toEqual(truth);
  expect(after).toBe(before); // S5: nothing written
  expect(sha(image)).toBe(before);
}

describe("a read-only open of a file whose task rows are behind its log (decision 0088)", () => {
  it("0088/S5/S4: after a crash at k deferring commits (k = 1, 2, 31, 32, 33, 63, 64), read-only shows every task as a writable open does, the file unchanged", async () => {
    let behind = 0;
    for (const k of [1, 2, 31, 32, 33, 63, 64]) {
      const storage = await openSqliteStorage({ vfs: "memory", deferTaskRows: true });
      await storage.load();
      await storage.apply(batch([task(1, 0), task(2, 0), task(3, 0, "pending")], 1));
      await storage.apply(batch([taskRecord(4, { status: "terminal", outcome: { status: "completed", result: 4 } })], 2));
      for (let step = 1; step <= k; step++) await storage.apply(batch([task(1 + (step % 2), step)], step + 2));
      const image = await storage.database.exportImage(); // the disk at the crash: what waited in memory is gone
      if ((await behindMark(image)) !== undefined) behind++;
      await compare(image, [1, 2, 3, 4]);
      // And the numbers themselves: the last acknowledged step of each task.
      const viewer = await openSqliteStorage({ vfs: "memory", image, readOnly: true });
      const n = (id: number) =>
        viewer.getTask(id).then((record) => (record!.state as unknown as { checkpoint: { n: number } }).checkpoint.n);
      expect([await n(1), await n(2)], `k = ${k}`).toEqual([k % 2 === 0 ? k : k - 1, k % 2 === 1 ? k : k - 1]);
      await viewer.close();
      await storage.close();
    }
    // Every k crashed with the mark in the file: rows waited at each (runs of 256 since decision 0086), and a commit that
    // writes what waited keeps the mark (0086), so the overlay is what every one of these opens reads through.
    expect(behind).toBe(7);
  });

  it("0088/S5/S11: the seed's raw SQL reads the overlay (in id order, as the table's rows come); main.tasks is the file's rows; nothing can be written through query()", async () => {
    const storage = await openSqliteStorage({ vfs: "memory", deferTaskRows: true });
    await storage.load();
    await storage.apply(batch([task(1, 0), task(2, 0), task(3, 0)], 1));
    for (let step = 1; step <= 5; step++) await storage.apply(batch([task(2, step)], step + 1));
    const image = await storage.database.exportImage();
    expect(await behindMark(image)).toBe("1");
    const viewer = await openSqliteStorage({ vfs: "memory", image, readOnly: true });
    expect((await viewer.query(SEED_QUERY)).map((row) => [row.id, row.n])).toEqual([
      [1, 0],
      [2, 5],
      [3, 0],
    ]);
    expect(await viewer.query("SELECT record ->> '$.state.checkpoint.n' AS n FROM main.tasks WHERE id = 2")).toEqual([{ n: 0 }]);
    expect(await viewer.query("SELECT record ->> '$.state.checkpoint.n' AS n FROM tasks WHERE id = ?", 2)).toEqual([{ n: 5 }]);
    // The mark stays in the file's metadata (it is the file's truth: its rows are behind).
    expect(await viewer.query("SELECT value FROM pi_durable_meta WHERE key = ?", TASKS_BEHIND_LOG)).toEqual([{ value: "1" }]);
    for (const sql of ["DROP VIEW tasks", "DELETE FROM main.tasks", "DELETE FROM temp.pi_durable_tasks_overlay", "CREATE TEMP TABLE x (a)"])
      await expect(viewer.query(sql), sql).rejects.toMatchObject({ name: "QueryNotReadOnly" });
    // A write to `tasks` itself is refused by SQLite before the door sees it (a view cannot be written): QueryFailed.
    await expect(viewer.query("DELETE FROM tasks")).rejects.toMatchObject({ name: "QueryFailed" });
    expect(await viewer.query("SELECT count(*) AS n FROM tasks")).toEqual([{ n: 3 }]);
    await expect(viewer.apply(batch([task(2, 6)], 7))).rejects.toBeInstanceOf(ReadOnlySession);
    expect(sha(await viewer.database.exportImage())).toBe(sha(image));
    await viewer.close();
  });

  it("0088/S5: a harness opened read-only on it shows, in inspect(), the counter's last acknowledged step (memo printed-2, running) — a writable open shows the same before its recount", async () => {
    const storage = await openSqliteStorage({ vfs: "memory", deferTaskRows: true });
    const clock = createManualClock(1_000);
    let image: Uint8Array | undefined;
    const registry = (print: (line: string) => Promise<void>) =>
      createRegistry().install(defineExtension({ name: "example", tasks: [counterTask(print)] }));
    const harness = await Harness.open(
      storage,
      {
        registry: registry(async (line) => {
          if (line === "tick 2") image = await storage.database.exportImage(); // the memo printed-2 is acknowledged, waiting
        }),
        clock,
        lease: { place: "tab", arbiter: memoryArbiter({ clock, ttlMs: 600_000 }) },
      },
      ctx,
    );
    const root = await harness.root(ctx);
    await root.commit(
      (tx) =>
        tx.createTask(
          counterTask(async () => {}),
          { to: 5 },
        ),
      ctx,
    );
    harness.resume();
    while (image === undefined) {
      await new Promise((resolve) => setImmediate(resolve));
      clock.next();
    }
    await harness.close(ctx);
    expect(await behindMark(image)).toBeDefined();
    const before = sha(image);
    const viewer = await openSqliteStorage({ vfs: "memory", image, readOnly: true });
    const readOnly = await Harness.open(viewer, { registry: registry(async () => {}), clock, readOnly: true }, ctx);
    const inspected = (await readOnly.inspect(ctx)).tasks.map(({ record }) => record);
    expect(inspected).toHaveLength(1);
    expect(inspected[0]!.state).toMatchObject({ status: "running", checkpoint: { n: 2 } });
    expect(Object.keys(inspected[0]!.memos ?? {})).toEqual(["printed-1", "printed-2"]);
    await readOnly.close(ctx);
    expect(sha(await viewer.database.exportImage())).toBe(before);
    const writable = await openSqliteStorage({ vfs: "memory", image });
    expect((await writable.load()).liveTasks).toEqual(inspected);
  });

  it("0088: a database that cannot hold a TEMP overlay (no `temporary`) is refused with TasksBehindLog, exactly as before", async () => {
    const storage = await openSqliteStorage({ vfs: "memory", deferTaskRows: true });
    await storage.load();
    await storage.apply(batch([task(1, 0)], 1));
    await storage.apply(batch([task(1, 1)], 2));
    const image = await storage.database.exportImage();
    const db = await openSqliteDatabase({ vfs: "memory", image, readOnly: true });
    const plain = new Proxy(db, {
      get(target, key) {
        const value = Reflect.get(target, key, target) as unknown;
        return key === "temporary" ? undefined : typeof value === "function" ? value.bind(target) : value;
      },
    });
    const refusal = await SqliteStorage.open(plain as SqliteDatabase, "plain").catch((error: unknown) => error);
    expect(refusal).toBeInstanceOf(TasksBehindLog);
    expect(refusal).toMatchObject({ name: "TasksBehindLog", through: 1 });
    await db.close();
  });

  it("0088: `temporary` on a connection guarded by query_only writes TEMP objects and leaves the guard on", async () => {
    const db = await openSqliteDatabase({ vfs: "memory", readOnly: true });
    await db.temporary!((tx) => {
      tx.run("CREATE TABLE temp.t (a)");
      tx.run("INSERT INTO temp.t VALUES (1)");
    });
    expect(await db.all("SELECT a FROM temp.t")).toEqual([{ a: 1 }]);
    expect(await db.get("PRAGMA query_only")).toEqual({ query_only: 1 });
    await expect(db.exec("CREATE TABLE main.u (a)")).rejects.toBeInstanceOf(ReadOnlySession);
    await db.close();
  });
});

type Op = { kind: "step"; task: number } | { kind: "status"; task: number } | { kind: "plain"; task: number } | { kind: "read" };

const op: fc.Arbitrary<Op> = fc.oneof(
  { weight: 8, arbitrary: fc.record({ kind: fc.constant("step" as const), task: fc.nat(3) }) },
  { weight: 1, arbitrary: fc.record({ kind: fc.constant("status" as const), task: fc.nat(3) }) },
  { weight: 1, arbitrary: fc.record({ kind: fc.constant("plain" as const), task: fc.nat(3) }) },
  { weight: 1, arbitrary: fc.constant({ kind: "read" as const }) },
);

describe("0088: read-only against writable at random crash points (fast-check)", () => {
  it("S5/S4: random fenced steps, status changes, lease-less commits and reads, crashed anywhere: read-only shows what writable shows, the file unchanged", async () => {
    let behind = 0;
    await fc.assert(
      fc.asyncProperty(fc.integer({ min: 1, max: 40 }), fc.array(op, { minLength: 1, maxLength: 45 }), async (flushEvery, ops) => {
        const storage = await openSqliteStorage({ vfs: "memory", deferTaskRows: { flushEvery } });
        await storage.load();
        const tasks = new Map<number, { n: number; status: Status }>([1, 2, 3].map((id) => [id, { n: 0, status: "running" }]));
        await storage.apply(batch([task(1, 0), task(2, 0), task(3, 0)], 1));
        let head = 1;
        for (const next of ops) {
          const id = 1 + (("task" in next ? next.task : 0) % 3);
          const state = tasks.get(id)!;
          if (next.kind === "read") await storage.getTask(id);
          else {
            state.n++;
            if (next.kind === "status") state.status = state.status === "running" ? "sleeping" : "running";
            await storage.apply(batch([task(id, state.n, state.status)], next.kind === "plain" ? undefined : ++head));
          }
        }
        const image = await storage.database.exportImage();
        if ((await behindMark(image)) !== undefined) behind++;
        await compare(image, [1, 2, 3]);
        await storage.close();
      }),
      { numRuns: 60, seed: 88 },
    );
    expect(behind).toBeGreaterThan(30); // most runs crashed with rows waiting
  });
});
