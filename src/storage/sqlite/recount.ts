/**
 * S4's recovery commit as one statement (decision 0043). At an open every task stored `running` gets
 * `restarts + 1` (and, unless it keeps running, `pending` with the same checkpoint), in one commit. Row by row
 * that is a `JSON.stringify` of each record, its copy into the wasm heap and an UPDATE per row, all in front of
 * the first resumed step; SQLite does the same to the stored text in one UPDATE, with the same result.
 */
import type { Batch } from "../records.ts";
import type { SqliteTransaction } from "./database.ts";
import { type OwedRecount, RECOUNT_SLICE, recountSql } from "./recount-owed.ts";
import type { TaskText } from "./task-text.ts";

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

/** Whether the recovery of `ids` goes in slices: more than one, ascending. */
const sliced = (ids: readonly number[]): boolean =>
  ids.length > RECOUNT_SLICE && ids.every((id, index) => index === 0 || ids[index - 1]! < id);

/**
 * Counts every running row's restart in one UPDATE, or (more than a slice) the first slice and the rest as owed
 * (decision 0092); rolls back (throws `RECOUNT_MISMATCH`) unless it counted exactly `ids`, ascending.
 */
export function recountRunning(tx: SqliteTransaction, keepRunning: boolean, ids: readonly number[], owed: OwedRecount): void {
  if (sliced(ids)) {
    if (!owed.open(tx, keepRunning, ids)) throw RECOUNT_MISMATCH;
  } else if (tx.run(recountSql(keepRunning)) !== ids.length) throw RECOUNT_MISMATCH;
}

/**
 * Stores S4's recovery batch (`recount`: `recountOf` said it is one) by statement; false when the statement counted
 * other rows than the batch names (rolled back: the caller stores it row by row). `liveStatus` and `texts` are the
 * storage's caches of what each live row holds.
 */
export async function storeRecount(
  batch: Batch,
  recount: { keepRunning: boolean },
  owed: OwedRecount,
  writing: (body: (tx: SqliteTransaction, turn: { flush(): void } | undefined) => void) => Promise<void>,
  liveStatus: Map<number, string>,
  texts: Map<number, TaskText>,
): Promise<boolean> {
  const ids = batch.tasks.map((task) => task.id);
  if (sliced(ids)) owed.keeps(ids); // decision 0098: a crashed open's windows kept, not stored in front of the first step
  try {
    await writing((tx, turn) => {
      turn?.flush();
      recountRunning(tx, recount.keepRunning, ids, owed);
    });
    owed.ended(true); // the window it opened, if any (decision 0092)
  } catch (error) {
    owed.ended(false);
    if (error === RECOUNT_MISMATCH) return false; // rolled back: stored row by row instead
    throw error;
  }
  // An owed row keeps its stored status until its slice: a write of it must then set the status column too. A recount
  // that keeps its tasks running stores every one running whether owed or not: no row asks `owes` (decision 0104).
  const running = recount.keepRunning;
  for (const task of batch.tasks) liveStatus.set(task.id, running || owed.owes(task.id) ? "running" : task.state.status);
  if (texts.size > 0) for (const task of batch.tasks) texts.delete(task.id);
  return true;
}
