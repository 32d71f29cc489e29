import fc from "fast-check";
import { afterEach, describe, expect, it, vi } from "vitest";
import { createRegistry, defineExtension, defineTask, Harness } from "../src/index.ts";
import type { SqliteDatabase, SqlValue } from "../src/storage/sqlite/database.ts";
import { openSqliteStorage } from "../src/storage/sqlite/open-storage.ts";
import { openSqliteDatabase } from "../src/storage/sqlite/wasm";
import { ctx } from "./support.ts";

/**
 * Decision 0085 (issue 25 item 4): `each` decodes its short texts a batch at a time — copied out of the wasm heap into
 * one buffer, one `TextDecoder.decode` for the batch, each text a slice of it when the batch is ASCII and decoded
 * from its own bytes otherwise. The rows must be exactly `all`'s, whatever the bytes (not UTF-8, a byte-order mark,
 * texts across the batch's limits), and the open's live read must not decode row by row.
 */

const open: SqliteDatabase[] = [];
afterEach(async () => {
  vi.restoreAllMocks();
  await Promise.all(open.splice(0).map((db) => db.close()));
});

async function table(): Promise<SqliteDatabase> {
  const db = await openSqliteDatabase({ vfs: "memory" });
  open.push(db);
  await db.exec("CREATE TABLE t (id INTEGER PRIMARY KEY, a, b TEXT)");
  return db;
}

async function eachRows(db: SqliteDatabase, sql: string): Promise<Array<Record<string, SqlValue>>> {
  const rows: Array<Record<string, SqlValue>> = [];
  await db.each!(sql, (row) => rows.push(row));
  return rows;
}

/** A value for column `a`: text of any kind (stored as bytes that may not be UTF-8), a number, null or a blob. */
type Cell = { text: string } | { bytes: readonly number[] } | { value: SqlValue };

async function insert(db: SqliteDatabase, id: number, a: Cell, b: Cell): Promise<void> {
  const sql = (cell: Cell) => ("bytes" in cell ? "CAST(? AS TEXT)" : "?");
  const param = (cell: Cell): SqlValue => ("text" in cell ? cell.text : "bytes" in cell ? new Uint8Array(cell.bytes) : cell.value);
  await db.run(`INSERT INTO t (id, a, b) VALUES (?, ${sql(a)}, ${sql(b)})`, id, param(a), param(b));
}

const cell: fc.Arbitrary<Cell> = fc.oneof(
  { weight: 4, arbitrary: fc.string({ unit: "grapheme-ascii", maxLength: 300 }).map((text) => ({ text })) },
  { weight: 2, arbitrary: fc.string({ unit: "grapheme", maxLength: 60 }).map((text) => ({ text })) },
  { weight: 2, arbitrary: fc.string({ unit: "binary", maxLength: 60 }).map((text) => ({ text })) },
  // Bytes that are not UTF-8 (a lone continuation byte, 0xFF, a cut sequence), with ASCII around them, and a BOM.
  {
    weight: 2,
    arbitrary: fc
      .array(fc.oneof(fc.integer({ min: 0x20, max: 0x7e }), fc.constantFrom(0x80, 0xbf, 0xc3, 0xe2, 0x82, 0xef, 0xbb, 0xff)), {
        minLength: 1,
        maxLength: 40,
      })
      .map((bytes) => ({ bytes })),
  },
  { weight: 1, arbitrary: fc.constant({ bytes: [0xef, 0xbb, 0xbf, 0x7b, 0x7d] }) },
  // Long texts: past the staged size (16 KiB), and enough of them to fill the 256 KiB stage within a run.
  { weight: 1, arbitrary: fc.integer({ min: 10_000, max: 40_000 }).map((length) => ({ text: "x".repeat(length) })) },
  { weight: 1, arbitrary: fc.oneof(fc.integer(), fc.double({ noNaN: true }), fc.constant(null)).map((value) => ({ value })) },
  { weight: 1, arbitrary: fc.uint8Array({ maxLength: 20 }).map((bytes) => ({ value: bytes })) },
);

