import type { Sqlite3Static } from "@sqlite.org/sqlite-wasm";
import { DurableError, QueryFailed, QueryLimitExceeded, QueryNotReadOnly } from "../../../errors.ts";
import type { SqlRow, SqlValue } from "../database.ts";
import { pragmaOnlyReads, type QueryLimits, valueBytes } from "../query-rules.ts";
import { type RawApi, SQLITE_AUTH, SQLITE_DONE, SQLITE_INTERRUPT, SQLITE_ROW } from "./capi.ts";
import type { Codecs } from "./codecs.ts";
import { prepareFirst, type StatementCache, statementOf } from "./statements.ts";

// The read-only door (`storage.query()`) on sqlite-wasm: an authorizer that lets a statement only read, and a
// progress handler that stops it past its budget, both installed only while a page's statement is prepared and
// run. Decided while preparing, before anything runs: SQLite applies a PRAGMA's value while it prepares the
// PRAGMA (`PRAGMA query_only = 1` prepared is `query_only` on), and the authorizer is asked first.
// docs/decisions/0020 says why this and not a second connection.

const SQLITE_OK = 0;
const SQLITE_DENY = 1;
/** Authorizer actions of a statement that only reads. */
const SQLITE_PRAGMA = 19;
const READ_ACTIONS = new Set([/* SQLITE_READ */ 20, /* SQLITE_SELECT */ 21, /* SQLITE_FUNCTION */ 31, /* SQLITE_RECURSIVE */ 33]);
/** The progress handler runs every this many virtual-machine steps. */
const STEPS_PER_TICK = 1000;

/** `sqlite3_limit` id of the largest text or BLOB, and the error of one past it. */
const SQLITE_LIMIT_LENGTH = 0;
const SQLITE_TOOBIG = 18;

interface RawHooks extends RawApi {
  sqlite3_limit(db: number, id: number, value: number): number;
  sqlite3_set_authorizer(db: number, callback: number, userData: number): number;
  sqlite3_progress_handler(db: number, steps: number, callback: number, userData: number): void;
}

export class PageQuery {
  readonly #sqlite3: Sqlite3Static;
  readonly #c: RawHooks;
  readonly #db: number;
  readonly #codecs: Codecs;
  readonly #statements: StatementCache;
  readonly #fail: (rc: number) => Error;
  #authorizer = 0;
  #progress = 0;
  #ticks = 0;
  #maxTicks = 0;
  /** The connection's own SQLITE_LIMIT_LENGTH while a page's query runs with its own. */
  #lengthLimit = 0;

  constructor(sqlite3: Sqlite3Static, db: number, codecs: Codecs, statements: StatementCache, fail: (rc: number) => Error) {
    this.#sqlite3 = sqlite3;
    this.#c = sqlite3.wasm.exports as RawHooks;
    this.#db = db;
    this.#codecs = codecs;
    this.#statements = statements;
    this.#fail = fail;
  }

