/**
 * The open's read of the live tasks (decision 0043). Row by row, each record is a column read, a UTF-8 decode
 * and a `JSON.parse` of its own, 10,000 of each in front of the first resumed step with 10,000 live tasks.
 * Here SQLite joins a slice of rows into one text (after checking that each is one valid JSON text, so the join
 * holds exactly as many values as rows), which is decoded and parsed once. A slice with any row that is not a
 * sound record is read again row by row, which lists each damaged one as before (B4).
 */
import type { TaskRecord } from "../records.ts";
import { parseAll, parseJoined } from "../rows.ts";
import type { DamagedRow } from "../storage.ts";
import type { SqliteDatabase } from "./database.ts";

/** Rows per joined read: bounds the one text (and a slice read again) whatever the live set's size. */
const SLICE = 2_000;
/** Through the partial index, named: without it the planner scans the whole table in id order (decision 0027). */
const LIVE = `FROM tasks INDEXED BY tasks_live WHERE status <> 'terminal' AND id > ? ORDER BY id LIMIT ${SLICE}`;
const JOINED = `SELECT count(*) AS n, sum(typeof(record) = 'text' AND json_valid(record)) AS valid, max(length(record)) AS longest,
  max(id) AS last, '[' || coalesce(group_concat(record, ',' ORDER BY id), '') || ']' AS records FROM (SELECT id, record ${LIVE})`;
const ROWS = `SELECT id, record ${LIVE}`;

export async function readLiveTasks(db: SqliteDatabase, damaged: DamagedRow[]): Promise<TaskRecord[]> {
  const tasks: TaskRecord[] = [];
  for (let after = Number.MIN_SAFE_INTEGER; ; ) {
    const slice = await db.get(JOINED, after);
    const count = Number(slice?.n ?? 0);
    if (count === 0) return tasks;
    const joined =
      Number(slice!.valid) === count && typeof slice!.records === "string"
        ? parseJoined<TaskRecord>("tasks", slice!.records, count, Number(slice!.longest))
        : undefined;
    if (joined) for (const task of joined) tasks.push(task);
    else {
      const rows = (await db.all(ROWS, after)).map((row) => [row.id as number, row.record] as const);
      for (const task of parseAll<TaskRecord>("tasks", rows, damaged)) tasks.push(task);
    }
    if (count < SLICE) return tasks;
    after = Number(slice!.last);
  }
}
