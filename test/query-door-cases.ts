/**
 * SQL for the read-only door (`storage.query()`), shared by the sqlite-wasm tests and the Durable Object ones:
 * a fixed table of attacks (issue 21 R1–R3), reads that must pass (R10: literals holding `;` or `pragma`), and
 * a fast-check generator of PRAGMAs in every spelling and of every statement kind.
 */
import fc from "fast-check";

/** PRAGMAs that set something; each must be refused in every spelling and leave the setting as it was. */
export const SETTING_ATTACKS = [
  "PRAGMA query_only = 1",
  "PRAGMA synchronous = OFF",
  "PRAGMA hard_heap_limit = 100000",
  "PRAGMA soft_heap_limit = 100000",
  "PRAGMA wal_autocheckpoint = 0",
  "/**/PRAGMA wal_autocheckpoint = 0",
  "-- a comment\nPRAGMA wal_autocheckpoint = 0",
  'PRAGMA "wal_autocheckpoint" = 0',
  "PRAGMA 'wal_autocheckpoint' = 0",
  "PRAGMA `wal_autocheckpoint` = 0",
  "PRAGMA [wal_autocheckpoint] = 0",
  "PRAGMA /* a comment */ wal_autocheckpoint = 0",
  "PRAGMA main.wal_autocheckpoint = 0",
  'PRAGMA "main"."synchronous" = 0',
  "EXPLAIN PRAGMA wal_autocheckpoint = 0",
  "EXPLAIN QUERY PLAN PRAGMA synchronous = OFF",
  "explain pragma case_sensitive_like = 1",
  "EXPLAIN PRAGMA case_sensitive_like = 1",
  "EXPLAIN PRAGMA reverse_unordered_selects = 1",
  "PRAGMA case_sensitive_like(1)",
  "PRAGMA reverse_unordered_selects = ON",
  "PRAGMA foreign_keys = OFF",
  "PRAGMA foreign_keys = ON",
  "PRAGMA recursive_triggers = 1",
  "PRAGMA defer_foreign_keys = 1",
  "PRAGMA ignore_check_constraints = 1",
  "PRAGMA legacy_alter_table = 1",
  "PRAGMA cache_size = 5",
  "PRAGMA busy_timeout = 5",
  "PRAGMA locking_mode = EXCLUSIVE",
  "PRAGMA journal_mode = DELETE",
  "PRAGMA user_version = 3",
  "PRAGMA query_only(0)",
  "PRAGMA optimize",
  "PRAGMA shrink_memory",
  "PRAGMA wal_checkpoint",
  "PRAGMA incremental_vacuum",
  "SELECT 1; PRAGMA synchronous = OFF",
  "PRAGMA synchronous = OFF; SELECT 1",
];

/** Statements that write or change the connection, of every kind. */
export const WRITE_ATTACKS = [
  "INSERT INTO pi_durable_meta (key, value) VALUES ('x', 'y')",
  "REPLACE INTO pi_durable_meta (key, value) VALUES ('schema_version', '99')",
  "UPDATE tasks SET status = 'x'",
  "DELETE FROM tasks",
  "WITH x AS (SELECT 1) DELETE FROM tasks",
  "WITH x AS (SELECT 1) DELETE FROM tasks WHERE id = -1",
  "CREATE TABLE t (a)",
  "CREATE TEMP TABLE t (a)",
  "CREATE INDEX i ON tasks (kind)",
  "CREATE VIEW v AS SELECT 1",
  "CREATE TRIGGER tr AFTER INSERT ON pi_durable_meta BEGIN SELECT 1; END",
  "DROP TABLE tasks",
  "DROP TABLE IF EXISTS pi_durable_meta",
  "ALTER TABLE tasks ADD COLUMN z",
  "ATTACH ':memory:' AS other",
  "DETACH other",
  "VACUUM",
  "BEGIN",
  "BEGIN IMMEDIATE",
  "COMMIT",
  "ROLLBACK",
  "SAVEPOINT s",
  "RELEASE s",
  "REINDEX",
  "ANALYZE",
  "EXPLAIN DELETE FROM tasks",
  "SELECT 1; DELETE FROM tasks",
];

