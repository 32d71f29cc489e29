/**
 * The read-only door of sqlite-wasm (`storage.query()`, B10, issue 21 R1/R2/R10, issue 22 item 7): a statement
 * is decided before it changes anything — a refused one leaves every connection setting and every row as it
 * was, an accepted one too — SQL errors are reported as SQLite's, and a query stops at its limits.
 */
import { createHash } from "node:crypto";
import fc from "fast-check";
import { describe, expect, it } from "vitest";
import {
  createRegistry,
  defineExtension,
  defineTask,
  Harness,
  InvalidSetting,
  QueryFailed,
  QueryLimitExceeded,
  QueryNotReadOnly,
} from "../src/index.ts";
import { openSqliteStorage } from "../src/storage/sqlite/open-storage.ts";
import type { SqliteStorage } from "../src/storage/sqlite/storage.ts";
import { loadSqlite } from "../src/storage/sqlite/wasm/module.ts";
import { answerAllowed, BROKEN, doorCase, LONG_SELECT, READS, rowsMatch, SETTING_ATTACKS, WRITE_ATTACKS } from "./query-door-cases.ts";
import { ctx } from "./support.ts";

/** Every connection setting the door must leave alone, read straight on the connection. */
const SETTINGS = [
  "query_only",
  "synchronous",
  "journal_mode",
  "wal_autocheckpoint",
  "hard_heap_limit",
  "soft_heap_limit",
  "reverse_unordered_selects",
  "foreign_keys",
  "recursive_triggers",
  "defer_foreign_keys",
  "ignore_check_constraints",
  "legacy_alter_table",
  "cache_size",
  "busy_timeout",
  "locking_mode",
  "temp_store",
  "secure_delete",
  "automatic_index",
  "cell_size_check",
  "trusted_schema",
  "writable_schema",
  "threads",
  "analysis_limit",
  "journal_size_limit",
  "user_version",
  "application_id",
  "read_uncommitted",
  "cache_spill",
];

const idle = defineTask<null, { phase: "go" }, string>({
  name: "test.idle",
  version: 1,
  initial: () => ({ phase: "go" }),
  phases: { go: async () => {} },
  abort: async () => {},
});
const registry = createRegistry().install(defineExtension({ name: "test", tasks: [idle] }));

/** A database with a conversation and a task in it. */
async function seeded(options: Parameters<typeof openSqliteStorage>[0] = { vfs: "memory" }): Promise<SqliteStorage> {
  const storage = await openSqliteStorage(options);
  const harness = await Harness.open(storage, { registry }, ctx);
  const root = await harness.root(ctx);
  await root.commit((tx) => tx.createTask(idle, null), ctx);
  await harness.close(ctx);
  return storage;
}

/** The connection's settings, LIKE's case rule (case_sensitive_like has no read form) and every row. */
async function state(storage: SqliteStorage): Promise<{ settings: Record<string, unknown>; image: string }> {
  const db = storage.database;
  const settings: Record<string, unknown> = {};
  for (const name of SETTINGS) settings[name] = Object.values((await db.get(`PRAGMA ${name}`)) ?? {})[0];
  settings.like = (await db.get("SELECT 'a' LIKE 'A' AS x"))!.x;
  settings.order = (await db.all("SELECT key FROM pi_durable_meta")).map((row) => row.key).join(); // reverse_unordered_selects
  return {
    settings,
    image: createHash("sha256")
      .update(await storage.exportImage())
      .digest("hex"),
  };
}

/** A commit through the harness works, and is there afterwards. */
async function commitStillWorks(storage: SqliteStorage): Promise<void> {
  const harness = await Harness.open(storage, { registry }, ctx);
  const root = await harness.root(ctx);
  const before = (await storage.query("SELECT count(*) AS n FROM tasks"))[0]!.n as number;
  await root.commit((tx) => tx.createTask(idle, null), ctx);
  expect((await storage.query("SELECT count(*) AS n FROM tasks"))[0]!.n).toBe(before + 1);
  await harness.close(ctx);
}

