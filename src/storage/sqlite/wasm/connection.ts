import type { Sqlite3Static } from "@sqlite.org/sqlite-wasm";
import { SerialQueue } from "../../../base/serial.ts";
import { isThenable } from "../../../base/thenable.ts";
import { HarnessClosed } from "../../../errors.ts";
import type { SqliteDatabase, SqliteTransaction, SqlRow, SqlValue } from "../database.ts";
import type { QueryLimits } from "../query-rules.ts";
import { asRollbackImage, type RawApi, SQLITE_DBCONFIG_NO_CKPT_ON_CLOSE, SQLITE_DONE, SQLITE_ROW, type WrappedApi } from "./capi.ts";
import { Codecs } from "./codecs.ts";
import { integrityFailure, translateSqliteError } from "./errors.ts";
import { eventLoopStarved, nextMacrotask } from "./event-loop.ts";
import { forgetVfsError, lastVfsErrorName } from "./module.ts";
import { PageQuery } from "./page-query.ts";
import { StatementCache } from "./statements.ts";

// A connection: the operations queued one after another and the transaction handle. The statement cache is
// in statements.ts, the codecs between JS values and SQLite's in codecs.ts, the read-only door in page-query.ts.

export interface ConnectionOptions {
  readonly readOnly: boolean;
  /** Names the database in error messages. */
  readonly label: string;
  /** Gives the pool back after close (opfs-sahpool only). */
  readonly release: (() => Promise<void>) | undefined;
  /** The file is in WAL mode (opfs-sahpool, writable): its automatic checkpoint can be held (decision 0033). */
  readonly wal?: boolean;
}

/** SQLite's default `wal_autocheckpoint` (pages), restored when a hold ends. */
const WAL_AUTOCHECKPOINT = 1000;
/**
 * A hold on the automatic checkpoint ends by itself after this many write transactions (decision 0033), so the
 * write-ahead log stays bounded when nothing ends the hold: the open's recovery and reservation passes of
 * 10,000 running tasks are 41 transactions.
 */
export const CHECKPOINT_HOLD_LIMIT = 256;

function noop(): void {}

export type OoDatabase = InstanceType<Sqlite3Static["oo1"]["DB"]>;

export class Connection implements SqliteDatabase {
  readonly readOnly: boolean;
  readonly #sqlite3: Sqlite3Static;
  readonly #c: RawApi;
  readonly #capi: WrappedApi;
  readonly #db: OoDatabase;
  readonly #pointer: number;
  readonly #options: ConnectionOptions;
  readonly #codecs: Codecs;
  readonly #statements: StatementCache;
  readonly #pageQuery: PageQuery;
  /** Operations run one after another, in the order they were asked for. */
  readonly #queue = new SerialQueue();
  #closed = false;
  #closing: Promise<void> | undefined;
  /** While the automatic checkpoint is held: the write transactions since (decision 0033). */
  #held: number | undefined;

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

    each(sql: string, onRow: (row: SqlRow) => void): void {
      this.#live().#each(sql, onRow);
    }

    /**
     * Rows this connection's statements inserted, updated or deleted since it opened. It is its file's only writer:
     * a private in-memory database, or an opfs-sahpool file in EXCLUSIVE locking mode (no other connection can
     * commit to it once this one read it). Decision 0056.
     */
    writes(): number {
      const connection = this.#live();
      return connection.#c.sqlite3_total_changes(connection.#pointer);
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
    const fail = (rc: number) => this.sqliteError(rc);
    this.#codecs = new Codecs(sqlite3);
    this.#statements = new StatementCache(sqlite3, this.#pointer, this.#codecs, fail);
    this.#pageQuery = new PageQuery(sqlite3, this.#pointer, this.#codecs, this.#statements, fail);
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

  each(sql: string, onRow: (row: SqlRow) => void): Promise<void> {
    return this.#enqueue(() => this.#each(sql, onRow));
  }

  transaction<T>(body: (tx: SqliteTransaction) => T): Promise<T> {
    return this.#enqueue(this.#transact, body) as Promise<T>;
  }

  /** `SqliteDatabase.temporary` (decision 0088): a transaction of a read-only connection on its TEMP schema only. */
  temporary<T>(body: (tx: SqliteTransaction) => T): Promise<T> {
    return this.#enqueue(() => {
      // `query_only` (a read-only OPFS file's guard) refuses TEMP writes too: lifted for this body alone.
      const guarded = Number(this.#get("PRAGMA query_only", [])?.query_only) === 1;
      this.execAll(`PRAGMA temp_store = MEMORY${guarded ? "; PRAGMA query_only = 0" : ""}`);
      try {
        return this.#transact(body);
      } finally {
        if (guarded) this.execAll("PRAGMA query_only = 1");
      }
    });
  }

