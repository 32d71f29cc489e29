/**
 * The `@sqlite.org/sqlite-wasm` (3.54.1, pinned) adapter behind the `SqliteDatabase` facade.
 *
 * Two backends:
 * - `"memory"`: a fresh database, or one made from the bytes of `exportImage()` (crash simulation in Node
 *   tests, copies). Works in Node and in the browser.
 * - `"opfs-sahpool"`: the durable browser store, a file in the library's OPFS "SyncAccessHandle pool".
 *   Works only in a dedicated Web Worker (sync access handles do not exist anywhere else).
 *
 * ```ts
 * const db = await openSqliteDatabase({ vfs: "opfs-sahpool" }); // in the worker
 * await db.transaction((tx) => tx.run("INSERT INTO log(line) VALUES (?)", "hello"));
 * const rows = await db.all("SELECT line FROM log");
 * ```
 *
 * Statements go to the C API directly rather than through the library's `oo1.Stmt`:
 * the oo1 statement methods log a console warning for every failed step, re-read column names on every
 * row and validate each argument several times, and a kernel commit runs through here on the hot path.
 */
import sqlite3InitModule, { type SAHPoolUtil, type Sqlite3Static } from "@sqlite.org/sqlite-wasm";
import {
  DatabaseCorrupt,
  DatabaseLocked,
  HarnessClosed,
  NotFound,
  ReadOnlySession,
  StorageQuotaExceeded,
  StorageUnavailable,
} from "../../errors";
import type { SqliteDatabase, SqliteTransaction, SqlRow, SqlValue } from "./database.ts";

export interface OpenSqliteOptions {
  /** `"memory"` (Node and browser) or `"opfs-sahpool"` (browser, dedicated worker only). */
  vfs: "memory" | "opfs-sahpool";
  /**
   * opfs-sahpool: the database's name inside the pool. Must be absolute (the pool mis-handles relative
   * names). Default `"/pi-durable.sqlite3"`.
   */
  path?: string;
  /** memory: start from these bytes (an `exportImage()` result or any SQLite file). Copied; not retained. */
  image?: Uint8Array;
  /** Refuse every write. The database file is not changed by opening or closing it. */
  readOnly?: boolean;
  /**
   * opfs-sahpool: the OPFS directory of the pool. Default: the library's own (`.opfs-sahpool`). Pools in
   * different directories are independent, so tests and apps sharing an origin can keep apart.
   */
  poolDirectory?: string;
  /**
   * opfs-sahpool: how long to keep retrying while another context (a second tab, or the worker of the page
   * that was just reloaded, which Chromium tears down asynchronously) still holds the pool's access handles.
   * Default 15000 ms; then the open fails with `DatabaseLocked`.
   */
  maxWaitMs?: number;
}

/** Where the durable database lives in the pool unless the caller says otherwise. */
export const DEFAULT_DATABASE_PATH = "/pi-durable.sqlite3";

const DEFAULT_MAX_WAIT_MS = 15_000;
/** Capacity of a new pool. Each database needs two slots (file + WAL); the library default is 6. */
const POOL_CAPACITY = 16;
/** Statements kept prepared per connection. Kernel SQL is a small fixed set; the rest is inspector SQL. */
const STATEMENT_CACHE_SIZE = 256;
/** Texts up to this many UTF-16 units are encoded straight into the wasm heap (see `#utf8Copy`). */
const DIRECT_ENCODE_MAX_CHARS = 64 * 1024;
const utf8Encoder = new TextEncoder();
const utf8Decoder = new TextDecoder();

// ---------------------------------------------------------------------------------------------------------
// The shared module

let modulePromise: Promise<Sqlite3Static> | undefined;

/**
 * The last error the OPFS pool reported through the library's logger. The pool turns a JS exception in a
 * write (for example Chromium's `QuotaExceededError`) into a bare `SQLITE_IOERR`; the logger is the only
 * place the original exception is still visible, so the error translation looks here to recognise a full quota.
 */
let lastVfsError: { name: string; message: string } | undefined;
/** While > 0, the pool is being (re)acquired and its lock-contention errors are expected: do not log them. */
let acquiringPools = 0;

/**
 * The one sqlite-wasm instance of this JS context, initialised on first use. A second `sqlite3InitModule()`
 * would create a second wasm instance with its own VFS registry, and two pools in one context fight over
 * the same access handles — so everything (including tests) must go through this.
 */
