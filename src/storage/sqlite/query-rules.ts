/**
 * What a read-only query (`storage.query()`, the door pages reach) may be, shared by every SQLite adapter:
 * which PRAGMAs only read, the limits on what one query may return and cost, and a tokenizer for adapters that
 * must decide from the text (a Durable Object has no authorizer). See docs/decisions/0020.
 */
import { InvalidSetting } from "../../errors.ts";

/** PRAGMAs that only report a setting or describe the schema when given no argument. Anything else is refused. */
const READ_PRAGMAS = new Set([
  "analysis_limit",
  "application_id",
  "auto_vacuum",
  "automatic_index",
  "busy_timeout",
  "cache_size",
  "cache_spill",
  "cell_size_check",
  "checkpoint_fullfsync",
  "collation_list",
  "compile_options",
  "count_changes",
  "data_version",
  "database_list",
  "defer_foreign_keys",
  "empty_result_callbacks",
  "encoding",
  "foreign_key_check",
  "foreign_keys",
  "freelist_count",
  "full_column_names",
  "fullfsync",
  "function_list",
  "hard_heap_limit",
  "ignore_check_constraints",
  "integrity_check",
  "journal_mode",
  "journal_size_limit",
  "legacy_alter_table",
  "locking_mode",
  "max_page_count",
  "mmap_size",
  "module_list",
  "page_count",
  "page_size",
  "pragma_list",
  "query_only",
  "quick_check",
  "read_uncommitted",
  "recursive_triggers",
  "reverse_unordered_selects",
  "schema_version",
  "secure_delete",
  "short_column_names",
  "soft_heap_limit",
  "synchronous",
  "table_list",
  "temp_store",
  "threads",
  "trusted_schema",
  "user_version",
  "wal_autocheckpoint",
  "writable_schema",
]);

/** PRAGMAs whose argument only names what to read (a table, an index, a number of problems to list). */
const TABLE_PRAGMAS = new Set([
  "table_info",
  "table_xinfo",
  "table_list",
  "index_list",
  "index_info",
  "index_xinfo",
  "foreign_key_list",
  "foreign_key_check",
  "integrity_check",
  "quick_check",
]);

/**
 * Whether `PRAGMA name` (with an argument when `hasArgument`) only reads. `PRAGMA synchronous` reads,
 * `PRAGMA synchronous = OFF` does not; `wal_checkpoint`, `optimize`, `shrink_memory` and unknown names never do.
 */
export function pragmaOnlyReads(name: string, hasArgument: boolean): boolean {
  const lower = name.toLowerCase();
  return hasArgument ? TABLE_PRAGMAS.has(lower) : READ_PRAGMAS.has(lower);
}

/**
 * How much one read-only query may return and cost. Exceeding a limit is a `QueryLimitExceeded` error (the
 * answer is never silently cut short); raise a limit where the storage is opened
 * (`SqliteStorage.open(db, label, { queryLimits })`, `openSqliteStorage({ …, queryLimits })`).
 */
export interface QueryLimits {
  /** Rows one query may return. Default 10,000. */
  readonly maxRows: number;
  /**
   * Bytes one query may return: UTF-8 bytes of text, bytes of BLOBs, 8 for any other value. Default 4 MiB
   * (an answer crosses to the page as one message). On sqlite-wasm it also bounds every single text or BLOB the
   * statement makes or reads (SQLITE_LIMIT_LENGTH), so `randomblob(900000000)` is refused before it allocates.
   */
  readonly maxBytes: number;
  /**
   * SQLite virtual-machine steps one query may take (sqlite-wasm's progress handler; a step is one opcode,
   * a row of a recursive CTE takes about 16). Default 10,000,000 — about 0.5–2 s of wasm on the test machine:
   * a recursive CTE of 20 M rows is stopped after about 600,000. A Durable Object's SQLite offers no such
   * budget; there `maxRows` and `maxBytes` stop a query between rows, and the object's CPU limit within one.
   */
  readonly maxSteps: number;
}

export const DEFAULT_QUERY_LIMITS: QueryLimits = Object.freeze({ maxRows: 10_000, maxBytes: 4 * 1024 * 1024, maxSteps: 10_000_000 });

/** The limits with the caller's overrides, each a positive integer (anything else is an `InvalidSetting`). */
export function queryLimits(overrides: Partial<QueryLimits> = {}): QueryLimits {
  const limits: Record<string, unknown> = { ...DEFAULT_QUERY_LIMITS };
  for (const [name, value] of Object.entries(overrides)) if (value !== undefined) limits[name] = value;
  for (const [name, value] of Object.entries(limits)) {
    if (typeof value !== "number" || !Number.isSafeInteger(value) || value < 1)
      throw new InvalidSetting(`queryLimits.${name} must be a positive integer, got ${String(value)}; leave it out for the default.`);
  }
  return Object.freeze(limits) as unknown as QueryLimits;
}