  #transact<T>(body: (tx: SqliteTransaction) => T): T {
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
      if (this.#held !== undefined && ++this.#held >= CHECKPOINT_HOLD_LIMIT) this.#releaseCheckpoints();
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

  /**
   * Holds back SQLite's automatic checkpoint until the returned release is called (decision 0033), at most for
   * `CHECKPOINT_HOLD_LIMIT` write transactions. The release restores it and checkpoints once the event loop
   * turns, after the work of the turn that released it. A no-op where the file has no write-ahead log.
   */
  holdCheckpoints(): () => void {
    if (!this.#options.wal || this.readOnly || this.#closed || this.#held !== undefined) return noop;
    this.#held = 0;
    void this.#enqueue(() => this.execAll("PRAGMA wal_autocheckpoint = 0")).catch(noop);
    let released = false;
    return () => {
      if (released) return;
      released = true;
      this.#releaseCheckpoints();
    };
  }

  #releaseCheckpoints(): void {
    if (this.#held === undefined || this.#closed) return;
    this.#held = undefined;
    // A failed checkpoint leaves the log as it was (every frame still in it); the next automatic one tries again.
    void this.#enqueue(async () => {
      await nextMacrotask();
      this.execAll(`PRAGMA wal_autocheckpoint = ${WAL_AUTOCHECKPOINT}; PRAGMA wal_checkpoint(PASSIVE)`);
    }).catch(noop);
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

  /**
   * Runs `PRAGMA quick_check` — of the whole file, or with `tables` of those tables (and their indexes) only
   * (decision 0027). A database that fails it, or cannot even be read, is `DatabaseCorrupt`.
   */
  checkIntegrity(tables?: readonly string[]): void {
    const statements =
      tables === undefined
        ? ["PRAGMA quick_check"]
        : this.#all("SELECT name FROM sqlite_schema WHERE type = 'table'", [])
            .map((row) => String(row.name))
            .filter((name) => tables.includes(name))
            .map((name) => `PRAGMA quick_check("${name.replaceAll('"', '""')}")`);
    const problems: string[] = [];
    for (const sql of statements) {
      const found = this.#all(sql, []).map((row) => String(Object.values(row)[0]));
      if (!(found.length === 1 && found[0] === "ok")) problems.push(...found);
    }
    if (problems.length === 0) return;
    throw integrityFailure(this.#options.label, problems);
  }

  /** The file's size in bytes, from its header (page count × page size): reads no page but the first. */
  fileBytes(): number {
    const pages = Number(this.#get("PRAGMA page_count", [])?.page_count ?? 0);
    const size = Number(this.#get("PRAGMA page_size", [])?.page_size ?? 0);
    return pages * size;
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
   * B10: one read-only statement for `storage.query()`, decided and run with the authorizer and the step budget
   * of page-query.ts installed, and `query_only` on around it as a second guard.
   */
  query(sql: string, params: SqlValue[], limits: QueryLimits): Promise<SqlRow[]> {
    return this.#enqueue(() => {
      if (this.readOnly) return this.#pageQuery.run(sql, params, limits);
      this.#run("PRAGMA query_only = 1", []);
      try {
        return this.#pageQuery.run(sql, params, limits);
      } finally {
        this.#run("PRAGMA query_only = 0", []);
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

  /** `operation(arg)` on the queue (decision 0126: a transaction's body is its `arg`; the starved branch's closure made only then). */
  #enqueue<T, A = undefined>(operation: (this: Connection, arg: A) => T, arg?: A): Promise<T> {
    if (this.#closed) return Promise.reject(new HarnessClosed("Database"));
    return this.#queue.run(() =>
      eventLoopStarved() ? nextMacrotask().then(() => this.#start(operation, arg as A)) : this.#start(operation, arg as A),
    );
  }

  #start<T, A>(operation: (this: Connection, arg: A) => T, arg: A): T {
    if (this.#db.pointer === undefined) throw new HarnessClosed("Database");
    forgetVfsError();
    return operation.call(this, arg);
  }

  #run(sql: string, params: SqlValue[]): number {
    const statement = this.#statements.prepare(sql, params);
    try {
      let rc: number;
      while ((rc = this.#c.sqlite3_step(statement.pointer)) === SQLITE_ROW);
      if (rc !== SQLITE_DONE) throw this.sqliteError(rc);
      return this.#c.sqlite3_changes(this.#pointer);
    } finally {
      this.#statements.done(statement);
    }
  }

  #get(sql: string, params: SqlValue[]): SqlRow | undefined {
    const statement = this.#statements.prepare(sql, params);
    try {
      const rc = this.#c.sqlite3_step(statement.pointer);
      if (rc === SQLITE_ROW) return this.#codecs.row(statement);
      if (rc !== SQLITE_DONE) throw this.sqliteError(rc);
      return undefined;
    } finally {
      this.#statements.done(statement);
    }
  }

  #all(sql: string, params: SqlValue[]): SqlRow[] {
    const statement = this.#statements.prepare(sql, params);
    try {
      const rows: SqlRow[] = [];
      let rc: number;
      while ((rc = this.#c.sqlite3_step(statement.pointer)) === SQLITE_ROW) rows.push(this.#codecs.row(statement));
      if (rc !== SQLITE_DONE) throw this.sqliteError(rc);
      return rows;
    } finally {
      this.#statements.done(statement);
    }
  }

  #each(sql: string, onRow: (row: SqlRow) => void): void {
    const statement = this.#statements.prepare(sql, []);
    try {
      const rc = this.#codecs.each(statement, onRow);
      if (rc !== SQLITE_DONE) throw this.sqliteError(rc);
    } finally {
      this.#statements.done(statement);
    }
  }

  async #shutdown(): Promise<void> {
    if (this.#db.pointer === undefined) return;
    this.#statements.clear();
    this.#pageQuery.dispose();
    this.#db.close();
    await this.#options.release?.();
  }
}