async function outcome(storage: SqliteStorage, sql: string): Promise<{ rows?: Array<Record<string, unknown>>; error?: string }> {
  try {
    return { rows: await storage.query(sql) };
  } catch (error) {
    return { error: (error as Error).name };
  }
}

describe("B10: the read-only door decides without touching the live connection (issue 21 R1, R2, R10)", () => {
  it("R1: PRAGMA query_only = 1 is refused and not applied: the next commit goes through", async () => {
    const storage = await seeded();
    await expect(storage.query("PRAGMA query_only = 1")).rejects.toBeInstanceOf(QueryNotReadOnly);
    expect(await storage.database.get("PRAGMA query_only")).toEqual({ query_only: 0 });
    await commitStillWorks(storage);
  });

  it("R1: PRAGMA synchronous = OFF is refused and synchronous stays as it was", async () => {
    const storage = await seeded();
    const before = await storage.database.get("PRAGMA synchronous");
    await expect(storage.query("PRAGMA synchronous = OFF")).rejects.toBeInstanceOf(QueryNotReadOnly);
    expect(await storage.database.get("PRAGMA synchronous")).toEqual(before);
  });

  it("R1: PRAGMA hard_heap_limit = 100000 is refused and not applied: later calls still allocate", async () => {
    const storage = await seeded();
    await expect(storage.query("PRAGMA hard_heap_limit = 100000")).rejects.toBeInstanceOf(QueryNotReadOnly);
    expect(await storage.database.get("PRAGMA hard_heap_limit")).toEqual({ hard_heap_limit: 0 });
    expect((await storage.query("SELECT length(zeroblob(2000000)) AS n"))[0]).toEqual({ n: 2_000_000 });
    await commitStillWorks(storage);
  });

  it("R2: every spelling of a setting PRAGMA (comments, quotes, schema, EXPLAIN, a second statement) is refused and changes nothing", async () => {
    const storage = await seeded();
    const before = await state(storage);
    for (const sql of SETTING_ATTACKS) {
      expect((await outcome(storage, sql)).error, sql).toBe("QueryNotReadOnly");
      expect(await state(storage), sql).toEqual(before);
    }
    await commitStillWorks(storage);
  });

  it("every kind of statement that writes or changes the connection is refused and changes nothing", async () => {
    const storage = await seeded();
    const before = await state(storage);
    for (const sql of WRITE_ATTACKS) {
      expect(DOOR_REFUSALS, sql).toContain((await outcome(storage, sql)).error);
      expect(await state(storage), sql).toEqual(before);
    }
    await commitStillWorks(storage);
  });

  it("R10: a typo is SQLite's own error (QueryFailed: no such column), not a refusal", async () => {
    const storage = await seeded();
    const error = await storage.query("SELECT no_such_column FROM tasks").catch((e: unknown) => e);
    expect(error).toBeInstanceOf(QueryFailed);
    expect((error as Error).message).toMatch(/no such column: no_such_column/);
    for (const [sql, words] of BROKEN) {
      const failure = await storage.query(sql).catch((e: unknown) => e);
      expect(failure, sql).toBeInstanceOf(QueryFailed);
      expect((failure as Error).message, sql).toMatch(words);
    }
  });

  it("R10: no false positives: literals holding ';' or 'pragma', comments, a long SELECT, table-valued pragmas", async () => {
    const storage = await seeded();
    const before = await state(storage);
    for (const [sql, rows] of READS) expect(rowsMatch(await storage.query(sql), rows), sql).toBe(true);
    expect(await storage.query(LONG_SELECT)).toEqual([{ n: 60_000 }]);
    expect(await storage.query("SELECT ? AS a, ? AS b", "x;y", { pragma: "query_only = 1" })).toEqual([
      { a: "x;y", b: '{"pragma":"query_only = 1"}' },
    ]);
    expect(await state(storage)).toEqual(before);
  });

  it("property: generated PRAGMAs in every spelling, statements of every kind and tricky reads change no setting and no row", async () => {
    const storage = await seeded();
    const before = await state(storage);
    await fc.assert(
      fc.asyncProperty(fc.array(doorCase, { minLength: 1, maxLength: 8 }), async (cases) => {
        for (const c of cases) {
          const answer = await outcome(storage, c.sql);
          if (!answerAllowed(c, answer)) throw new Error(`${JSON.stringify(c.sql)} answered ${JSON.stringify(answer)}`);
          const now = await state(storage);
          expect(now, c.sql).toEqual(before);
        }
      }),
      { numRuns: 120 },
    );
    await commitStillWorks(storage);
  });
});