/** The bytes a value counts against `maxBytes`. */
export function valueBytes(value: unknown): number {
  if (typeof value === "string") return utf8Length(value);
  if (value instanceof Uint8Array || value instanceof ArrayBuffer) return value.byteLength;
  return 8;
}

function utf8Length(text: string): number {
  let bytes = text.length;
  for (let i = 0; i < text.length; i++) {
    const code = text.charCodeAt(i);
    if (code < 0x80) continue;
    if (code < 0x800) {
      bytes += 1;
    } else if (code >= 0xd800 && code <= 0xdbff) {
      bytes += 2; // a surrogate pair: 4 bytes for its 2 units
      i++;
    } else {
      bytes += 2;
    }
  }
  return bytes;
}

/** A token of SQL text, as SQLite's tokenizer splits it (whitespace and comments dropped). */
export interface SqlToken {
  readonly kind: "word" | "string" | "quoted" | "symbol";
  /** Words upper-cased; quoted names and strings with their quotes removed. */
  readonly value: string;
  readonly start: number;
  readonly end: number;
}

/**
 * The tokens of `sql` split into statements at each `;` outside literals, quoted names and comments; empty
 * statements (only comments, or nothing between two `;`) left out.
 */
export function sqlStatements(sql: string): SqlToken[][] {
  const statements: SqlToken[][] = [];
  let current: SqlToken[] = [];
  let i = 0;
  while (i < sql.length) {
    const ch = sql[i]!;
    if (/\s/.test(ch)) {
      i++;
    } else if (ch === "-" && sql[i + 1] === "-") {
      const end = sql.indexOf("\n", i);
      i = end < 0 ? sql.length : end + 1;
    } else if (ch === "/" && sql[i + 1] === "*") {
      const end = sql.indexOf("*/", i + 2);
      i = end < 0 ? sql.length : end + 2;
    } else if (ch === "'" || ch === '"' || ch === "`" || ch === "[") {
      const close = ch === "[" ? "]" : ch;
      let j = i + 1;
      let value = "";
      for (;;) {
        const end = sql.indexOf(close, j);
        if (end < 0) {
          value += sql.slice(j);
          j = sql.length;
          break;
        }
        value += sql.slice(j, end);
        j = end + 1;
        if (close !== "]" && sql[j] === close) {
          value += close; // a doubled quote is one quote character
          j++;
          continue;
        }
        break;
      }
      current.push({ kind: ch === "'" ? "string" : "quoted", value, start: i, end: j });
      i = j;
    } else if (ch === ";") {
      if (current.length > 0) statements.push(current);
      current = [];
      i++;
    } else if (/[\w$\u0080-\uffff]/.test(ch)) {
      let j = i + 1;
      while (j < sql.length && /[\w$\u0080-\uffff]/.test(sql[j]!)) j++;
      current.push({ kind: "word", value: sql.slice(i, j).toUpperCase(), start: i, end: j });
      i = j;
    } else {
      current.push({ kind: "symbol", value: ch, start: i, end: i + 1 });
      i++;
    }
  }
  if (current.length > 0) statements.push(current);
  return statements;
}

/** A statement read from its tokens: what follows a leading `EXPLAIN` / `EXPLAIN QUERY PLAN`, and its PRAGMA if it is one. */
export interface StatementShape {
  /** Index of the first token after `EXPLAIN [QUERY PLAN]`. */
  readonly body: number;
  /** For a PRAGMA: its name and whether it has an argument; `null` for a PRAGMA that does not parse. */
  readonly pragma?: { readonly name: string; readonly hasArgument: boolean } | null;
}

export function statementShape(tokens: readonly SqlToken[]): StatementShape {
  let body = 0;
  if (isWord(tokens[0], "EXPLAIN")) {
    body = isWord(tokens[1], "QUERY") && isWord(tokens[2], "PLAN") ? 3 : 1;
  }
  if (!isWord(tokens[body], "PRAGMA")) return { body };
  const rest = tokens.slice(body + 1);
  let at = 0;
  if (rest[1]?.kind === "symbol" && rest[1].value === ".") at = 2; // a schema prefix: main.name
  const name = rest[at];
  if (!name || name.kind === "symbol" || (at === 2 && rest[0]?.kind === "symbol")) return { body, pragma: null };
  const after = rest[at + 1];
  if (!after) return { body, pragma: { name: name.kind === "word" ? name.value.toLowerCase() : name.value, hasArgument: false } };
  if (after.kind === "symbol" && (after.value === "=" || after.value === "(")) {
    return { body, pragma: { name: name.kind === "word" ? name.value.toLowerCase() : name.value, hasArgument: true } };
  }
  return { body, pragma: null };
}

function isWord(token: SqlToken | undefined, word: string): boolean {
  return token?.kind === "word" && token.value === word;
}