export function loadSqlite(): Promise<Sqlite3Static> {
  modulePromise ??= initModule().catch((error: unknown) => {
    modulePromise = undefined; // a failed wasm fetch may succeed on the next call
    throw error;
  });
  return modulePromise;
}

/** The SQLite library version, e.g. `"3.54.1"`. */
export async function sqliteVersion(): Promise<string> {
  return (await loadSqlite()).version.libVersion;
}

function initModule(): Promise<Sqlite3Static> {
  const global = globalThis as { sqlite3ApiConfig?: Record<string, unknown> };
  // Read once by the library's bootstrap, then deleted by it.
  global.sqlite3ApiConfig = {
    ...global.sqlite3ApiConfig,
    error: (...args: unknown[]) => {
      const error = args.find(isNamedError);
      if (error) lastVfsError = { name: error.name, message: String(error.message) };
      if (acquiringPools > 0 && error && isHandleContention(error)) return;
      console.error(...args);
    },
    // We only use opfs-sahpool. With COOP/COEP headers the plain "opfs" VFSes would otherwise install
    // themselves and spawn an async-proxy worker (~50-100 ms) for nothing.
    disable: { vfs: { opfs: true, "opfs-wl": true } },
  };
  return sqlite3InitModule();
}

// ---------------------------------------------------------------------------------------------------------
// Opening

/**
 * Opens a database. Detects damage at open: bytes that are not a database, or a file that fails
 * `PRAGMA quick_check`, reject with `DatabaseCorrupt` and are left exactly as they were — never replaced by
 * a fresh or in-memory database, because a silent fresh start looks like data loss to the user.
 */
export async function openSqliteDatabase(options: OpenSqliteOptions): Promise<SqliteDatabase> {
  const sqlite3 = await loadSqlite();
  if (options.vfs === "memory") return openMemory(sqlite3, options);
  if (options.vfs === "opfs-sahpool") return openSahPool(sqlite3, options);
  throw new TypeError(`Unknown vfs ${JSON.stringify((options as { vfs: unknown }).vfs)}: use "memory" or "opfs-sahpool".`);
}

async function openMemory(sqlite3: Sqlite3Static, options: OpenSqliteOptions): Promise<SqliteDatabase> {
  const readOnly = options.readOnly ?? false;
  const image = options.image && options.image.byteLength > 0 ? options.image : undefined;
  const db = new sqlite3.oo1.DB(":memory:", "c");
  const label = image ? "the database image" : "the in-memory database";
  const connection = new Connection(sqlite3, db, { readOnly, label, release: undefined });
  try {
    if (image) {
      const { capi, wasm } = sqlite3;
      // sqlite3_deserialize takes ownership of an sqlite3_malloc'ed copy (FREEONCLOSE; also freed on failure).
      const pointer = wasm.allocFromTypedArray(image);
      // An image of a WAL-mode file (bytes 18/19 == 2) cannot be opened in memory (SQLITE_CANTOPEN): there
      // is no WAL beside it. A serialized image holds every committed page, so rollback mode is exact.
      if (image[18] === 2 && image[19] === 2) wasm.heap8u().fill(1, pointer + 18, pointer + 20);
      const flags =
        capi.SQLITE_DESERIALIZE_FREEONCLOSE | (readOnly ? capi.SQLITE_DESERIALIZE_READONLY : capi.SQLITE_DESERIALIZE_RESIZEABLE);
      const rc = capi.sqlite3_deserialize(db.pointer!, "main", pointer, image.byteLength, image.byteLength, flags);
      if (rc !== 0) throw connection.sqliteError(rc);
      connection.checkIntegrity();
    } else if (readOnly) {
      connection.execAll("PRAGMA query_only = 1");
    }
    return connection;
  } catch (error) {
    await connection.abandon();
    throw error;
  }
}