const DOOR_REFUSALS = ["QueryNotReadOnly", "QueryFailed"];

describe("issue 22 item 7: a query returns a bounded number of rows and bytes and takes a bounded number of steps", () => {
  it("a 20 M-row recursive CTE is stopped by the step budget (QueryLimitExceeded maxSteps) and the database still works", async () => {
    const storage = await seeded();
    const count = "WITH RECURSIVE c(x) AS (SELECT 1 UNION ALL SELECT x + 1 FROM c LIMIT 20000000) SELECT count(*) AS n FROM c";
    const error = await storage.query(count).catch((e: unknown) => e);
    expect(error).toBeInstanceOf(QueryLimitExceeded);
    expect(error).toMatchObject({ limit: "maxSteps", value: 10_000_000 });
    await commitStillWorks(storage);
  });

  it("more rows than maxRows, or more bytes than maxBytes, is QueryLimitExceeded; up to the limit is answered whole", async () => {
    const storage = await seeded({ vfs: "memory", queryLimits: { maxRows: 100, maxBytes: 10_000 } });
    const rows = (n: number) => `WITH RECURSIVE c(x) AS (SELECT 1 UNION ALL SELECT x + 1 FROM c LIMIT ${n}) SELECT x FROM c`;
    expect(await storage.query(rows(100))).toHaveLength(100);
    await expect(storage.query(rows(101))).rejects.toMatchObject({ name: "QueryLimitExceeded", limit: "maxRows", value: 100 });
    expect(await storage.query("SELECT zeroblob(9000) AS b")).toHaveLength(1);
    await expect(storage.query("SELECT zeroblob(10001) AS b")).rejects.toMatchObject({ limit: "maxBytes", value: 10_000 });
    await expect(storage.query(`SELECT '${"é".repeat(5001)}' AS t`)).rejects.toMatchObject({ limit: "maxBytes" }); // UTF-8 bytes
  });

  it("a huge value made inside the statement is refused before it is allocated: the wasm memory does not grow", async () => {
    const storage = await seeded();
    const { wasm } = await loadSqlite();
    const before = wasm.heap8u().byteLength;
    await expect(storage.query("SELECT length(randomblob(900000000)) AS n")).rejects.toMatchObject({
      name: "QueryLimitExceeded",
      limit: "maxBytes",
      value: 4 * 1024 * 1024,
    });
    expect(wasm.heap8u().byteLength).toBe(before);
    // The connection's own limit is back: the harness can still store a value larger than a query's cap.
    const big = "x".repeat(5 * 1024 * 1024);
    await storage.database.run("INSERT INTO pi_durable_meta (key, value) VALUES ('big', ?)", big);
    expect((await storage.database.get("SELECT length(value) AS n FROM pi_durable_meta WHERE key = 'big'"))!.n).toBe(big.length);
  });

  it("the defaults are 10,000 rows, 4 MiB and 10 M steps; a bad limit is InvalidSetting before the database is opened", async () => {
    const storage = await openSqliteStorage({ vfs: "memory" });
    expect(storage.queryLimits).toEqual({ maxRows: 10_000, maxBytes: 4 * 1024 * 1024, maxSteps: 10_000_000 });
    await expect(openSqliteStorage({ vfs: "memory", queryLimits: { maxRows: 0 } })).rejects.toBeInstanceOf(InvalidSetting);
    await expect(openSqliteStorage({ vfs: "memory", queryLimits: { maxSteps: 1.5 } })).rejects.toBeInstanceOf(InvalidSetting);
  });
});
