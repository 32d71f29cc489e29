import { afterEach, describe, expect, it } from "vitest";
import { DatabaseCorrupt, HarnessClosed, ReadOnlySession, StorageUnavailable } from "../src/errors";
import type { SqliteDatabase } from "../src/storage/sqlite/database.ts";
import { openSqliteDatabase, sqliteVersion } from "../src/storage/sqlite/wasm";

// The sqlite-wasm "memory" backend in Node. The opfs-sahpool backend is covered in real Chromium by
// e2e/sqlite-opfs.e2e.ts.

const open: SqliteDatabase[] = [];

async function memory(options: { image?: Uint8Array; readOnly?: boolean } = {}): Promise<SqliteDatabase> {
  const db = await openSqliteDatabase({ vfs: "memory", ...options });
  open.push(db);
  return db;
}

async function withRows(count: number): Promise<SqliteDatabase> {
  const db = await memory();
  await db.exec("CREATE TABLE t (id INTEGER PRIMARY KEY, v TEXT NOT NULL)");
  await db.transaction((tx) => {
    for (let id = 1; id <= count; id += 1) tx.run("INSERT INTO t (id, v) VALUES (?, ?)", id, `row ${id}`);
  });
  return db;
}

afterEach(async () => {
  await Promise.all(open.splice(0).map((db) => db.close()));
});

