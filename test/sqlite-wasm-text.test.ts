import fc from "fast-check";
import { afterEach, describe, expect, it } from "vitest";
import type { SqliteDatabase } from "../src/storage/sqlite/database.ts";
import { openSqliteDatabase } from "../src/storage/sqlite/wasm";

// Text goes into and out of the wasm heap without the library's string helpers (encoded in place, decoded
// with SQLite's own length), and long bursts of operations give the event loop a turn.

const open: SqliteDatabase[] = [];

async function memory(): Promise<SqliteDatabase> {
  const db = await openSqliteDatabase({ vfs: "memory" });
  open.push(db);
  await db.exec("CREATE TABLE t (id INTEGER PRIMARY KEY, v TEXT)");
  return db;
}

afterEach(async () => {
  await Promise.all(open.splice(0).map((db) => db.close()));
});

describe("sqlite-wasm text values", () => {
  it("round-trips text of every UTF-8 width, empty text and an embedded NUL, with SQLite seeing the same characters", async () => {
    const db = await memory();
    const texts = ["", "plain", "héllo ✓", "emoji 💥 and 𝄞", "nul\u0000inside", "€".repeat(70_000), "x".repeat(200_000)];
    for (const [index, text] of texts.entries()) await db.run("INSERT INTO t (id, v) VALUES (?, ?)", index, text);
    const rows = await db.all("SELECT v, length(v) AS chars, typeof(v) AS type FROM t ORDER BY id");
    expect(rows.map((row) => row.v)).toEqual(texts);
    expect(rows.map((row) => row.type)).toEqual(texts.map(() => "text"));
    // SQLite counts characters up to a NUL; a surrogate pair is one character.
    expect(rows.map((row) => row.chars)).toEqual([0, 5, 7, 13, 3, 70_000, 200_000]);
  });

  it("decision 0060: a statement's texts bound from one block read back exactly, ASCII or not, empty, NUL, beside other values", async () => {
    const db = await memory();
    await db.exec("CREATE TABLE m (id INTEGER PRIMARY KEY, a TEXT, b, c TEXT, d TEXT)");
    const value = fc.oneof(fc.string({ unit: "grapheme-ascii" }), fc.string({ unit: "binary" }), fc.integer(), fc.constant(null));
    let id = 0;
    await fc.assert(
      fc.asyncProperty(fc.string({ unit: "grapheme-ascii" }), value, fc.string(), fc.string({ unit: "binary" }), async (a, b, c, d) => {
        id++;
        // Twice in one statement and again through the cache: the block is freed and made again each time.
        await db.run("INSERT INTO m (id, a, b, c, d) VALUES (?, ?, ?, ?, ?)", id, a, b, c, d);
        await db.run("UPDATE m SET a = ?, d = ? WHERE id = ?", d, a, id);
        const row = await db.get("SELECT a, b, c, d, length(CAST(d AS BLOB)) AS bytes FROM m WHERE id = ?", id);
        const expected = (text: string) =>
          text.replace(/[\ud800-\udbff](?![\udc00-\udfff])|(?<![\ud800-\udbff])[\udc00-\udfff]/g, "\ufffd");
        expect(row).toEqual({
          a: expected(d),
          b: typeof b === "string" ? expected(b) : b,
          c: expected(c),
          d: expected(a),
          bytes: new TextEncoder().encode(a).length,
        });
      }),
      { numRuns: 300 },
    );
  });

  it("stores a lone surrogate as U+FFFD, as the library's encoder does", async () => {
    const db = await memory();
    await db.run("INSERT INTO t (id, v) VALUES (1, ?)", "a\ud800b");
    expect((await db.get("SELECT v FROM t"))?.v).toBe("a\ufffdb");
  });
});

describe("sqlite-wasm event loop", () => {
  it("lets a timer fire during a long burst of back-to-back operations", async () => {
    const db = await memory();
    let fired = false;
    setTimeout(() => (fired = true), 0);
    const started = performance.now();
    // Each operation resolves in a microtask; without a turn of the event loop the timer would never fire.
    while (!fired && performance.now() - started < 3000) await db.run("INSERT INTO t (v) VALUES ('burst')");
    expect(fired).toBe(true);
  });
});