async function openSahPool(sqlite3: Sqlite3Static, options: OpenSqliteOptions): Promise<SqliteDatabase> {
  if (options.image)
    throw new TypeError(
      '`image` is only supported with vfs "memory"; to restore a file into the pool use (await installSahPool()).importDb(path, bytes).',
    );
  const path = options.path ?? DEFAULT_DATABASE_PATH;
  if (!path.startsWith("/")) throw new TypeError(`opfs-sahpool paths must be absolute ("/name.sqlite3"), got ${JSON.stringify(path)}.`);
  const readOnly = options.readOnly ?? false;
  const pool = await retainPool(sqlite3, options.poolDirectory, options.maxWaitMs ?? DEFAULT_MAX_WAIT_MS);
  const where = `"${path}" in the OPFS pool "${pool.directory}"`;
  if (readOnly && !pool.util.getFileNames().includes(path)) {
    await releasePool(pool);
    throw new NotFound(`There is no database ${where} to open read-only. Open it once without readOnly to create it.`);
  }
  let db: InstanceType<SAHPoolUtil["OpfsSAHPoolDb"]>;
  try {
    db = new pool.util.OpfsSAHPoolDb(path);
  } catch (error) {
    await releasePool(pool);
    throw error;
  }
  const connection = new Connection(sqlite3, db, { readOnly, label: `the database ${where}`, release: () => releasePool(pool) });
  try {
    // A read-only open must not touch the file, and a damaged one must stay as found: no checkpoint at
    // close for either. (Cleared again below for a healthy read-write database.)
    connection.setCheckpointOnClose(false);
    // The pool has no shared-memory support, so WAL works only in exclusive locking mode, and a WAL file
    // can only be reopened when EXCLUSIVE is set before the first read (else SQLITE_CANTOPEN). WAL is also
    // what makes a crash safe here: recovery replays committed frames only and never relies on the VFS's
    // hot-journal detection.
    connection.execAll("PRAGMA locking_mode = EXCLUSIVE");
    // Checked before switching to WAL: that switch writes the file header, and a damaged file must stay
    // byte for byte as it was found.
    connection.checkIntegrity();
    if (readOnly) connection.execAll("PRAGMA query_only = 1");
    else connection.execAll("PRAGMA journal_mode = WAL; PRAGMA synchronous = NORMAL");
    if (!readOnly) connection.setCheckpointOnClose(true);
    return connection;
  } catch (error) {
    await connection.abandon();
    throw error;
  }
}

// ---------------------------------------------------------------------------------------------------------
// The OPFS pool

interface PoolState {
  readonly name: string;
  readonly directory: string;
  util: SAHPoolUtil;
  /** Open connections using the pool; the pool is paused (handles released) when it drops to 0. */
  users: number;
}

const pools = new Map<string, PoolState>();
/**
 * Acquiring, unpausing and pausing a pool must never overlap: a failed `unpauseVfs()` releases every handle
 * of the pool, including those a concurrent successful acquisition just took.
 */
let poolQueue: Promise<unknown> = Promise.resolve();

function underPoolLock<T>(work: () => Promise<T>): Promise<T> {
  const result = poolQueue.then(work);
  poolQueue = result.catch(() => undefined);
  return result;
}

/**
 * Installs (or resumes) the OPFS pool and returns the library's pool utility — for inspectors and tests
 * that need the raw file bytes (`exportFile`, `importDb`, `getFileNames`). Closing the last database opened
 * with `openSqliteDatabase` pauses the pool, which invalidates this object until the next call.
 */
export async function installSahPool(options: { poolDirectory?: string; maxWaitMs?: number } = {}): Promise<SAHPoolUtil> {
  const sqlite3 = await loadSqlite();
  const pool = await underPoolLock(() => acquirePool(sqlite3, options.poolDirectory, options.maxWaitMs ?? DEFAULT_MAX_WAIT_MS));
  return pool.util;
}

function retainPool(sqlite3: Sqlite3Static, directory: string | undefined, maxWaitMs: number): Promise<PoolState> {
  return underPoolLock(async () => {
    const pool = await acquirePool(sqlite3, directory, maxWaitMs);
    pool.users += 1;
    return pool;
  });
}

function releasePool(pool: PoolState): Promise<void> {
  return underPoolLock(async () => {
    pool.users -= 1;
    if (pool.users > 0) return;
    try {
      // Releasing the handles lets another tab (or the next owner after a "take over") open the pool
      // without waiting for this worker to die.
      pool.util.pauseVfs();
    } catch {
      // Files opened outside this adapter are still open; keep the pool running for them.
    }
  });
}

/**
 * Installs the pool with a bounded retry. The handles of a reloaded page's worker are released
 * asynchronously (measured: usually before the new worker asks, once ~300 ms later, and indefinitely
 * while a second tab holds them), so `NoModificationAllowedError` is retried with backoff until
 * `maxWaitMs`. `preserveOnInitFailure` is essential: the library's default answers a failed install by
 * deleting the whole pool directory, which loses every database when the other holder lets go mid-way.
 */
