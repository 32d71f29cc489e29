import type { Sqlite3Static } from "@sqlite.org/sqlite-wasm";
import type { SqlValue } from "../database.ts";
import { type RawApi, SQLITE_PREPARE_PERSISTENT } from "./capi.ts";
import { BindFailed, type Codecs, type Statement } from "./codecs.ts";

// Preparing statements: one at a time from a text (telling whether more follow), and the cache of prepared
// statements a connection reuses.

/** Statements kept prepared per connection. Kernel SQL is a small fixed set; the rest is inspector SQL. */
const STATEMENT_CACHE_SIZE = 256;

/** The outcome of preparing the first statement of a text. */
export interface Prepared {
  /** SQLite's result code; on an error `pointer` is 0. */
  readonly rc: number;
  /** The statement, or 0 when the text held only whitespace and comments. */
  readonly pointer: number;
  /** Whether another statement follows the first (a second one that fails to prepare counts). */
  readonly more: boolean;
}

/**
 * Prepares the first statement of `sql` on the connection `db` and looks whether another follows, without
 * running anything. The caller finalizes `pointer`.
 */
export function prepareFirst(sqlite3: Sqlite3Static, db: number, sql: string, flags: number): Prepared {
  const { wasm } = sqlite3;
  const c = wasm.exports as RawApi;
  const [text, length] = wasm.allocCString(sql, true);
  const stack = wasm.pstack.pointer;
  try {
    const [ppStatement, ppTail] = wasm.pstack.allocPtr(2) as [number, number];
    const rc = c.sqlite3_prepare_v3(db, text, length, flags, ppStatement, ppTail);
    if (rc !== 0) return { rc, pointer: 0, more: false };
    const pointer = wasm.peekPtr(ppStatement) as number;
    const tail = wasm.peekPtr(ppTail) as number;
    let more = false;
    if (pointer && tail < text + length) {
      // Something follows the first statement; it is fine only if it is whitespace or a comment.
      const rest = c.sqlite3_prepare_v3(db, tail, text + length - tail, 0, ppStatement, ppTail);
      const extra = wasm.peekPtr(ppStatement) as number;
      if (extra) c.sqlite3_finalize(extra);
      more = rest !== 0 || extra !== 0;
    }
    return { rc, pointer, more };
  } finally {
    wasm.pstack.restore(stack);
    wasm.dealloc(text);
  }
}

/** A connection's prepared statements by SQL text, oldest evicted first. */
export class StatementCache {
  readonly #sqlite3: Sqlite3Static;
  readonly #c: RawApi;
  readonly #db: number;
  readonly #codecs: Codecs;
  readonly #fail: (rc: number) => Error;
  readonly #statements = new Map<string, Statement>();

  /** `fail` turns a result code into the error to throw (the connection's error translation). */
  constructor(sqlite3: Sqlite3Static, db: number, codecs: Codecs, fail: (rc: number) => Error) {
    this.#sqlite3 = sqlite3;
    this.#c = sqlite3.wasm.exports as RawApi;
    this.#db = db;
    this.#codecs = codecs;
    this.#fail = fail;
  }

  /** The cached statement for `sql` with `params` bound. Preparing once per SQL text is the hot-path win. */
  prepare(sql: string, params: SqlValue[]): Statement {
    let statement = this.#statements.get(sql);
    if (!statement) {
      statement = this.#compile(sql);
      if (this.#statements.size >= STATEMENT_CACHE_SIZE) {
        const [oldestSql, oldest] = this.#statements.entries().next().value as [string, Statement];
        this.#statements.delete(oldestSql);
        this.#c.sqlite3_finalize(oldest.pointer);
      }
      this.#statements.set(sql, statement);
    }
    if (params.length > 1 && params.length === statement.parameters) {
      try {
        if (this.#codecs.bindTexts(statement, params)) return statement;
      } catch (error) {
        throw error instanceof BindFailed ? this.#fail(error.rc) : error;
      }
    }
    this.bindAll(statement, sql, params);
    return statement;
  }

  /** Binds `params` to a statement, checking their number first. */
  bindAll(statement: Statement, sql: string, params: SqlValue[]): void {
    if (params.length !== statement.parameters) {
      throw new RangeError(
        `The statement takes ${statement.parameters} parameter(s) but ${params.length} were given: ${sql.slice(0, 200)}`,
      );
    }
    for (let index = 0; index < params.length; index += 1) {
      const rc = this.#codecs.bind(statement.pointer, index + 1, params[index]);
      if (rc !== 0) throw this.#fail(rc);
    }
  }

  /** Resets a cached statement for its next use and frees its bound values (a big JSON text, say) now. */
  done(statement: Statement): void {
    this.#c.sqlite3_reset(statement.pointer);
    if (statement.block !== 0) this.#codecs.freeBlock(statement);
    else if (statement.parameters > 0) this.#c.sqlite3_clear_bindings(statement.pointer);
  }

  /** Finalizes every cached statement (before the connection closes). */
  clear(): void {
    for (const statement of this.#statements.values()) this.#c.sqlite3_finalize(statement.pointer);
    this.#statements.clear();
  }

  #compile(sql: string): Statement {
    const { rc, pointer, more } = prepareFirst(this.#sqlite3, this.#db, sql, SQLITE_PREPARE_PERSISTENT);
    if (rc !== 0) throw this.#fail(rc);
    if (!pointer) throw new TypeError(`No SQL statement in ${JSON.stringify(sql.slice(0, 200))}.`);
    if (more) {
      this.#c.sqlite3_finalize(pointer);
      throw new TypeError(`run(), get() and all() take exactly one statement; use exec() for several: ${sql.slice(0, 200)}`);
    }
    return statementOf(this.#c, pointer);
  }
}

export function statementOf(c: RawApi, pointer: number): Statement {
  return { pointer, parameters: c.sqlite3_bind_parameter_count(pointer), names: undefined, reprepares: 0, block: 0 };
}
