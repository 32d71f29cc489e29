import { queryLimits } from "./query-rules.ts";
import { META_TABLE } from "./schema.ts";
import { SqliteStorage, type SqliteStorageOptions } from "./storage.ts";
import { type OpenSqliteOptions, openSqliteDatabase } from "./wasm.ts";

/**
 * The tables an open reads whole (decision 0027), checked at every open: the marker (and version 1's, `meta`),
 * conversations, documents. Tasks, entries and submissions grow with the database's history; the open reads
 * only their live rows, through partial indexes, and SQLite checks each page it reads.
 */
const OPEN_READS_WHOLE = [META_TABLE, "meta", "conversations", "documents"];

/**
 * Opens durable storage on sqlite-wasm: `{ vfs: "memory" }` (Node and browser; `image` opens a copy of
 * exported bytes) or `{ vfs: "opfs-sahpool", path }` (a browser worker). Refuses damaged files, non-SQLite
 * bytes and schemas newer than this code, leaving them unmodified. A fenced step's task rows wait in memory by
 * default (`deferTaskRows`, decisions 0081 and 0086; both backends).
 */
export async function openSqliteStorage(options: OpenSqliteOptions & SqliteStorageOptions): Promise<SqliteStorage> {
  const limits = queryLimits(options.queryLimits); // a bad limit is refused before the database is touched
  const database = await openSqliteDatabase({ integrityCheck: { tables: OPEN_READS_WHOLE }, ...options });
  try {
    // A fenced step's task row waits (decision 0081: on OPFS a commit costs its WAL frames; decision 0086: in memory
    // one statement less a step) unless the caller says not.
    const deferTaskRows = options.deferTaskRows ?? true;
    const label = `sqlite:${options.vfs}${options.path ? `:${options.path}` : ""}`;
    return await SqliteStorage.open(database, label, { queryLimits: limits, deferTaskRows });
  } catch (error) {
    await database.close().catch(() => {});
    throw error;
  }
}
