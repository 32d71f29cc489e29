import type { Sqlite3Static } from "@sqlite.org/sqlite-wasm";
import { HarnessClosed } from "../../../errors.ts";
import { SerialQueue } from "../../../serial.ts";
import type { SqliteDatabase, SqliteTransaction, SqlRow, SqlValue } from "../database.ts";
import {
  asRollbackImage,
  type RawApi,
  SQLITE_BLOB,
  SQLITE_DBCONFIG_NO_CKPT_ON_CLOSE,
  SQLITE_DONE,
  SQLITE_FLOAT,
  SQLITE_INTEGER,
  SQLITE_PREPARE_PERSISTENT,
  SQLITE_ROW,
  SQLITE_STMTSTATUS_REPREPARE,
  SQLITE_TEXT,
  type WrappedApi,
} from "./capi.ts";
import { integrityFailure, translateSqliteError } from "./errors.ts";
import { eventLoopStarved, nextMacrotask } from "./event-loop.ts";
import { forgetVfsError, lastVfsErrorName } from "./module.ts";

// A connection: the operations queued one after another, the statement cache, the codecs between JS values
// and SQLite's, and the transaction handle.

/** Statements kept prepared per connection. Kernel SQL is a small fixed set; the rest is inspector SQL. */
const STATEMENT_CACHE_SIZE = 256;
/** Texts up to this many UTF-16 units are encoded straight into the wasm heap (see `#utf8Copy`). */
const DIRECT_ENCODE_MAX_CHARS = 64 * 1024;
const utf8Encoder = new TextEncoder();
const utf8Decoder = new TextDecoder();

/**
 * Statements sqlite3_stmt_readonly calls read-only although they change the connection's state: transaction
 * control, ATTACH/DETACH, and a PRAGMA given a value (`query_only(0)`, `foreign_keys = ON`) unless it is one
 * whose argument only names what to read (a table, an index, a check limit).
 */
