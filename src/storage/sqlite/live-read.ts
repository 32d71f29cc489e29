/**
 * The open's read of every live task, in chunks (decision 0080). Read row by row, each record is a text of its own
 * decoded out of the wasm heap; in Chromium that decode is the largest single cost of a reload with thousands of
 * live tasks (bench/browser/profile-recovery.ts: the row codec's column read, ahead of SQLite's own work). Here
 * SQLite joins a chunk's records into one JSON array text: one decode and one `JSON.parse` a chunk.
 *
 * The chunked read gives exactly what the row-by-row read gives. A chunk is taken only when it is exactly its rows:
 * one element per planned row, each an object with an object `state` and the row's own `id`, none nested past the
 * stored depth limit; anything else (a record that is not one JSON value, not a record, not its row's) and the chunk
 * is read again row by row, where a damaged row is listed as it always was (B4). A record that is not text, or
 * as long as `CHUNKS.lone` or longer, is read alone, so a chunk's text stays under `CHUNKS.bytes` plus one row.
 */
import { depthExceeds, STORED_DEPTH_LIMIT } from "../../limits.ts";
import type { TaskRecord } from "../records.ts";
import { parseInto } from "../rows.ts";
import type { DamagedRow } from "../storage.ts";
import type { SqliteDatabase } from "./database.ts";

/** How chunks are cut. */
export interface ChunkShape {
  /** At most this many rows a chunk. */
  rows: number;
  /** A chunk closes once its records reach this many bytes. */
  bytes: number;
  /** A record of this many bytes or more is read on its own (as is one that is not text). */
  lone: number;
}

export const CHUNKS: ChunkShape = Object.freeze({ rows: 1024, bytes: 1024 * 1024, lone: 256 * 1024 });

const READ = {
  /**
   * The live rows' ids and record sizes (-1: not text), in id order: the covering partial index for the ids, then
   * a lookup by id that reads no record's content (`octet_length` of a text is its stored size).
   */
  plan: `SELECT json_group_array(id) AS ids,
    json_group_array(CASE WHEN typeof(record) = 'text' THEN octet_length(record) ELSE -1 END) AS sizes
    FROM tasks WHERE id IN (SELECT id FROM tasks INDEXED BY tasks_live WHERE status <> 'terminal')`,
  /** One chunk's records as one JSON array text, looked up by id (bound as a JSON array of ids). */
  chunk: `SELECT '[' || group_concat(record, ',') || ']' AS records FROM tasks WHERE id IN (SELECT value FROM json_each(?))`,
  /** The same rows one by one, for a chunk that is not exactly its rows. */
  rows: `SELECT id, record FROM tasks WHERE id IN (SELECT value FROM json_each(?)) ORDER BY id`,
};

/**
 * Reads every live task record in id order into `out`, listing the damaged ones in `damaged` (as `parseInto` does).
 * False, with nothing read, when an id is not a safe integer (a damaged key): the caller reads row by row.
 */
export async function readLiveTasks(
  db: SqliteDatabase,
  out: TaskRecord[],
  damaged: DamagedRow[],
  shape: ChunkShape = CHUNKS,
): Promise<boolean> {
  const plan = await db.get(READ.plan);
  const ids = JSON.parse(String(plan?.ids ?? "[]")) as number[];
  const sizes = JSON.parse(String(plan?.sizes ?? "[]")) as number[];
  if (ids.length !== sizes.length || !ids.every((id) => Number.isSafeInteger(id))) return false;
  order(ids, sizes);
  const alone = (index: number) => sizes[index]! < 0 || sizes[index]! >= shape.lone;
  for (let start = 0, end = 0; start < ids.length; start = end) {
    end = start + 1;
    let bytes = sizes[start]!;
    if (!alone(start)) while (end < ids.length && end - start < shape.rows && bytes < shape.bytes && !alone(end)) bytes += sizes[end++]!;
    const chunk = ids.slice(start, end);
    if (alone(start) || !(await takeChunk(db, chunk, sizes.slice(start, end), out))) await readRows(db, chunk, out, damaged);
  }
  return true;
}

/** Appends the chunk's records to `out` when they are exactly its rows; false (and nothing appended) otherwise. */
async function takeChunk(db: SqliteDatabase, ids: number[], sizes: number[], out: TaskRecord[]): Promise<boolean> {
  const row = await db.get(READ.chunk, JSON.stringify(ids));
  let records: unknown;
  try {
    records = JSON.parse(String(row?.records));
  } catch {
    return false;
  }
  if (!Array.isArray(records) || records.length !== ids.length) return false;
  for (let index = 0; index < records.length; index++) {
    const record = records[index] as { id?: unknown; state?: unknown } | null;
    if (typeof record !== "object" || record === null || Array.isArray(record)) return false;
    if (record.id !== ids[index] || typeof record.state !== "object" || record.state === null) return false;
    // Each level takes two characters (one byte each), so only a long record can be this deep (as in `parse`).
    if (sizes[index]! > 2 * STORED_DEPTH_LIMIT && depthExceeds(record, STORED_DEPTH_LIMIT)) return false;
  }
  for (const record of records) out.push(record as TaskRecord);
  return true;
}

async function readRows(db: SqliteDatabase, ids: number[], out: TaskRecord[], damaged: DamagedRow[]): Promise<void> {
  for (const row of await db.all(READ.rows, JSON.stringify(ids))) parseInto("tasks", row.id as number, row.record, out, damaged);
}

/** Sorts `ids` ascending with `sizes` alongside, unless they already are (SQLite reads them in id order). */
function order(ids: number[], sizes: number[]): void {
  let sorted = true;
  for (let index = 1; index < ids.length && sorted; index++) sorted = ids[index - 1]! < ids[index]!;
  if (sorted) return;
  const pairs = ids.map((id, index) => [id, sizes[index]!] as const).sort((a, b) => a[0] - b[0]);
  pairs.forEach(([id, size], index) => {
    ids[index] = id;
    sizes[index] = size;
  });
}