describe("sqlite-wasm memory database", () => {
  it("reports the pinned SQLite version", async () => {
    expect(await sqliteVersion()).toBe("3.54.1");
  });

  it("round-trips every value type as plain row objects", async () => {
    const db = await memory();
    await db.exec("CREATE TABLE v (i, big, huge, f, s, b, e, n)");
    const blob = new Uint8Array([0, 1, 2, 255]);
    const changed = await db.run(
      "INSERT INTO v VALUES (?, ?, ?, ?, ?, ?, ?, ?)",
      42,
      1_700_000_000_123,
      2n ** 60n,
      1.5,
      "héllo ✓",
      blob,
      new Uint8Array(0),
      null,
    );
    expect(changed).toBe(1);
    const row = await db.get("SELECT i, big, huge, f, s, b, e, n, typeof(big) AS bigType, typeof(e) AS eType FROM v");
    expect(row).toEqual({
      i: 42,
      big: 1_700_000_000_123,
      huge: 2n ** 60n,
      f: 1.5,
      s: "héllo ✓",
      b: blob,
      e: new Uint8Array(0),
      n: null,
      bigType: "integer",
      eType: "blob",
    });
    expect(Object.getPrototypeOf(row)).toBe(Object.prototype);
    expect(await db.get("SELECT * FROM v WHERE i = ?", 7)).toBeUndefined();
    expect(await db.all("SELECT value FROM json_each(?)", "[3,1,2]")).toEqual([{ value: 3 }, { value: 1 }, { value: 2 }]);
  });

  it("returns changed-row counts from run()", async () => {
    const db = await withRows(5);
    expect(await db.run("UPDATE t SET v = 'x' WHERE id > ?", 2)).toBe(3);
    expect(await db.run("DELETE FROM t")).toBe(5);
  });

  it("commits a transaction and returns the body's value", async () => {
    const db = await withRows(0);
    const result = await db.transaction((tx) => {
      tx.run("INSERT INTO t (id, v) VALUES (1, 'a')");
      return tx.get("SELECT count(*) AS n FROM t");
    });
    expect(result).toEqual({ n: 1 });
    expect(await db.all("SELECT id, v FROM t")).toEqual([{ id: 1, v: "a" }]);
  });

  it("rolls back a throwing transaction, rethrows the original error and leaves no trace", async () => {
    const db = await withRows(2);
    const boom = new Error("boom");
    const failed = db.transaction((tx) => {
      tx.run("INSERT INTO t (id, v) VALUES (3, 'c')");
      tx.run("UPDATE t SET v = 'changed'");
      tx.run("CREATE TABLE extra (x)");
      throw boom;
    });
    await expect(failed).rejects.toBe(boom);
    expect(await db.all("SELECT id, v FROM t ORDER BY id")).toEqual([
      { id: 1, v: "row 1" },
      { id: 2, v: "row 2" },
    ]);
    expect(await db.get("SELECT name FROM sqlite_schema WHERE name = 'extra'")).toBeUndefined();
    // The database is usable afterwards: no transaction was left open.
    await db.transaction((tx) => tx.run("INSERT INTO t (id, v) VALUES (3, 'c')"));
    expect(await db.get("SELECT count(*) AS n FROM t")).toEqual({ n: 3 });
  });

  it("rolls back when a statement inside the transaction fails and rethrows the SQLite error", async () => {
    const db = await withRows(1);
    const failed = db.transaction((tx) => {
      tx.run("INSERT INTO t (id, v) VALUES (2, 'b')");
      tx.run("INSERT INTO t (id, v) VALUES (1, 'duplicate')");
    });
    await expect(failed).rejects.toMatchObject({ name: "SQLite3Error", message: expect.stringContaining("UNIQUE constraint failed") });
    expect(await db.get("SELECT count(*) AS n FROM t")).toEqual({ n: 1 });
  });

  it("refuses an async transaction body and commits nothing", async () => {
    const db = await withRows(0);
    const failed = db.transaction(async (tx) => {
      tx.run("INSERT INTO t (id, v) VALUES (1, 'a')");
    });
    await expect(failed).rejects.toThrow(TypeError);
    expect(await db.get("SELECT count(*) AS n FROM t")).toEqual({ n: 0 });
  });

  it("refuses a transaction handle used after its transaction ended", async () => {
    const db = await withRows(0);
    const leaked = await db.transaction((tx) => tx);
    expect(() => leaked.run("INSERT INTO t (id, v) VALUES (1, 'a')")).toThrow(/after its transaction ended/);
  });

  it("serializes operations: a call made during a transaction runs after it, never inside it", async () => {
    const db = await withRows(0);
    let outside: Promise<number> | undefined;
    const seenInside = await db.transaction((tx) => {
      tx.run("INSERT INTO t (id, v) VALUES (1, 'inside')");
      outside = db.run("INSERT INTO t (id, v) VALUES (2, 'outside')");
      tx.run("INSERT INTO t (id, v) VALUES (3, 'inside')");
      return tx.all("SELECT id FROM t ORDER BY id");
    });
    expect(seenInside).toEqual([{ id: 1 }, { id: 3 }]);
    await outside;
    expect(await db.all("SELECT id FROM t ORDER BY id")).toEqual([{ id: 1 }, { id: 2 }, { id: 3 }]);
  });

  it("serializes concurrent read-modify-write transactions, and a failure does not block the queue", async () => {
    const db = await memory();
    await db.exec("CREATE TABLE counter (n INTEGER NOT NULL); INSERT INTO counter VALUES (0)");
    const increments = Array.from({ length: 50 }, (_, index) =>
      db.transaction((tx) => {
        const { n } = tx.get("SELECT n FROM counter") as { n: number };
        if (index === 10) throw new Error("one failure");
        tx.run("UPDATE counter SET n = ?", n + 1);
        return n + 1;
      }),
    );
    const results = await Promise.allSettled(increments);
    expect(results.filter((r) => r.status === "rejected")).toHaveLength(1);
    expect(await db.get("SELECT n FROM counter")).toEqual({ n: 49 });
  });

  it("copies a database through exportImage() into an independent database", async () => {
    const db = await withRows(300);
    const image = await db.exportImage();
    expect(new TextDecoder().decode(image.subarray(0, 15))).toBe("SQLite format 3");
    const copy = await memory({ image });
    expect(await copy.get("SELECT count(*) AS n, sum(id) AS s FROM t")).toEqual({ n: 300, s: 45150 });
    await copy.run("DELETE FROM t");
    await db.run("INSERT INTO t (id, v) VALUES (301, 'after export')");
    expect(await db.get("SELECT count(*) AS n FROM t")).toEqual({ n: 301 });
    expect(await copy.get("SELECT count(*) AS n FROM t")).toEqual({ n: 0 });
    // The caller's bytes are copied, not adopted.
    expect(image.byteLength).toBeGreaterThan(4096);
  });

  it("opens an image flagged as WAL (as exported from an OPFS file) in memory", async () => {
    const image = await (await withRows(3)).exportImage();
    image[18] = 2;
    image[19] = 2;
    const copy = await memory({ image });
    expect(await copy.get("SELECT count(*) AS n FROM t")).toEqual({ n: 3 });
    expect(image[18]).toBe(2); // the caller's array is untouched
  });

  it("refuses writes on a read-only image with ReadOnlySession, and still reads", async () => {
    const image = await (await withRows(3)).exportImage();
    const db = await memory({ image, readOnly: true });
    expect(db.readOnly).toBe(true);
    await expect(db.run("INSERT INTO t (id, v) VALUES (9, 'x')")).rejects.toThrow(ReadOnlySession);
    await expect(db.exec("CREATE TABLE x (a)")).rejects.toThrow(ReadOnlySession);
    await expect(db.transaction((tx) => tx.run("DELETE FROM t"))).rejects.toThrow(ReadOnlySession);
    expect(await db.transaction((tx) => tx.get("SELECT count(*) AS n FROM t"))).toEqual({ n: 3 });
    expect(await db.get("SELECT count(*) AS n FROM t")).toEqual({ n: 3 });
  });

  it("refuses writes on a fresh read-only database", async () => {
    const db = await memory({ readOnly: true });
    await expect(db.exec("CREATE TABLE x (a)")).rejects.toThrow(ReadOnlySession);
  });

  it("rejects bytes that are not a SQLite database with DatabaseCorrupt at open", async () => {
    const garbage = new Uint8Array(8192).map((_, index) => (index * 7919) & 0xff);
    await expect(openSqliteDatabase({ vfs: "memory", image: garbage })).rejects.toThrow(DatabaseCorrupt);
    await expect(openSqliteDatabase({ vfs: "memory", image: garbage })).rejects.toThrow(/not a SQLite database/);
  });

  it("rejects a database with damaged pages with DatabaseCorrupt at open", async () => {
    const image = await (await withRows(500)).exportImage();
    image.fill(0xab, 100, 4096); // page 1's b-tree (sqlite_schema), after the 100-byte file header
    await expect(openSqliteDatabase({ vfs: "memory", image })).rejects.toThrow(DatabaseCorrupt);
    const damagedData = await (await withRows(500)).exportImage();
    damagedData.fill(0x01, 3 * 4096 + 8, 4 * 4096); // a page of table t
    await expect(openSqliteDatabase({ vfs: "memory", image: damagedData })).rejects.toThrow(DatabaseCorrupt);
  });

  it("treats an empty image as a fresh database", async () => {
    const db = await memory({ image: new Uint8Array(0) });
    await db.exec("CREATE TABLE a (x)");
    expect(await db.all("SELECT name FROM sqlite_schema")).toEqual([{ name: "a" }]);
  });

  it("rejects every operation after close(), and close() is idempotent", async () => {
    const db = await withRows(1);
    const pending = db.get("SELECT count(*) AS n FROM t"); // queued before close: still answered
    const closing = db.close();
    expect(db.close()).toBe(closing);
    await closing;
    expect(await pending).toEqual({ n: 1 });
    await expect(db.get("SELECT 1")).rejects.toThrow(HarnessClosed);
    await expect(db.run("SELECT 1")).rejects.toThrow(HarnessClosed);
    await expect(db.all("SELECT 1")).rejects.toThrow(HarnessClosed);
    await expect(db.exec("SELECT 1")).rejects.toThrow(HarnessClosed);
    await expect(db.transaction(() => 1)).rejects.toThrow(/Database is closed/);
    await expect(db.exportImage()).rejects.toThrow(HarnessClosed);
    await db.close();
  });

  it("refuses several statements in run(), a wrong parameter count and an integer beyond 64 bits", async () => {
    const db = await withRows(0);
    await expect(db.run("INSERT INTO t (id, v) VALUES (1, 'a'); DELETE FROM t")).rejects.toThrow(/exactly one statement/);
    await expect(db.run("INSERT INTO t (id, v) VALUES (?, ?)", 1)).rejects.toThrow(RangeError);
    await expect(db.run("INSERT INTO t (id, v) VALUES (?, ?)", 2n ** 64n, "too big")).rejects.toThrow(RangeError);
    expect(await db.get("SELECT count(*) AS n FROM t")).toEqual({ n: 0 });
    expect(await db.get("SELECT 1 AS one; -- a trailing comment is fine")).toEqual({ one: 1 });
  });

  it("sees new columns through a cached SELECT * after the schema changed", async () => {
    const db = await withRows(1);
    expect(await db.get("SELECT * FROM t")).toEqual({ id: 1, v: "row 1" });
    await db.exec("ALTER TABLE t ADD COLUMN w TEXT DEFAULT 'w'");
    expect(await db.get("SELECT * FROM t")).toEqual({ id: 1, v: "row 1", w: "w" });
  });

  it("refuses opfs-sahpool outside a browser worker with StorageUnavailable", async () => {
    await expect(openSqliteDatabase({ vfs: "opfs-sahpool", maxWaitMs: 100 })).rejects.toThrow(StorageUnavailable);
  });
});