const CONNECTION_STATEMENT =
  /^\s*(begin|commit|end|rollback|savepoint|release|attach|detach|vacuum)\b|^\s*pragma\s+(?!(?:\w+\.)?(?:table_info|table_xinfo|index_list|index_info|index_xinfo|foreign_key_list|foreign_key_check|integrity_check|quick_check)\b)[\w.]+\s*[(=]/i;

/** A prepared statement kept for reuse, with its result column names (refreshed when SQLite re-prepares). */
interface Statement {
  readonly pointer: number;
  readonly parameters: number;
  names: string[] | undefined;
  reprepares: number;
}

export interface ConnectionOptions {
  readonly readOnly: boolean;
  /** Names the database in error messages. */
  readonly label: string;
  /** Gives the pool back after close (opfs-sahpool only). */
  readonly release: (() => Promise<void>) | undefined;
}

export type OoDatabase = InstanceType<Sqlite3Static["oo1"]["DB"]>;

export class Connection implements SqliteDatabase {
  readonly readOnly: boolean;
  readonly #sqlite3: Sqlite3Static;
  readonly #c: RawApi;
  readonly #capi: WrappedApi;
  readonly #db: OoDatabase;
  readonly #pointer: number;
  readonly #options: ConnectionOptions;
  readonly #statements = new Map<string, Statement>();
  /** Operations run one after another, in the order they were asked for. */
  readonly #queue = new SerialQueue();
  #closed = false;
  #closing: Promise<void> | undefined;

  /**
   * The handle a transaction body gets. A class rather than closures: a transaction is the hot path, and
   * it must refuse use after the transaction ended (a handle kept past its body would write outside it).
   */
  static readonly #Transaction = class implements SqliteTransaction {
    live = true;
    readonly #connection: Connection;

    constructor(connection: Connection) {
      this.#connection = connection;
    }

    run(sql: string, ...params: SqlValue[]): number {
      return this.#live().#run(sql, params);
    }

    get(sql: string, ...params: SqlValue[]): SqlRow | undefined {
      return this.#live().#get(sql, params);
    }

    all(sql: string, ...params: SqlValue[]): SqlRow[] {
      return this.#live().#all(sql, params);
    }

    #live(): Connection {
      if (!this.live) throw new Error("This transaction handle was used after its transaction ended; use it only inside the body.");
      return this.#connection;
    }
  };

  constructor(sqlite3: Sqlite3Static, db: OoDatabase, options: ConnectionOptions) {
    this.#sqlite3 = sqlite3;
    this.#c = sqlite3.wasm.exports as RawApi;
    this.#capi = sqlite3.capi as unknown as WrappedApi;
    this.#db = db;
    this.#pointer = db.pointer!;
    this.#options = options;
    this.readOnly = options.readOnly;
  }

  exec(sql: string): Promise<void> {
    return this.#enqueue(() => this.execAll(sql));
  }

  run(sql: string, ...params: SqlValue[]): Promise<number> {
    return this.#enqueue(() => this.#run(sql, params));
  }

  get(sql: string, ...params: SqlValue[]): Promise<SqlRow | undefined> {
    return this.#enqueue(() => this.#get(sql, params));
  }

  all(sql: string, ...params: SqlValue[]): Promise<SqlRow[]> {
    return this.#enqueue(() => this.#all(sql, params));
  }

  transaction<T>(body: (tx: SqliteTransaction) => T): Promise<T> {
    return this.#enqueue(() => {
      // IMMEDIATE takes the write lock up front, so a write transaction never fails half-way for a lock;
      // a read-only database cannot take it, and only reads anyway.
      this.#run(this.readOnly ? "BEGIN" : "BEGIN IMMEDIATE", []);
      const tx = new Connection.#Transaction(this);
      try {
        const result = body(tx);
        if (isThenable(result)) {
          throw new TypeError(
            "A transaction body must be synchronous: it returned a promise, so its later statements would run outside the transaction. Nothing was committed.",
          );
        }
        this.#run("COMMIT", []);
        return result;
      } catch (error) {
        // A failed COMMIT (full disk, I/O error) may already have rolled back; ROLLBACK then would fail.
        if (this.#c.sqlite3_get_autocommit(this.#pointer) === 0) {
          try {
            this.#run("ROLLBACK", []);
          } catch {
            // The original error is the one worth reporting.
          }
        }
        throw error;
      } finally {
        tx.live = false;
      }
    });
  }

  exportImage(): Promise<Uint8Array> {
    return this.#enqueue(() => {
      if (this.#c.sqlite3_get_autocommit(this.#pointer) === 0) {
        throw new Error(
          "exportImage() was called while a transaction is open; the image would contain uncommitted changes. Commit or roll back first.",
        );
      }
      // sqlite3_serialize reads every page through the pager, so under WAL it sees the committed frames
      // that are not yet checkpointed: the image is the committed state without a checkpoint.
      const image = this.#capi.sqlite3_js_db_export(this.#pointer);
      // Mark it as a rollback-journal file: a WAL-flagged file without its WAL cannot be opened in memory.
      asRollbackImage(image);
      return image;
    });
  }

  close(): Promise<void> {
    if (!this.#closing) {
      this.#closed = true;
      this.#closing = this.#queue.run(() => this.#shutdown());
    }
    return this.#closing;
  }

  // ------------------------------------------------------------------------------------------------------
  // Used while opening (before the connection is handed out), hence not private.

  /** Runs `PRAGMA quick_check`; a database that fails it, or cannot even be read, is `DatabaseCorrupt`. */
  checkIntegrity(): void {
    const problems = this.#all("PRAGMA quick_check", []).map((row) => String(Object.values(row)[0]));
    if (problems.length === 1 && problems[0] === "ok") return;
    throw integrityFailure(this.#options.label, problems);
  }

  setCheckpointOnClose(enabled: boolean): void {
    this.#capi.sqlite3_db_config(this.#pointer, SQLITE_DBCONFIG_NO_CKPT_ON_CLOSE, enabled ? 0 : 1, 0);
  }

  /** Closes a connection that failed to open. */
  async abandon(): Promise<void> {
    this.#closed = true;
    await this.#shutdown();
  }

  /**
   * B10: true when `sql` is exactly one statement that SQLite itself says does not write
   * (`sqlite3_stmt_readonly`), so `PRAGMA name(value)` and writes hidden in a CTE are caught without text
   * matching. Transaction control, ATTACH and DETACH count as not read-only here: they change the connection.
   */
  statementIsReadOnly(sql: string): Promise<boolean> {
    return this.#enqueue(() => {
      const { wasm } = this.#sqlite3;
      const [text, length] = wasm.allocCString(sql, true);
      const stack = wasm.pstack.pointer;
      try {
        const [ppStatement, ppTail] = wasm.pstack.allocPtr(2) as [number, number];
        const rc = this.#c.sqlite3_prepare_v3(this.#pointer, text, length, 0, ppStatement, ppTail);
        const pointer = wasm.peekPtr(ppStatement) as number;
        if (rc !== 0 || !pointer) return false;
        let readOnly = this.#c.sqlite3_stmt_readonly(pointer) !== 0;
        this.#c.sqlite3_finalize(pointer);
        const tail = wasm.peekPtr(ppTail) as number;
        if (readOnly && tail < text + length) {
          const rest = this.#c.sqlite3_prepare_v3(this.#pointer, tail, text + length - tail, 0, ppStatement, ppTail);
          const extra = wasm.peekPtr(ppStatement) as number;
          if (extra) this.#c.sqlite3_finalize(extra);
          if (rest !== 0 || extra) readOnly = false; // one statement only
        }
        return readOnly && !CONNECTION_STATEMENT.test(sql);
      } finally {
        wasm.pstack.restore(stack);
        wasm.dealloc(text);
      }
    });
  }

  /** Runs one or more statements (not cached: DDL, pragmas, scripts). */
  execAll(sql: string): void {
    const { wasm } = this.#sqlite3;
    const [text, length] = wasm.allocCString(sql, true);
    const stack = wasm.pstack.pointer;
    try {
      const [ppStatement, ppTail] = wasm.pstack.allocPtr(2) as [number, number];
      let position = text;
      const end = text + length;
      while (position < end) {
        const rc = this.#c.sqlite3_prepare_v3(this.#pointer, position, end - position, 0, ppStatement, ppTail);
        if (rc !== 0) throw this.sqliteError(rc);
        const statement = wasm.peekPtr(ppStatement) as number;
        position = wasm.peekPtr(ppTail) as number;
        if (!statement) continue; // only whitespace or a comment was left
        try {
          let step: number;
          while ((step = this.#c.sqlite3_step(statement)) === SQLITE_ROW);
          if (step !== SQLITE_DONE) throw this.sqliteError(step);
        } finally {
          this.#c.sqlite3_finalize(statement);
        }
      }
    } finally {
      wasm.pstack.restore(stack);
      wasm.dealloc(text);
    }
  }

  /** An `SQLite3Error` for a failed call, translated to our error classes where one applies. */
  sqliteError(rc: number): Error {
    const message = `${this.#capi.sqlite3_js_rc_str(rc) ?? `SQLite error ${rc}`}: ${this.#capi.sqlite3_errmsg(this.#pointer)}`;
    const SQLite3Error = this.#sqlite3.SQLite3Error as unknown as new (rc: number, options: { cause?: unknown }) => Error;
    const error = Object.assign(new SQLite3Error(rc, {}), { message });
    return translateSqliteError(rc, error, { label: this.#options.label, readOnly: this.readOnly, vfsError: lastVfsErrorName() });
  }

  // ------------------------------------------------------------------------------------------------------

  #enqueue<T>(operation: () => T): Promise<T> {
    if (this.#closed) return Promise.reject(new HarnessClosed("Database"));
    const start = () => {
      if (this.#db.pointer === undefined) throw new HarnessClosed("Database");
      forgetVfsError();
      return operation();
    };
    return this.#queue.run(() => (eventLoopStarved() ? nextMacrotask().then(start) : start()));
  }

  #run(sql: string, params: SqlValue[]): number {
    const statement = this.#prepare(sql, params);
    try {
      let rc: number;
      while ((rc = this.#c.sqlite3_step(statement.pointer)) === SQLITE_ROW);
      if (rc !== SQLITE_DONE) throw this.sqliteError(rc);
      return this.#c.sqlite3_changes(this.#pointer);
    } finally {
      this.#done(statement);
    }
  }

  #get(sql: string, params: SqlValue[]): SqlRow | undefined {
    const statement = this.#prepare(sql, params);
    try {
      const rc = this.#c.sqlite3_step(statement.pointer);
      if (rc === SQLITE_ROW) return this.#row(statement);
      if (rc !== SQLITE_DONE) throw this.sqliteError(rc);
      return undefined;
    } finally {
      this.#done(statement);
    }
  }

  #all(sql: string, params: SqlValue[]): SqlRow[] {
    const statement = this.#prepare(sql, params);
    try {
      const rows: SqlRow[] = [];
      let rc: number;
      while ((rc = this.#c.sqlite3_step(statement.pointer)) === SQLITE_ROW) rows.push(this.#row(statement));
      if (rc !== SQLITE_DONE) throw this.sqliteError(rc);
      return rows;
    } finally {
      this.#done(statement);
    }
  }

  /** Resets a cached statement for its next use and frees its bound values (a big JSON text, say) now. */
  #done(statement: Statement): void {
    this.#c.sqlite3_reset(statement.pointer);
    if (statement.parameters > 0) this.#c.sqlite3_clear_bindings(statement.pointer);
  }

  /** The cached statement for `sql` with `params` bound. Preparing once per SQL text is the hot-path win. */
  #prepare(sql: string, params: SqlValue[]): Statement {
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
    if (params.length !== statement.parameters) {
      throw new RangeError(
        `The statement takes ${statement.parameters} parameter(s) but ${params.length} were given: ${sql.slice(0, 200)}`,
      );
    }
    for (let index = 0; index < params.length; index += 1) this.#bind(statement.pointer, index + 1, params[index]);
    return statement;
  }

  #compile(sql: string): Statement {
    const { wasm } = this.#sqlite3;
    const [text, length] = wasm.allocCString(sql, true);
    const stack = wasm.pstack.pointer;
    try {
      const [ppStatement, ppTail] = wasm.pstack.allocPtr(2) as [number, number];
      const rc = this.#c.sqlite3_prepare_v3(this.#pointer, text, length, SQLITE_PREPARE_PERSISTENT, ppStatement, ppTail);
      if (rc !== 0) throw this.sqliteError(rc);
      const pointer = wasm.peekPtr(ppStatement) as number;
      const tail = wasm.peekPtr(ppTail) as number;
      if (!pointer) throw new TypeError(`No SQL statement in ${JSON.stringify(sql.slice(0, 200))}.`);
      if (tail < text + length) {
        // Something follows the first statement; it is fine only if it is whitespace or a comment.
        const rest = this.#c.sqlite3_prepare_v3(this.#pointer, tail, text + length - tail, 0, ppStatement, ppTail);
        const extra = wasm.peekPtr(ppStatement) as number;
        if (extra) this.#c.sqlite3_finalize(extra);
        if (rest !== 0 || extra) {
          this.#c.sqlite3_finalize(pointer);
          throw new TypeError(`run(), get() and all() take exactly one statement; use exec() for several: ${sql.slice(0, 200)}`);
        }
      }
      return { pointer, parameters: this.#c.sqlite3_bind_parameter_count(pointer), names: undefined, reprepares: 0 };
    } finally {
      wasm.pstack.restore(stack);
      wasm.dealloc(text);
    }
  }

  #bind(statement: number, index: number, value: SqlValue | undefined | boolean): void {
    const c = this.#c;
    let rc: number;
    if (value === null || value === undefined) {
      rc = c.sqlite3_bind_null(statement, index);
    } else if (typeof value === "number") {
      if ((value | 0) === value) rc = c.sqlite3_bind_int(statement, index, value);
      else if (Number.isSafeInteger(value)) rc = c.sqlite3_bind_int64(statement, index, BigInt(value));
      else rc = c.sqlite3_bind_double(statement, index, value);
    } else if (typeof value === "string") {
      // SQLITE_WASM_DEALLOC frees the copy when SQLite is done with it (also when the bind fails).
      const [pointer, bytes] = this.#utf8Copy(value);
      rc = c.sqlite3_bind_text(statement, index, pointer, bytes, this.#capi.SQLITE_WASM_DEALLOC);
    } else if (typeof value === "bigint") {
      // The wasm boundary would wrap an out-of-range BigInt modulo 2^64 without a word.
      if (BigInt.asIntN(64, value) !== value) throw new RangeError(`Parameter ${index} (${value}) does not fit in a 64-bit integer.`);
      rc = c.sqlite3_bind_int64(statement, index, value);
    } else if (value instanceof Uint8Array) {
      if (value.byteLength === 0) {
        rc = c.sqlite3_bind_zeroblob(statement, index, 0); // an empty allocation would bind NULL instead
      } else {
        const pointer = this.#sqlite3.wasm.allocFromTypedArray(value);
        rc = c.sqlite3_bind_blob(statement, index, pointer, value.byteLength, this.#capi.SQLITE_WASM_DEALLOC);
      }
    } else if (typeof value === "boolean") {
      rc = c.sqlite3_bind_int(statement, index, value ? 1 : 0);
    } else {
      throw new TypeError(
        `Cannot bind a ${typeof value} to parameter ${index}; pass null, a number, string, bigint or Uint8Array (JSON.stringify objects).`,
      );
    }
    if (rc !== 0) throw this.sqliteError(rc);
  }

  /**
   * A NUL-terminated UTF-8 copy of `text` in the wasm heap, as `[pointer, bytes]` (bytes without the NUL).
   * Encoded straight into the heap: the library's `allocCString` encodes into a fresh array and copies it, and
   * that was the largest single cost of recovering 10,000 running tasks (two records written per task).
   * Sized for the worst case (3 bytes per UTF-16 unit); long texts take the exact-size path instead, so a
   * large document never grows the wasm memory (which cannot shrink) by three times its size.
   */
  #utf8Copy(text: string): [number, number] {
    const { wasm } = this.#sqlite3;
    if (text.length > DIRECT_ENCODE_MAX_CHARS) return wasm.allocCString(text, true) as [number, number];
    const capacity = text.length * 3 + 1;
    const pointer = wasm.alloc(capacity) as number;
    const heap = wasm.heap8u();
    const { written } = utf8Encoder.encodeInto(text, heap.subarray(pointer, pointer + capacity - 1));
    heap[pointer + written] = 0;
    return [pointer, written];
  }

  #row(statement: Statement): SqlRow {
    const c = this.#c;
    const pointer = statement.pointer;
    // Column names can change only when SQLite re-prepares the statement (schema change under SELECT *).
    const reprepares = c.sqlite3_stmt_status(pointer, SQLITE_STMTSTATUS_REPREPARE, 0);
    let names = statement.names;
    if (names === undefined || reprepares !== statement.reprepares) {
      const count = c.sqlite3_column_count(pointer);
      names = [];
      for (let index = 0; index < count; index += 1) names.push(this.#capi.sqlite3_column_name(pointer, index));
      statement.names = names;
      statement.reprepares = reprepares;
    }
    const row: SqlRow = {};
    for (let index = 0; index < names.length; index += 1) row[names[index]!] = this.#column(pointer, index);
    return row;
  }

  #column(statement: number, index: number): SqlValue {
    const c = this.#c;
    switch (c.sqlite3_column_type(statement, index)) {
      case SQLITE_INTEGER: {
        // A double holds every integer up to 2^53 exactly and is far cheaper than a BigInt round trip.
        const value = c.sqlite3_column_double(statement, index);
        return Number.isSafeInteger(value) ? value : c.sqlite3_column_int64(statement, index);
      }
      case SQLITE_FLOAT:
        return c.sqlite3_column_double(statement, index);
      case SQLITE_TEXT: {
        // Decoded straight from the wasm heap with the length SQLite knows (the library's wrapper scans for
        // the terminating NUL first). column_text must come before column_bytes (SQLite's rule).
        const pointer = c.sqlite3_column_text(statement, index);
        const bytes = c.sqlite3_column_bytes(statement, index);
        return bytes === 0 ? "" : utf8Decoder.decode(this.#sqlite3.wasm.heap8u().subarray(pointer, pointer + bytes));
      }
      case SQLITE_BLOB: {
        const bytes = c.sqlite3_column_bytes(statement, index);
        const pointer = c.sqlite3_column_blob(statement, index);
        return bytes === 0 ? new Uint8Array(0) : this.#sqlite3.wasm.heap8u().slice(pointer, pointer + bytes);
      }
      default:
        return null;
    }
  }

  async #shutdown(): Promise<void> {
    if (this.#db.pointer === undefined) return;
    for (const statement of this.#statements.values()) this.#c.sqlite3_finalize(statement.pointer);
    this.#statements.clear();
    this.#db.close();
    await this.#options.release?.();
  }
}

function isThenable(value: unknown): boolean {
  return typeof value === "object" && value !== null && typeof (value as { then?: unknown }).then === "function";
}