  /** Runs one read-only statement within `limits` (see `SqliteDatabase.query`). Synchronous: call it on the queue. */
  run(sql: string, params: SqlValue[], limits: QueryLimits): SqlRow[] {
    this.#install(limits);
    let pointer = 0;
    try {
      const prepared = prepareFirst(this.#sqlite3, this.#db, sql, 0);
      pointer = prepared.pointer;
      if (prepared.rc !== SQLITE_OK) throw this.#error(prepared.rc, sql);
      if (!pointer) throw new QueryFailed(`there is no statement in ${JSON.stringify(sql.slice(0, 120))}`);
      if (prepared.more) throw new QueryNotReadOnly(sql, "it holds more than one statement");
      // The authorizer let every part of it read; SQLite's own verdict covers what it does not see (VACUUM).
      if (this.#c.sqlite3_stmt_readonly(pointer) === 0 && !isReadPragma(sql)) throw new QueryNotReadOnly(sql);
      const statement = statementOf(this.#c, pointer);
      this.#statements.bindAll(statement, sql, params);
      const rows: SqlRow[] = [];
      let bytes = 0;
      let rc: number;
      while ((rc = this.#c.sqlite3_step(pointer)) === SQLITE_ROW) {
        if (rows.length === limits.maxRows) throw new QueryLimitExceeded("maxRows", limits.maxRows);
        const row = this.#codecs.row(statement);
        for (const key in row) bytes += valueBytes(row[key]);
        if (bytes > limits.maxBytes) throw new QueryLimitExceeded("maxBytes", limits.maxBytes);
        rows.push(row);
      }
      if (rc !== SQLITE_DONE) throw this.#error(rc, sql);
      return rows;
    } finally {
      if (pointer) this.#c.sqlite3_finalize(pointer);
      this.#uninstall();
    }
  }

  /** Frees the callbacks (when the connection closes). */
  dispose(): void {
    const { wasm } = this.#sqlite3;
    if (this.#authorizer) wasm.uninstallFunction(this.#authorizer);
    if (this.#progress) wasm.uninstallFunction(this.#progress);
    this.#authorizer = 0;
    this.#progress = 0;
  }

  #error(rc: number, sql: string): Error {
    const primary = rc & 0xff;
    if (primary === SQLITE_AUTH) return new QueryNotReadOnly(sql);
    if (primary === SQLITE_INTERRUPT && this.#ticks > this.#maxTicks) {
      return new QueryLimitExceeded("maxSteps", this.#maxTicks * STEPS_PER_TICK);
    }
    if (primary === SQLITE_TOOBIG) return new QueryLimitExceeded("maxBytes", this.#c.sqlite3_limit(this.#db, SQLITE_LIMIT_LENGTH, -1));
    const error = this.#fail(rc);
    // A full disk or a damaged file is what it is; anything else is the statement's own fault.
    return error instanceof DurableError ? error : new QueryFailed(error.message.replace(/^SQLITE_\w+: /, ""), { cause: error });
  }

  #install(limits: QueryLimits): void {
    const { wasm } = this.#sqlite3;
    this.#authorizer ||= wasm.installFunction("i(pipppp)", (_: number, action: number, first: number, second: number) =>
      this.#authorize(action, first, second),
    ) as number;
    this.#progress ||= wasm.installFunction("i(p)", () => (++this.#ticks > this.#maxTicks ? 1 : 0)) as number;
    this.#ticks = 0;
    this.#maxTicks = Math.max(1, Math.floor(limits.maxSteps / STEPS_PER_TICK));
    this.#c.sqlite3_set_authorizer(this.#db, this.#authorizer, 0);
    this.#c.sqlite3_progress_handler(this.#db, STEPS_PER_TICK, this.#progress, 0);
    // No text or BLOB the statement makes or reads may be larger than the answer may be: `randomblob(9e8)`
    // would otherwise grow the wasm memory, which never shrinks, before any cap could look at the row.
    this.#lengthLimit = this.#c.sqlite3_limit(this.#db, SQLITE_LIMIT_LENGTH, limits.maxBytes);
  }

  #uninstall(): void {
    this.#c.sqlite3_set_authorizer(this.#db, 0, 0);
    this.#c.sqlite3_progress_handler(this.#db, 0, 0, 0);
    this.#c.sqlite3_limit(this.#db, SQLITE_LIMIT_LENGTH, this.#lengthLimit);
  }

  /** SQLITE_OK for what only reads: a SELECT, its tables, functions and recursion, and a PRAGMA that only reads. */
  #authorize(action: number, first: number, second: number): number {
    try {
      if (READ_ACTIONS.has(action)) return SQLITE_OK;
      if (action !== SQLITE_PRAGMA) return SQLITE_DENY;
      const { wasm } = this.#sqlite3;
      // For a PRAGMA: its name, and its argument (a null pointer when it has none).
      return pragmaOnlyReads(wasm.cstrToJs(first) as string, second !== 0) ? SQLITE_OK : SQLITE_DENY;
    } catch {
      return SQLITE_DENY;
    }
  }
}

/**
 * A PRAGMA the authorizer let through reads a setting; `PRAGMA journal_mode` is such a read although
 * `sqlite3_stmt_readonly` calls its opcode a write. Anything that starts otherwise is judged by SQLite.
 */
function isReadPragma(sql: string): boolean {
  return /^\s*pragma\b/i.test(sql.replace(/^(\s|--[^\n]*\n?|\/\*[\s\S]*?\*\/)*/, ""));
}