/** Reads that must pass, with the rows they answer. */
export const READS: Array<[string, Array<Record<string, unknown>>]> = [
  ["SELECT ';' AS x", [{ x: ";" }]],
  ["SELECT 'a;b' AS x;", [{ x: "a;b" }]],
  ["SELECT 'PRAGMA synchronous = OFF' AS x", [{ x: "PRAGMA synchronous = OFF" }]],
  ["SELECT 'pragma query_only = 1; DELETE FROM tasks' AS x", [{ x: "pragma query_only = 1; DELETE FROM tasks" }]],
  ["SELECT '--' AS x, '/*' AS y", [{ x: "--", y: "/*" }]],
  ['SELECT 1 AS "a;b"', [{ "a;b": 1 }]],
  ["/* leading */ SELECT 2 AS n -- trailing; with a semicolon", [{ n: 2 }]],
  ["-- leading\nSELECT 3 AS n;", [{ n: 3 }]],
  ["SELECT count(*) AS n FROM tasks WHERE kind = 'x;DELETE FROM tasks'", [{ n: 0 }]],
  ["WITH RECURSIVE c(x) AS (SELECT 1 UNION ALL SELECT x + 1 FROM c LIMIT 3) SELECT sum(x) AS n FROM c", [{ n: 6 }]],
  ["SELECT name FROM pragma_table_info('pi_durable_meta') ORDER BY cid", [{ name: "key" }, { name: "value" }]],
  ["PRAGMA table_info(pi_durable_meta)", expectTwoRows()],
  ["PRAGMA foreign_keys", expectOneRow()],
];

function expectTwoRows(): Array<Record<string, unknown>> {
  return [expectAnything(), expectAnything()];
}
function expectOneRow(): Array<Record<string, unknown>> {
  return [expectAnything()];
}
/** A row whose values the table does not pin (PRAGMA output differs between runtimes). */
function expectAnything(): Record<string, unknown> {
  return { "*": "any" };
}

/** Whether `rows` match the expectation of READS (a `{ "*": "any" }` row matches any row). */
export function rowsMatch(rows: Array<Record<string, unknown>>, expected: Array<Record<string, unknown>>): boolean {
  if (rows.length !== expected.length) return false;
  return expected.every((want, i) => want["*"] === "any" || JSON.stringify(rows[i]) === JSON.stringify(want));
}

/** Statements SQLite cannot prepare: each must be `QueryFailed` with SQLite's words, not a refusal and not a crash. */
export const BROKEN: Array<[string, RegExp]> = [
  ["SELECT no_such_column FROM tasks", /no such column: no_such_column/],
  ["SELECT * FROM no_such_table", /no such table: no_such_table/],
  ["SELEC 1", /syntax error/],
  ["EXPLAIN", /incomplete input|syntax error/],
  ["EXPLAIN QUERY PLAN", /incomplete input|syntax error/],
  ["SELECT 'unterminated", /unrecognized token|incomplete input/],
];

/** A SELECT that is longer than any kernel statement: 60 KB of SQL. */
export const LONG_SELECT = `SELECT length('${"x".repeat(60_000)}') AS n`;

// ----------------------------------------------------------------------------------------------------------
// Generated SQL

const PRAGMA_NAMES = [
  "query_only",
  "synchronous",
  "journal_mode",
  "wal_autocheckpoint",
  "hard_heap_limit",
  "soft_heap_limit",
  "case_sensitive_like",
  "reverse_unordered_selects",
  "foreign_keys",
  "recursive_triggers",
  "cache_size",
  "busy_timeout",
  "locking_mode",
  "user_version",
  "application_id",
  "temp_store",
  "secure_delete",
  "automatic_index",
  "defer_foreign_keys",
  "ignore_check_constraints",
  "legacy_alter_table",
  "cell_size_check",
  "trusted_schema",
  "writable_schema",
  "threads",
  "analysis_limit",
  "journal_size_limit",
  "mmap_size",
  "max_page_count",
  "cache_spill",
  "read_uncommitted",
  "count_changes",
  "full_column_names",
  "optimize",
  "shrink_memory",
  "wal_checkpoint",
  "incremental_vacuum",
  "table_info",
  "integrity_check",
  "quick_check",
  "data_version",
  "schema_version",
  "page_count",
];
const VALUES = ["0", "1", "-1", "ON", "off", "'OFF'", '"NORMAL"', "FULL", "100000", "EXCLUSIVE", "DELETE", "WAL", "MEMORY", "tasks", "2"];
const QUOTES: Array<(name: string) => string> = [
  (n) => n,
  (n) => n.toUpperCase(),
  (n) => `"${n}"`,
  (n) => `'${n}'`,
  (n) => `\`${n}\``,
  (n) => `[${n}]`,
];
const GAPS = [" ", "  ", "\n", " /* c */ ", "/**/", " -- c\n", "\t"];
const LEADS = [
  "",
  "/**/",
  "-- lead\n",
  "/* a\nb */ ",
  "\n  ",
  "EXPLAIN ",
  "explain query plan ",
  "/**/EXPLAIN/**/",
  "-- x\nEXPLAIN QUERY PLAN ",
];
const TAILS = ["", ";", "; ", "; -- end", ";;", "; SELECT 1", "; PRAGMA synchronous = OFF", " -- end"];

