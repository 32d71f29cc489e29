/**
 * S4's recovery commit as one statement (decision 0043). At an open every task stored `running` gets
 * `restarts + 1` (and, unless it keeps running, `pending` with the same checkpoint), in one commit. Row by row
 * that is a `JSON.stringify` of each record, its copy into the wasm heap and an UPDATE per row, all in front of
 * the first resumed step; SQLite does the same to the stored text in one UPDATE, with the same result.
 */
import type { Batch } from "../records.ts";
import type { SqliteTransaction } from "./database.ts";

/** Only rows the open loaded live: the partial index the load reads them through (decision 0027). */
const RUNNING = `WHERE status <> 'terminal' AND status = 'running'`;
const RESTARTS = `'$.restarts', coalesce(record ->> '$.restarts', 0) + 1`;
const RECOUNT = {
  running: `UPDATE tasks INDEXED BY tasks_live SET record = json_set(record, ${RESTARTS}) ${RUNNING}`,
  pending: `UPDATE tasks INDEXED BY tasks_live SET status = 'pending', record = json_set(record, '$.state',
    json_object('status', 'pending', 'checkpoint', record -> '$.state.checkpoint'), ${RESTARTS}) ${RUNNING}`,
};

/** Thrown inside the transaction (so it rolls back) when the statement counted other rows than the batch names. */
export const RECOUNT_MISMATCH = Symbol("recount mismatch");

/**
 * Whether `batch` is a recount this storage may store by statement: the session's mark, no fence (a logged batch
 * is stored as it is), tasks only, each counted to a safe integer (what SQLite computes from the stored value is
 * then what the session computed from the same text) and in the status the mark says. On a storage that limits
 * its rows the batch goes row by row, where each row is checked against the limit.
 */
export function recountOf(batch: Batch, maxRowBytes: number | undefined): { keepRunning: boolean } | undefined {
  const recount = batch.recount;
  if (!recount || batch.fence || maxRowBytes !== undefined || batch.tasks.length === 0) return undefined;
  if (batch.conversations.length + batch.entries.length + batch.submissions.length + batch.documents.length > 0) return undefined;
  if (batch.nextId !== undefined || batch.rootConversationId !== undefined) return undefined;
  const status = recount.keepRunning ? "running" : "pending";
  for (const task of batch.tasks)
    if (task.state.status !== status || !Number.isSafeInteger(task.restarts) || task.restarts! < 1) return undefined;
  return { keepRunning: recount.keepRunning === true };
}

/** Counts every running row's restart in one UPDATE; rolls back (throws `RECOUNT_MISMATCH`) unless it counted `expected`. */
export function recountRunning(tx: SqliteTransaction, keepRunning: boolean, expected: number): void {
  if (tx.run(keepRunning ? RECOUNT.running : RECOUNT.pending) !== expected) throw RECOUNT_MISMATCH;
}
