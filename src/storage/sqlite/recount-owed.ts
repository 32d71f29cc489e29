/**
 * S4's recount in slices (decision 0092). An open with more running rows than one slice counts the first slice in its
 * recovery commit and records the rest as owed, in the same transaction, in one metadata row:
 * `{ after, through, keepRunning, written }` — every row stored `running` with `after < id <= through` whose id is not
 * in `written` owes this open's restart (+1, and `pending` with the same checkpoint unless `keepRunning`). Later
 * commits of the same open count the rest, one slice each, moving `after` up; the last one deletes the row.
 *
 * Why it stays exact. The session counted every running task in memory before anything ran, so every record it
 * writes already carries its restart: a commit that writes an owed task's row adds the id to `written` in the same
 * transaction (the row no longer owes). A row still `running`, inside the window and not written, is exactly a row
 * the open loaded running and has not written since. After a crash, the next open's load applies what is owed to
 * the records it parsed, and its first writing transaction stores that (before anything else it writes), then
 * counts its own restarts: each crash counts each restart once.
 */
import { DatabaseCorrupt } from "../../errors.ts";
import type { TaskRecord } from "../records.ts";
import type { SqliteTransaction } from "./database.ts";
import { SQL } from "./schema.ts";

/** The metadata key of the window. */
export const OWED_KEY = "recount_owed";
/** Running rows counted per slice (the first in the open's recovery commit, which the first pass needs). */
export const RECOUNT_SLICE = 1024;

interface Owed {
  after: number;
  through: number;
  keepRunning: boolean;
  written: number[];
}

const RUNNING = `status <> 'terminal' AND status = 'running'`;
const RESTARTS = `'$.restarts', coalesce(record ->> '$.restarts', 0) + 1`;
const COUNT = {
  running: `record = json_set(record, ${RESTARTS})`,
  pending: `status = 'pending', record = json_set(record, '$.state',
    json_object('status', 'pending', 'checkpoint', record -> '$.state.checkpoint'), ${RESTARTS})`,
};
/** Counts every running row, or those up to `?` (a first slice). Reads only live rows (decision 0043). */
export const recountSql = (keepRunning: boolean, upTo: boolean): string =>
  `UPDATE tasks INDEXED BY tasks_live SET ${keepRunning ? COUNT.running : COUNT.pending} WHERE ${RUNNING}${upTo ? " AND id <= ?" : ""}`;
const owedSql = (keepRunning: boolean): string =>
  `UPDATE tasks INDEXED BY tasks_live SET ${keepRunning ? COUNT.running : COUNT.pending}
   WHERE ${RUNNING} AND id > ? AND id <= ? AND id NOT IN (SELECT value FROM json_each(?))`;
const COUNT_IN = `SELECT count(*) AS n FROM tasks INDEXED BY tasks_live WHERE ${RUNNING} AND id > ? AND id <= ?`;
const SLICE_END = `SELECT id FROM tasks INDEXED BY tasks_live WHERE ${RUNNING} AND id > ? AND id <= ? ORDER BY id LIMIT 1 OFFSET ?`;

/**
 * The window of one storage: its own open's (`#window`) and a crashed open's found at load (`#found`, settled by
 * the first writing transaction). Changes made inside a transaction are staged and kept only once it commits.
 */
export class OwedRecount {
  #window: Owed | undefined;
  #found: (Owed & { count: number }) | undefined;
  #staged: { window?: Owed | null; found?: null } | undefined;
  readonly #label: string;

  constructor(label: string) {
    this.#label = label;
  }

  /** Whether this open still owes restarts, or a crashed open's are not stored yet (a slice is due). */
  get owing(): boolean {
    return this.#window !== undefined || this.#found !== undefined;
  }

  /** Whether row `id` still owes this open's restart (it is in the window). */
  owes(id: number): boolean {
    const window = this.#window;
    return window !== undefined && id > window.after && id <= window.through && !window.written.includes(id);
  }

  /**
   * A writing transaction (`run` runs one): what a crashed open owed is stored first, and what it stages is kept only
   * if it commits. With nothing owed the transaction runs as it is (no await of its own: decision 0091); a recovery
   * commit that opens a window then ends it itself (`storeRecount`).
   */
  around<T, U>(
    body: (tx: SqliteTransaction, turn: U) => T,
    run: (settled: (tx: SqliteTransaction, turn: U) => T) => Promise<T>,
  ): Promise<T> {
    if (!this.owing) return run(body);
    return run((tx, turn) => {
      this.settle(tx);
      return body(tx, turn);
    }).then(
      (result) => {
        this.ended(true);
        return result;
      },
      (error: unknown) => {
        this.ended(false);
        throw error;
      },
    );
  }