const gap = fc.constantFrom(...GAPS);

/** A PRAGMA in any spelling: comments, quotes, case, a schema prefix, `EXPLAIN`, a value or none. */
export const pragmaSql: fc.Arbitrary<{ sql: string; mayPass: boolean }> = fc
  .record({
    lead: fc.constantFrom(...LEADS),
    name: fc.constantFrom(...PRAGMA_NAMES),
    quote: fc.constantFrom(...QUOTES),
    schema: fc.constantFrom("", "main.", '"main".', "temp.", "MAIN."),
    value: fc.option(fc.constantFrom(...VALUES), { nil: undefined }),
    form: fc.constantFrom("=", "()"),
    gaps: fc.tuple(gap, gap, gap),
    tail: fc.constantFrom(...TAILS),
  })
  .map(({ lead, name, quote, schema, value, form, gaps, tail }) => {
    const head = `${lead}PRAGMA${gaps[0]}${schema}${quote(name)}`;
    const argument = value === undefined ? "" : form === "=" ? `${gaps[1]}=${gaps[2]}${value}` : `${gaps[1]}(${value})`;
    // Only a PRAGMA that asks, or describes a table, may pass — and never with a second statement after it.
    const asks = value === undefined || ["table_info", "integrity_check", "quick_check"].includes(name);
    return { sql: `${head}${argument}${tail}`, mayPass: asks && !/SELECT|PRAGMA/.test(tail) };
  });

/** A statement of any other kind, with leading comments or EXPLAIN sometimes. */
export const writeSql: fc.Arbitrary<string> = fc
  .record({ lead: fc.constantFrom(...LEADS), statement: fc.constantFrom(...WRITE_ATTACKS), tail: fc.constantFrom(...TAILS) })
  .map(({ lead, statement, tail }) => `${lead}${statement}${tail}`);

/** A string literal of arbitrary text (quotes doubled), so reads carry `;`, `--`, `pragma` and the like. */
const literal = fc
  .oneof(
    fc.string({ maxLength: 40 }).filter((text) => !text.includes("\0")),
    fc.constantFrom(";", "--", "/*", "*/", "pragma query_only = 1;", "'; DELETE FROM tasks; --", '"'),
  )
  .map((text) => `'${text.replaceAll("'", "''")}'`);

/** A read-only SELECT with tricky literals: it must pass and answer the literal. */
export const readSql: fc.Arbitrary<{ sql: string; text: string }> = fc
  .record({
    lead: fc.constantFrom("", "/**/", "-- lead\n", "/* x; y */ "),
    value: literal,
    tail: fc.constantFrom("", ";", " -- end;", "; "),
  })
  .map(({ lead, value, tail }) => ({ sql: `${lead}SELECT ${value} AS v${tail}`, text: value.slice(1, -1).replaceAll("''", "'") }));

/** Any statement for the door, tagged with what it is. */
export type DoorCase =
  | { kind: "pragma"; sql: string; mayPass: boolean }
  | { kind: "write"; sql: string }
  | { kind: "read"; sql: string; text: string };

export const doorCase: fc.Arbitrary<DoorCase> = fc.oneof(
  { weight: 5, arbitrary: pragmaSql.map((pragma) => ({ kind: "pragma" as const, ...pragma })) },
  { weight: 3, arbitrary: writeSql.map((sql) => ({ kind: "write" as const, sql })) },
  { weight: 2, arbitrary: readSql.map((read) => ({ kind: "read" as const, ...read })) },
);

/** The errors the door may answer with: it refuses, or SQLite reports the statement's own error. */
export const DOOR_ERRORS = ["QueryNotReadOnly", "QueryFailed"];

/**
 * Whether the door's answer for a generated case is allowed: a read answers its literal; a write is never
 * accepted; a PRAGMA with a value is accepted only when its value names a table to describe.
 */
export function answerAllowed(c: DoorCase, answer: { rows?: Array<Record<string, unknown>>; error?: string }): boolean {
  if (answer.error !== undefined) return c.kind !== "read" && DOOR_ERRORS.includes(answer.error);
  if (c.kind === "read") return answer.rows?.length === 1 && answer.rows[0]!.v === c.text;
  if (c.kind === "write") return false;
  return c.mayPass;
}
