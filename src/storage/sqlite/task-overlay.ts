/**
 * A read-only open of a file whose task rows are behind its log (decision 0081's mark `tasks_behind_log`: a crash
 * while fenced steps' rows waited in memory) shows the tasks a writable open would show before its recount (S4), and
 * writes nothing to the file (S5): decision 0088. The log rows past the mark are replayed into the connection's TEMP
 * schema — a table of the replayed rows, and a TEMP view named `tasks` that puts them over the file's rows. SQLite
 * resolves an unqualified name in `temp` before `main`, so every read of `tasks` — the storage's `getTask`,
 * `listTasks` and snapshot reads, and the seed's own raw SQL through `query()` (S11) — reads the overlay unchanged;
 * `main.tasks` names the file's rows as they are. The TEMP schema lives in memory and dies with the connection.
 */
import { TasksBehindLog } from "../../errors.ts";
import type { TaskRecord } from "../records.ts";
import type { SqliteDatabase } from "./database.ts";
import { batchesOf } from "./fenced-log.ts";
import { SQL } from "./schema.ts";

/** What an open found, and whether the task table is read through the overlay. */
export type Overlaid<T> = T & { overlaid: boolean };

/** The replayed rows (the last logged state of each task past the mark). */
const OVERLAY = "temp.pi_durable_tasks_overlay";
const COLUMNS = "id, conversation_id, kind, status, record";

const OVERLAY_SQL = {
  create: `CREATE TABLE ${OVERLAY} (
  id              INTEGER PRIMARY KEY,
  conversation_id INTEGER NOT NULL,
  kind            TEXT NOT NULL,
  status          TEXT NOT NULL,
  record          TEXT NOT NULL
)`,
  insert: `INSERT INTO ${OVERLAY} (${COLUMNS}) VALUES (?, ?, ?, ?, ?)`,
  // In id order, as the table's own rows come (the seed's query has no ORDER BY): a merge of two id-ordered scans.
  view: `CREATE TEMP VIEW tasks AS
  SELECT ${COLUMNS} FROM main.tasks WHERE id NOT IN (SELECT id FROM ${OVERLAY})
  UNION ALL SELECT ${COLUMNS} FROM ${OVERLAY} ORDER BY id`,
};

/**
 * `SQL.liveTasks` on an overlaid connection: a view has no index to name, so the file's live rows are read through
 * its partial index here (decision 0027: never a scan of every finished row) and the overlay's beside them.
 */
export const OVERLAID_LIVE_TASKS = `SELECT id, record FROM main.tasks INDEXED BY tasks_live
  WHERE status <> 'terminal' AND id NOT IN (SELECT id FROM ${OVERLAY})
  UNION ALL SELECT id, record FROM ${OVERLAY} WHERE status <> 'terminal' ORDER BY id`;

/**
 * Replays the log past `through` into the TEMP overlay of read-only `db`. A database that cannot hold one
 * (`SqliteDatabase.temporary` absent: a driver without TEMP objects) is refused with `TasksBehindLog` — the one
 * path that cannot show the truth. Resolves true when the overlay is in place (nothing past the mark: false).
 */
export async function overlayTaskRows(db: SqliteDatabase, label: string, through: number): Promise<boolean> {
  if (!db.temporary) throw new TasksBehindLog(label, through);
  const latest = new Map<number, TaskRecord>();
  for (const batch of batchesOf(await db.all(SQL.readLog, through, -1))) for (const task of batch.tasks) latest.set(task.id, task);
  if (latest.size === 0) return false;
  await db.temporary((tx) => {
    tx.run(OVERLAY_SQL.create);
    // The texts a writable open's replay would write (deferred.ts `replayLog`).
    for (const task of latest.values())
      tx.run(OVERLAY_SQL.insert, task.id, task.conversationId, task.kind, task.state.status, JSON.stringify(task));
    tx.run(OVERLAY_SQL.view);
  });
  return true;
}