async function acquirePool(sqlite3: Sqlite3Static, directory: string | undefined, maxWaitMs: number): Promise<PoolState> {
  const name = directory === undefined ? "opfs-sahpool" : `opfs-sahpool-${directory.replace(/[^A-Za-z0-9_-]/g, "_")}`;
  const started = performance.now();
  let delay = 25;
  acquiringPools += 1;
  try {
    for (let attempt = 1; ; attempt += 1) {
      try {
        const util = await sqlite3.installOpfsSAHPoolVfs({
          name,
          directory,
          initialCapacity: POOL_CAPACITY,
          preserveOnInitFailure: true,
          // Without it the library returns its cached failed promise forever. (Missing from 3.54.1's types.)
          forceReinitIfPreviouslyFailed: attempt > 1,
        } as Parameters<Sqlite3Static["installOpfsSAHPoolVfs"]>[0]);
        if (util.isPaused()) await util.unpauseVfs();
        let pool = pools.get(name);
        if (!pool) {
          pool = { name, directory: directory ?? ".opfs-sahpool", util, users: 0 };
          pools.set(name, pool);
        }
        pool.util = util;
        return pool;
      } catch (error) {
        if (!isHandleContention(error)) {
          throw new StorageUnavailable(
            `The OPFS pool cannot be opened here (${describe(error)}). opfs-sahpool needs a dedicated Web Worker in a ` +
              `browser with OPFS sync access handles; use vfs "memory" elsewhere.`,
            { cause: error },
          );
        }
        const waited = performance.now() - started;
        if (waited + delay > maxWaitMs) {
          throw new DatabaseLocked(
            `The OPFS pool "${directory ?? ".opfs-sahpool"}" is held by another tab or by a worker that is still shutting ` +
              `down (waited ${Math.round(waited)} ms over ${attempt} attempts). Close the other tab, or reload this one.`,
            { cause: error },
          );
        }
        await new Promise((resolve) => setTimeout(resolve, delay));
        delay = Math.min(delay * 2, 500);
      }
    }
  } finally {
    acquiringPools -= 1;
  }
}

// ---------------------------------------------------------------------------------------------------------
// The connection

/**
 * Statements sqlite3_stmt_readonly calls read-only although they change the connection's state: transaction
 * control, ATTACH/DETACH, and a PRAGMA given a value (`query_only(0)`, `foreign_keys = ON`) unless it is one
 * whose argument only names what to read (a table, an index, a check limit).
 */