describe("decision 0085: each() decodes a batch of texts at once", () => {
  it("hands exactly the rows all() reads, in order and with their keys in order, whatever the texts' bytes", async () => {
    await fc.assert(
      fc.asyncProperty(fc.array(fc.tuple(cell, cell), { maxLength: 40 }), async (cells) => {
        const db = await table();
        for (const [index, [a, b]] of cells.entries()) await insert(db, index + 1, a, b);
        const sql = "SELECT id, a, b, length(b) AS n FROM t ORDER BY id";
        const all = await db.all(sql);
        const each = await eachRows(db, sql);
        expect(each).toEqual(all);
        expect(each.map((row) => Object.keys(row))).toEqual(all.map((row) => Object.keys(row)));
        await db.close();
        open.pop();
      }),
      { numRuns: 60 },
    );
  });

  it("over batches of many rows, one of them not ASCII, reads every row as all() does", async () => {
    const db = await table();
    await db.exec("BEGIN");
    for (let id = 1; id <= 3_000; id++)
      await insert(db, id, { text: `{"id":${id},"text":"${id === 1_500 ? "é✓💥" : "y".repeat(id % 300)}"}` }, { value: id });
    await db.exec("COMMIT");
    const sql = "SELECT id, a, b FROM t ORDER BY id";
    expect(await eachRows(db, sql)).toEqual(await db.all(sql));
  });

  it("a row's callback that throws stops the read with its error, and the statement can be used again", async () => {
    const db = await table();
    for (let id = 1; id <= 10; id++) await insert(db, id, { text: `row ${id}` }, { value: null });
    let seen = 0;
    const failing = db.each!("SELECT id, a FROM t ORDER BY id", () => {
      if (++seen === 3) throw new Error("stop here");
    });
    await expect(failing).rejects.toThrow("stop here");
    expect(seen).toBe(3);
    expect((await eachRows(db, "SELECT id, a FROM t ORDER BY id")).map((row) => row.a)).toEqual(
      Array.from({ length: 10 }, (_, index) => `row ${index + 1}`),
    );
  });
});

const YEAR_MS = 365 * 24 * 3600 * 1000;
const idle = defineTask<null, { phase: "sleep" }, null>({
  name: "test.idle",
  version: 1,
  initial: () => ({ phase: "sleep" }),
  phases: { sleep: async (_task, runtime, context) => runtime.sleepUntil(runtime.now() + YEAR_MS, { phase: "sleep" }, context) },
  abort: async () => {},
});

describe("decision 0085: the open's live read", () => {
  it("decodes 3,000 live rows with a few TextDecoder calls, not one a row (fails on the old code: 3,000+)", async () => {
    const registry = () => createRegistry().install(defineExtension({ name: "t", tasks: [idle] }));
    const storage = await openSqliteStorage({ vfs: "memory" });
    const harness = await Harness.open(storage, { registry: registry() }, ctx);
    const root = await harness.root(ctx);
    await root.commit((tx) => {
      for (let index = 0; index < 3_000; index++) tx.createTask(idle, null);
    }, ctx);
    await harness.close(ctx);
    const image = await storage.exportImage();
    await storage.close();

    const reopened = await openSqliteStorage({ vfs: "memory", image });
    const decode = vi.spyOn(TextDecoder.prototype, "decode");
    const state = await reopened.load();
    expect(state.liveTasks.map((task) => task.id)).toEqual(Array.from({ length: 3_000 }, (_, index) => index + 2));
    expect(state.damaged).toBeUndefined();
    // 3,000 records of ~150 bytes: three batches of at most 1,024 rows, plus the small reads around the live one
    // (metadata, the conversation, the log's head), each of whose texts is still decoded alone. The old code: 3,000+.
    expect(decode.mock.calls.length).toBeLessThan(50);
    await reopened.close();
  });
});