  /**
   * At load: a window a crashed open left is applied to the records just parsed (restarts + 1, pending unless it
   * kept them running), so the mirror, a read-only open's `inspect()` and S6 see every restart counted.
   */
  loaded(text: string | undefined, tasks: TaskRecord[]): void {
    this.#window = undefined;
    this.#found = undefined;
    if (text === undefined) return;
    const owed = parseOwed(text, this.#label);
    const written = new Set(owed.written);
    let count = 0;
    for (const task of tasks) {
      if (task.id <= owed.after || task.id > owed.through || task.state.status !== "running" || written.has(task.id)) continue;
      if (!owed.keepRunning) task.state = { status: "pending", checkpoint: task.state.checkpoint };
      task.restarts = (task.restarts ?? 0) + 1;
      count++;
    }
    this.#found = { ...owed, count };
  }

  /** First in every writing transaction: stores what a crashed open owed (once). */
  settle(tx: SqliteTransaction): void {
    const found = this.#found;
    if (!found || this.#staged?.found === null) return;
    const counted = tx.run(owedSql(found.keepRunning), found.after, found.through, JSON.stringify(found.written));
    if (counted !== found.count)
      throw new DatabaseCorrupt(`${this.#label}: the owed restarts counted ${counted} rows, not ${found.count}.`);
    tx.run(SQL.deleteMeta, OWED_KEY);
    this.#stage({ found: null });
  }

  /**
   * The open's recovery commit: counts the first slice of `ids` (the running rows, ascending, more than a slice) and
   * records the rest as owed. False when the rows stored running are not exactly `ids` (the caller rolls back).
   */
  open(tx: SqliteTransaction, keepRunning: boolean, ids: readonly number[]): boolean {
    const after = ids[RECOUNT_SLICE - 1]!;
    const through = ids[ids.length - 1]!;
    if (tx.run(recountSql(keepRunning, true), after) !== RECOUNT_SLICE) return false;
    if (Number(tx.get(COUNT_IN, after, through)?.n) !== ids.length - RECOUNT_SLICE) return false;
    this.#write(tx, { after, through, keepRunning, written: [] });
    return true;
  }

  /** In a commit that writes task rows: the owed ones among them no longer owe (their records carry the count). */
  written(tx: SqliteTransaction, tasks: ReadonlyArray<{ id: number }>): void {
    const window = this.#current();
    if (!window) return;
    let written: number[] | undefined;
    for (const { id } of tasks) {
      if (id <= window.after || id > window.through || (written ?? window.written).includes(id)) continue;
      (written ??= [...window.written]).push(id);
    }
    if (written) this.#write(tx, { ...window, written });
  }

  /** One slice of what this open owes; returns whether more is owed after it. */
  slice(tx: SqliteTransaction): boolean {
    const window = this.#current();
    if (!window) return false;
    const end = Number(tx.get(SLICE_END, window.after, window.through, RECOUNT_SLICE - 1)?.id ?? window.through);
    tx.run(owedSql(window.keepRunning), window.after, end, JSON.stringify(window.written));
    if (end >= window.through) {
      tx.run(SQL.deleteMeta, OWED_KEY);
      this.#stage({ window: null });
      return false;
    }
    this.#write(tx, { ...window, after: end, written: window.written.filter((id) => id > end) });
    return true;
  }

  /** After the transaction: keep what it staged, or (rolled back) drop it. */
  ended(committed: boolean): void {
    const staged = this.#staged;
    this.#staged = undefined;
    if (!committed || !staged) return;
    if (staged.found === null) this.#found = undefined;
    if (staged.window !== undefined) this.#window = staged.window ?? undefined;
  }

  /** A rebuilt file is another place's copy: nothing of this open is owed in it. */
  forget(): void {
    this.#window = undefined;
    this.#found = undefined;
  }

  #current(): Owed | undefined {
    const staged = this.#staged?.window;
    return staged === undefined ? this.#window : (staged ?? undefined);
  }

  #write(tx: SqliteTransaction, owed: Owed): void {
    tx.run(SQL.writeMeta, OWED_KEY, JSON.stringify(owed));
    this.#stage({ window: owed });
  }

  #stage(change: { window?: Owed | null; found?: null }): void {
    this.#staged = { ...this.#staged, ...change };
  }
}

function parseOwed(text: string, label: string): Owed {
  let owed: Partial<Owed> | undefined;
  try {
    owed = JSON.parse(text) as Partial<Owed>;
  } catch {}
  const ids = (value: unknown) => Number.isSafeInteger(value);
  if (
    !owed ||
    !ids(owed.after) ||
    !ids(owed.through) ||
    typeof owed.keepRunning !== "boolean" ||
    !Array.isArray(owed.written) ||
    !owed.written.every(ids)
  )
    throw new DatabaseCorrupt(`${label}: metadata ${OWED_KEY} is damaged.`);
  return owed as Owed;
}
