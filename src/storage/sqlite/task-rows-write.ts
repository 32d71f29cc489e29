import type { TaskRecord } from "../records.ts";
import type { SqliteTransaction, SqlValue } from "./database.ts";
import { SQL, TASK_RECORD_ROWS, TASK_UPSERT_ROWS } from "./schema.ts";

/** A task row as a batch writes it: the record and its text. */
interface TaskRowText {
  readonly task: TaskRecord;
  readonly record: string;
}

/**
 * Writes a batch's task rows (decision 0041). A live task whose stored status stays (a step) rewrites only its
 * record; a group's such rows go several to a statement, so the wasm boundary is crossed per statement rather
 * than per row. The batch's other rows (new tasks, tasks that change status: a pass's claims, a group's last
 * steps) are upserted several to a statement too, after the steps, in the batch's order (decision 0087: one or two
 * statements a row before). Every row of a batch that names a task twice, the rows of a step statement that did
 * not change as many rows as it carries (a row not there after all), and a last row left alone take the
 * row-by-row path, in the batch's order.
 *
 * A batch that names a task twice goes row by row with every row's status written: before decision 0083 its
 * second row was checked against the status stored before the batch, so a task moved and moved back in one batch
 * kept the moved status beside its last record.
 *
 * One writer per storage, reused by every batch (decision 0083): a group of a hundred steps made a set of the
 * batch's ids, two lists, a slice and a growing parameter list for each statement, about 150 bytes a step. The
 * writer keeps instead, across batches, the number of the batch that last named each task, which rows of the
 * batch are steps, and one parameter list per statement size (emptied after each use: it holds no text once
 * written).
 */
export class TaskRowWriter {
  /** The number of the batch that last named each task (a batch whose number is found again names it twice). */
  readonly #named = new Map<number, number>();
  #batches = 0;
  /** Which rows of the batch being written are steps (1), by index; grown to the largest batch seen. */
  #steps = new Uint8Array(128);
  /** One parameter list per statement's parameter count, all null between statements. */
  readonly #params = new Map<number, SqlValue[]>();

  /** Writes `tasks` in `tx`; `storedStatus` is each live task's stored status before this batch. */
  write(tx: SqliteTransaction, tasks: ReadonlyArray<TaskRowText>, storedStatus: ReadonlyMap<number, string>): void {
    if (tasks.length < 2) {
      for (let at = 0; at < tasks.length; at++) writeOne(tx, tasks[at]!, storedStatus);
      return;
    }
    const count = tasks.length;
    const batch = ++this.#batches;
    const named = this.#named;
    // Ids of tasks long ended (or of batches refused) are forgotten now and then; one of them found again is only
    // a number that is not this batch's.
    if (named.size > 2 * storedStatus.size + 1024) named.clear();
    if (this.#steps.length < count) this.#steps = new Uint8Array(count * 2);
    const steps = this.#steps;
    let stepRows = 0;
    let repeated = false;
    for (let at = 0; at < count; at++) {
      const task = tasks[at]!.task;
      if (named.get(task.id) === batch) repeated = true;
      else named.set(task.id, batch);
      const step = storedStatus.get(task.id) === task.state.status;
      steps[at] = step ? 1 : 0;
      if (step) stepRows++;
    }
    if (repeated) {
      // The stored status a row is checked against moves within the batch: its status is written with each row.
      for (let at = 0; at < count; at++) writeOne(tx, tasks[at]!, undefined);
      return;
    }
    // The steps in statements of the largest sizes that fit, in the batch's order; a last single step alone.
    let next = 0; // where the next step row is looked for
    for (let left = stepRows; left > 0; ) {
      const rows = statementRows(left, TASK_RECORD_ROWS);
      if (rows === undefined) {
        while (steps[next] === 0) next++;
        writeOne(tx, tasks[next++]!, storedStatus);
        left--;
        continue;
      }
      const params = this.#paramsOf(rows, 2);
      const first = next;
      for (let filled = 0; filled < rows; next++) {
        if (steps[next] === 0) continue;
        const { task, record } = tasks[next]!;
        params[2 * filled] = task.id;
        params[2 * filled + 1] = record;
        filled++;
      }
      let changed: number;
      try {
        changed = tx.run(SQL.updateTaskRecords(rows), ...params);
      } finally {
        params.fill(null);
      }
      if (changed !== rows) for (let at = first; at < next; at++) if (steps[at] === 1) writeOne(tx, tasks[at]!, storedStatus);
      left -= rows;
    }
    // The other rows (new, or changing status) upserted several to a statement too (decision 0087), in the
    // batch's order; a last single one alone.
    next = 0;
    for (let left = count - stepRows; left > 0; ) {
      const rows = statementRows(left, TASK_UPSERT_ROWS);
      if (rows === undefined) {
        while (steps[next] === 1) next++;
        writeOne(tx, tasks[next++]!, storedStatus);
        left--;
        continue;
      }
      const params = this.#paramsOf(rows, 5);
      for (let filled = 0; filled < rows; next++) {
        if (steps[next] === 1) continue;
        const task = tasks[next]!.task;
        const at = 5 * filled++;
        params[at] = task.id;
        params[at + 1] = task.conversationId;
        params[at + 2] = task.kind;
        params[at + 3] = task.state.status;
        params[at + 4] = tasks[next]!.record;
      }
      try {
        tx.run(SQL.upsertTasks(rows), ...params);
      } finally {
        params.fill(null);
      }
      left -= rows;
    }
  }

  /** The parameter list of a statement of `rows` rows of `width` parameters each (step rows 2, upserts 5). */
  #paramsOf(rows: number, width: 2 | 5): SqlValue[] {
    const key = rows * width;
    let params = this.#params.get(key);
    if (params === undefined) {
      params = new Array<SqlValue>(key).fill(null);
      this.#params.set(key, params);
    }
    return params;
  }
}

/** The most rows of `sizes` that fit in `left`, or undefined when none does (one row left). */
function statementRows<Rows extends number>(left: number, sizes: readonly Rows[]): Rows | undefined {
  for (let index = 0; index < sizes.length; index++) if (sizes[index]! <= left) return sizes[index];
  return undefined;
}

/**
 * One row by itself: its record when its stored status stays, else its status too, else a new row. Without
 * `storedStatus` (a batch that names a task twice: its first row may have moved the status) the status is
 * written every time.
 */
function writeOne(tx: SqliteTransaction, row: TaskRowText, storedStatus: ReadonlyMap<number, string> | undefined): void {
  const { task, record } = row;
  const status = task.state.status;
  if (storedStatus?.get(task.id) === status && tx.run(SQL.updateTaskRecord, record, task.id) === 1) return;
  if (tx.run(SQL.updateTask, status, record, task.id) === 0)
    tx.run(SQL.insertTask, task.id, task.conversationId, task.kind, status, record);
}