const CONNECTION_STATEMENT =
  /^\s*(begin|commit|end|rollback|savepoint|release|attach|detach|vacuum)\b|^\s*pragma\s+(?!(?:\w+\.)?(?:table_info|table_xinfo|index_list|index_info|index_xinfo|foreign_key_list|foreign_key_check|integrity_check|quick_check)\b)[\w.]+\s*[(=]/i;

/**
 * The C functions we call straight on the wasm exports: numbers in, numbers out, no argument adapters. Two
 * reasons beyond speed: 3.54.1's `capi.sqlite3_bind_null` wrapper is declared void (returns undefined,
 * hiding errors) and its `capi.sqlite3_bind_text` throws a ReferenceError when given a JS string.
 * Pointers are plain numbers in this 32-bit build; i64 parameters and results are BigInts.
 */
interface RawApi {
  sqlite3_prepare_v3(db: number, sql: number, bytes: number, flags: number, ppStmt: number, pzTail: number): number;
  sqlite3_finalize(stmt: number): number;
  sqlite3_stmt_readonly(stmt: number): number;
  sqlite3_step(stmt: number): number;
  sqlite3_reset(stmt: number): number;
  sqlite3_clear_bindings(stmt: number): number;
  sqlite3_changes(db: number): number;
  sqlite3_get_autocommit(db: number): number;
  sqlite3_bind_parameter_count(stmt: number): number;
  sqlite3_bind_null(stmt: number, index: number): number;
  sqlite3_bind_int(stmt: number, index: number, value: number): number;
  sqlite3_bind_int64(stmt: number, index: number, value: bigint): number;
  sqlite3_bind_double(stmt: number, index: number, value: number): number;
  sqlite3_bind_text(stmt: number, index: number, pointer: number, bytes: number, destructor: number): number;
  sqlite3_bind_blob(stmt: number, index: number, pointer: number, bytes: number, destructor: number): number;
  sqlite3_bind_zeroblob(stmt: number, index: number, bytes: number): number;
  sqlite3_column_count(stmt: number): number;
  sqlite3_column_type(stmt: number, index: number): number;
  sqlite3_column_double(stmt: number, index: number): number;
  sqlite3_column_int64(stmt: number, index: number): bigint;
  sqlite3_column_blob(stmt: number, index: number): number;
  /** The raw export: a pointer to the value as UTF-8 (the library's wrapper of the same name returns a JS string). */
  sqlite3_column_text(stmt: number, index: number): number;
  sqlite3_column_bytes(stmt: number, index: number): number;
  sqlite3_stmt_status(stmt: number, op: number, reset: number): number;
}

/** The library wrappers we keep: they convert C strings, or wrap variadic C functions. */
interface WrappedApi {
  sqlite3_errmsg(db: number): string;
  sqlite3_js_rc_str(rc: number): string | undefined;
  sqlite3_column_name(stmt: number, index: number): string;
  sqlite3_db_config(db: number, op: number, onoff: number, pOut: number): number;
  sqlite3_js_db_export(db: number): Uint8Array;
  SQLITE_WASM_DEALLOC: number;
}

const SQLITE_ROW = 100;
const SQLITE_DONE = 101;
const SQLITE_INTEGER = 1;
const SQLITE_FLOAT = 2;
const SQLITE_TEXT = 3;
const SQLITE_BLOB = 4;
const SQLITE_BUSY = 5;
const SQLITE_READONLY = 8;
const SQLITE_IOERR = 10;
const SQLITE_CORRUPT = 11;
const SQLITE_FULL = 13;
const SQLITE_NOTADB = 26;
const SQLITE_PREPARE_PERSISTENT = 1;
const SQLITE_STMTSTATUS_REPREPARE = 5;
const SQLITE_DBCONFIG_NO_CKPT_ON_CLOSE = 1010;

/** A prepared statement kept for reuse, with its result column names (refreshed when SQLite re-prepares). */
interface Statement {
  readonly pointer: number;
  readonly parameters: number;
  names: string[] | undefined;
  reprepares: number;
}

interface ConnectionOptions {
  readonly readOnly: boolean;
  /** Names the database in error messages. */
  readonly label: string;
  /** Gives the pool back after close (opfs-sahpool only). */
  readonly release: (() => Promise<void>) | undefined;
}

type OoDatabase = InstanceType<Sqlite3Static["oo1"]["DB"]>;

class Connection implements SqliteDatabase {
  readonly readOnly: boolean;
  readonly #sqlite3: Sqlite3Static;
  readonly #c: RawApi;
  readonly #capi: WrappedApi;
  readonly #db: OoDatabase;
  readonly #pointer: number;
  readonly #options: ConnectionOptions;
  readonly #statements = new Map<string, Statement>();
  /** Settles after the last queued operation; each new one chains onto it. */
  #tail: Promise<unknown> = Promise.resolve();
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
      if (image[18] === 2 && image[19] === 2) image.fill(1, 18, 20);
      return image;
    });
  }

  close(): Promise<void> {
    if (!this.#closing) {
      this.#closed = true;
      this.#closing = this.#tail.then(() => this.#shutdown());
    }
    return this.#closing;
  }

  // ------------------------------------------------------------------------------------------------------
  // Used while opening (before the connection is handed out), hence not private.

  /** Runs `PRAGMA quick_check`; a database that fails it, or cannot even be read, is `DatabaseCorrupt`. */
  checkIntegrity(): void {
    const problems = this.#all("PRAGMA quick_check", []).map((row) => String(Object.values(row)[0]));
    if (problems.length === 1 && problems[0] === "ok") return;
    throw new DatabaseCorrupt(
      `${capitalize(this.#options.label)} failed its integrity check (PRAGMA quick_check: ${problems.slice(0, 3).join("; ")}` +
        `${problems.length > 3 ? `; … ${problems.length - 3} more` : ""}). It was left exactly as found; export it for ` +
        `inspection, or open a different database to start over.`,
    );
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
    return this.#translate(rc, error);
  }

  // ------------------------------------------------------------------------------------------------------

  #enqueue<T>(operation: () => T): Promise<T> {
    if (this.#closed) return Promise.reject(new HarnessClosed("Database"));
    const start = () => {
      if (this.#db.pointer === undefined) throw new HarnessClosed("Database");
      lastVfsError = undefined;
      return operation();
    };
    const result = this.#tail.then(() => (eventLoopStarved() ? nextMacrotask().then(start) : start()));
    this.#tail = result.then(noop, noop);
    return result;
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

  #translate(rc: number, error: Error): Error {
    const primary = rc & 0xff;
    const quota = lastVfsError?.name === "QuotaExceededError";
    if (primary === SQLITE_FULL || (primary === SQLITE_IOERR && quota)) {
      return new StorageQuotaExceeded(
        `The storage quota for this site is exhausted, so the write to ${this.#options.label} failed and was rolled back. ` +
          `Free some space (delete old data, or ask the browser for persistent storage), then retry.`,
        { cause: error },
      );
    }
    if (primary === SQLITE_CORRUPT || primary === SQLITE_NOTADB) {
      return new DatabaseCorrupt(
        `${capitalize(this.#options.label)} is damaged or is not a SQLite database (${error.message}). It was left exactly ` +
          `as found; export it for inspection, or open a different database to start over.`,
        { cause: error },
      );
    }
    if (primary === SQLITE_BUSY) {
      // The pool's files belong to this worker alone, so only a second connection here can hold the lock.
      return new DatabaseLocked(
        `${capitalize(this.#options.label)} is already open in this worker (${error.message}). Close the other connection first.`,
        {
          cause: error,
        },
      );
    }
    if (primary === SQLITE_READONLY && this.readOnly) {
      return Object.assign(new ReadOnlySession("Writing to the database"), { cause: error });
    }
    return error;
  }

  async #shutdown(): Promise<void> {
    if (this.#db.pointer === undefined) return;
    for (const statement of this.#statements.values()) this.#c.sqlite3_finalize(statement.pointer);
    this.#statements.clear();
    this.#db.close();
    await this.#options.release?.();
  }
}

// ---------------------------------------------------------------------------------------------------------
// Staying responsive

/**
 * Every operation is synchronous wasm behind a promise, so a task that only commits (phase, commit, next
 * phase, …) runs entirely in microtasks and the worker's event loop never turns. Measured in Chromium 156:
 * such a worker does not answer its page for as long as the burst lasts, and it does not stop when its page
 * reloads — it keeps the OPFS access handles (and the database lock), so the reloaded page cannot open the
 * database (still blocked after 90 s). An operation that finds the loop has not turned for STARVATION_MS
 * first waits one macrotask: about 0.05 ms every 50 ms of back-to-back work.
 */
const STARVATION_MS = 50;
/** A macrotask is queued since `burstStart`; it clears this flag when the loop gets to it. */
let probing = false;
let burstStart = 0;

function eventLoopStarved(): boolean {
  if (!probing) {
    probing = true;
    burstStart = performance.now();
    afterMacrotask(() => (probing = false));
    return false;
  }
  return performance.now() - burstStart > STARVATION_MS;
}

function nextMacrotask(): Promise<void> {
  return new Promise((resolve) => afterMacrotask(resolve));
}

/** A macrotask without timer clamping: `setImmediate` in Node, a MessageChannel message in browsers. */
const afterMacrotask: (callback: () => void) => void = (() => {
  if (typeof setImmediate === "function") return (callback) => void setImmediate(callback);
  if (typeof MessageChannel !== "function") return (callback) => void setTimeout(callback, 0);
  const queue: Array<() => void> = [];
  const channel = new MessageChannel();
  channel.port1.onmessage = () => queue.shift()?.();
  return (callback) => {
    queue.push(callback);
    channel.port2.postMessage(null);
  };
})();

// ---------------------------------------------------------------------------------------------------------

function noop(): void {}

function isThenable(value: unknown): boolean {
  return typeof value === "object" && value !== null && typeof (value as { then?: unknown }).then === "function";
}

function isNamedError(value: unknown): value is { name: string; message: unknown } {
  return typeof value === "object" && value !== null && typeof (value as { name?: unknown }).name === "string" && "message" in value;
}

/** Another context holds the pool's sync access handles (Chromium's wording varies by path). */
function isHandleContention(error: unknown): boolean {
  if (!isNamedError(error)) return false;
  return error.name === "NoModificationAllowedError" || /Access Handles cannot be created/i.test(String(error.message));
}

function describe(error: unknown): string {
  return isNamedError(error) ? `${error.name}: ${String(error.message)}` : String(error);
}

function capitalize(text: string): string {
  return text.charAt(0).toUpperCase() + text.slice(1);
}
