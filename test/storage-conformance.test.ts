import { describe, expect, it } from "vitest";
import { DatabaseCorrupt, QueryNotReadOnly, SchemaTooNew } from "../src/index.ts";
import { openSqliteStorage } from "../src/storage/sqlite/open-storage.ts";
import { openSqliteDatabase } from "../src/storage/sqlite/wasm.ts";
import { emptyBatch as empty, storageConformance, sampleTask as task } from "../src/testing/storage-conformance.ts";
import { backends } from "./support.ts";

/** The storage contract, run against every backend (S11); the same cases run on OPFS in e2e/sqlite-opfs.e2e.ts. */
/**
 * Decisions 0081 and 0086: `backends`' SQLite storage defers fenced steps' task rows (the default on both backends);
 * the same contract with deferring off, every step's task row written at once.
 */
const writing = {
  name: "SQLite (sqlite-wasm, memory, deferTaskRows: false)",
  create: () => openSqliteStorage({ vfs: "memory", deferTaskRows: false }),
  fromImage: (image: Uint8Array, options?: { readOnly?: boolean }) =>
    openSqliteStorage({ vfs: "memory", image, readOnly: options?.readOnly, deferTaskRows: false }),
};

for (const backend of [...backends, writing]) {
  describe(`storage conformance: ${backend.name}`, () => {
    for (const test of storageConformance(backend)) it(test.name, test.run);
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
    for (const sql of [
      "DELETE FROM tasks",
      "UPDATE tasks SET status = 'x'",
      "DROP TABLE tasks",
      "SELECT 1; DELETE FROM tasks",
      "PRAGMA user_version = 3",
    ]) {
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
    await db.run("UPDATE pi_durable_meta SET value = '99' WHERE key = 'schema_version'");
    const image = await storage.exportImage();
    await expect(openSqliteStorage({ vfs: "memory", image })).rejects.toThrow(SchemaTooNew);
    await expect(openSqliteStorage({ vfs: "memory", image })).rejects.toThrow(/schema version 99.*at most 6.*left unmodified/);
    const raw = await openSqliteDatabase({ vfs: "memory", image });
    expect(await raw.get("SELECT value FROM pi_durable_meta WHERE key = 'schema_version'")).toEqual({ value: "99" });
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
