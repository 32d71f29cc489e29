import type { SAHPoolUtil, Sqlite3Static } from "@sqlite.org/sqlite-wasm";
import { NotFound } from "../../../errors.ts";
import type { SqliteDatabase } from "../database.ts";
import { asRollbackImage } from "./capi.ts";
import { Connection } from "./connection.ts";
import { loadSqlite } from "./module.ts";
import { DEFAULT_MAX_WAIT_MS, releasePool, retainPool } from "./pool.ts";

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
  /**
   * What the open checks before anything is written (decision 0027). Default: `PRAGMA quick_check` of the
   * whole file. `{ tables }`: a file of up to `FULL_CHECK_BYTES` still gets the whole check; a larger one only
   * the named tables (`PRAGMA quick_check(table)`), so the cost of an open does not grow with the rest of the
   * file. (The pages the open then reads are checked by reading them: SQLite refuses a malformed page.)
   */
  integrityCheck?: "full" | { tables: readonly string[] };
}

/** Files up to this size are checked whole at every open whatever `integrityCheck` says (a few ms). */
export const FULL_CHECK_BYTES = 4 * 1024 * 1024;

/** Where the durable database lives in the pool unless the caller says otherwise. */
export const DEFAULT_DATABASE_PATH = "/pi-durable.sqlite3";

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
      // An image of a WAL-mode file cannot be opened in memory (there is no WAL beside it): patch the copy.
      asRollbackImage(wasm.heap8u(), pointer);
      const flags =
        capi.SQLITE_DESERIALIZE_FREEONCLOSE | (readOnly ? capi.SQLITE_DESERIALIZE_READONLY : capi.SQLITE_DESERIALIZE_RESIZEABLE);
      const rc = capi.sqlite3_deserialize(db.pointer!, "main", pointer, image.byteLength, image.byteLength, flags);
      if (rc !== 0) throw connection.sqliteError(rc);
      checkIntegrity(connection, options);
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
  const connection = new Connection(sqlite3, db, {
    readOnly,
    label: `the database ${where}`,
    release: () => releasePool(pool),
    wal: !readOnly,
  });
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
    checkIntegrity(connection, options);
    if (readOnly) connection.execAll("PRAGMA query_only = 1");
    else connection.execAll("PRAGMA journal_mode = WAL; PRAGMA synchronous = NORMAL");
    if (!readOnly) connection.setCheckpointOnClose(true);
    return connection;
  } catch (error) {
    await connection.abandon();
    throw error;
  }
}

/** The check `options.integrityCheck` asks for (decision 0027). */
function checkIntegrity(connection: Connection, options: OpenSqliteOptions): void {
  const scope = options.integrityCheck;
  // The header is read first in any case: bytes that are not a database fail here, before any table check.
  const whole = scope === undefined || scope === "full" || connection.fileBytes() <= FULL_CHECK_BYTES;
  connection.checkIntegrity(whole ? undefined : scope.tables);
}
