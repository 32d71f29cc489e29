/**
 * S4's recount in slices (decisions 0092, 0098). An open with more running rows than one slice records them as owed in
 * its recovery commit (counting a first slice there only when it makes them pending), in one metadata row: a list of
 * windows `[{ after, through, keepRunning, written }]`. Each window is one open's: every row stored `running` with
 * `after < id <= through` whose id is not in `written` owes that open's restart (+1, and `pending` with the same
 * checkpoint unless `keepRunning`); a row owes one restart for each window it is in. Later commits of the same open
 * count the rest, one slice each, moving every window's `after` up; the last one deletes the row.
 *
 * Why it stays exact. The session counted every running task in memory before anything ran, so every record it
 * writes already carries its restarts: a commit that writes an owed task's row adds the id to `written` of each
 * window that holds it, in the same transaction (the row no longer owes). A row still `running`, inside a window and
 * not written, is exactly a row that window's open loaded running and nothing has written since. After a crash, the
 * next open's load applies every window to the records it parsed. Its recovery commit then either keeps the windows
 * and adds its own (decision 0098: when every window kept its tasks running, the rows it owes are the ones the new
 * open counts again, so nothing is stored in front of the first step), or stores what they owe first, before
 * anything else it writes (0092's settlement), then counts its own: each crash counts each restart once.
 */
import { DatabaseCorrupt } from "../../errors.ts";
import { pendingAt } from "../progress.ts";
import type { TaskRecord } from "../records.ts";
import type { SqliteTransaction, SqlRow, SqlValue } from "./database.ts";
import { SQL } from "./schema.ts";

/** The metadata key of the windows. */
export const OWED_KEY = "recount_owed";
/** Running rows counted per slice (the first in the open's recovery commit, which the first pass needs). */
export const RECOUNT_SLICE = 1024;
/** Windows kept at most: an open that finds more (a reload in front of every open's slices) stores them first. */
const MAX_WINDOWS = 4;

export interface Owed {
  after: number;
  through: number;
  keepRunning: boolean;
  written: number[];
}

const RUNNING = `status <> 'terminal' AND status = 'running'`;
const STAMP = `record ->> '$.state.progressed'`;
/**
 * A running row's state as the recovery leaves it: `pending` at the same checkpoint, with its progress stamp when it
 * is a safe integer (decision 0112) — the JSON `pendingAt` makes of the same record (a stamp stored as `1e3` is the
 * number 1000 to both).
 */
const PENDING = `CASE WHEN json_type(record, '$.state.progressed') IN ('integer', 'real')
    AND ${STAMP} BETWEEN -9007199254740991 AND 9007199254740991 AND ${STAMP} = CAST(${STAMP} AS INTEGER)
    THEN json_object('status', 'pending', 'checkpoint', record -> '$.state.checkpoint', 'progressed', CAST(${STAMP} AS INTEGER))
    ELSE json_object('status', 'pending', 'checkpoint', record -> '$.state.checkpoint') END`;
/** Counts every running row (a file of one slice or less: decision 0043's statement). */
export const recountSql = (keepRunning: boolean): string =>
  keepRunning
    ? `UPDATE tasks INDEXED BY tasks_live SET record = json_set(record, '$.restarts', coalesce(record ->> '$.restarts', 0) + 1) WHERE ${RUNNING}`
    : `UPDATE tasks INDEXED BY tasks_live SET status = 'pending', record = json_set(record, '$.state',
    ${PENDING}, '$.restarts', coalesce(record ->> '$.restarts', 0) + 1) WHERE ${RUNNING}`;

/** Window `i`'s predicate; its bounds and written ids are parameters ?(3+3i), ?(4+3i), ?(5+3i). */
const inWindow = (i: number) => `(id > ?${3 + 3 * i} AND id <= ?${4 + 3 * i} AND id NOT IN (SELECT value FROM json_each(?${5 + 3 * i})))`;
const params = (windows: readonly Owed[]): SqlValue[] => windows.flatMap((w) => [w.after, w.through, JSON.stringify(w.written)]);

/**
 * Counts what `windows` owe among the rows stored running in (?1, ?2]: restarts + the number of windows a row is in;
 * `pending` with the same checkpoint when one of them did not keep it running.
 */
function sliceSql(windows: readonly Owed[]): string {
  const all = windows.map((_, i) => inWindow(i));
  const count = all.join(" + ");
  const restarts = `'$.restarts', coalesce(record ->> '$.restarts', 0) + (${count})`;
  const pending = windows.flatMap((w, i) => (w.keepRunning ? [] : [inWindow(i)])).join(" OR ");
  const set = pending
    ? `status = CASE WHEN ${pending} THEN 'pending' ELSE status END, record = CASE WHEN ${pending}
       THEN json_set(record, '$.state', ${PENDING}, ${restarts})
       ELSE json_set(record, ${restarts}) END`
    : `record = json_set(record, ${restarts})`;
  return `UPDATE tasks INDEXED BY tasks_live SET ${set} WHERE ${RUNNING} AND id > ?1 AND id <= ?2 AND (${all.join(" OR ")})`;
}
const countSql = (windows: readonly Owed[]) =>
  `SELECT count(*) AS n FROM tasks INDEXED BY tasks_live WHERE ${RUNNING} AND id > ?1 AND id <= ?2 AND (${windows
    .map((_, i) => inWindow(i))
    .join(" OR ")})`;
const COUNT_IN = `SELECT count(*) AS n FROM tasks INDEXED BY tasks_live WHERE ${RUNNING} AND id > ? AND id <= ?`;
/** The running rows in (?1, ?2] that the windows which do not keep their tasks running make pending (at most a slice). */
const movingSql = (windows: readonly Owed[]) =>
  `SELECT id FROM tasks INDEXED BY tasks_live WHERE ${RUNNING} AND id > ?1 AND id <= ?2 AND (${windows
    .flatMap((w, i) => (w.keepRunning ? [] : [inWindow(i)]))
    .join(" OR ")})`;
const SLICE_END = `SELECT id FROM tasks INDEXED BY tasks_live WHERE ${RUNNING} AND id > ? AND id <= ? ORDER BY id LIMIT 1 OFFSET ?`;

/** Whether two windows hold the same rows (their keep-running flags aside). */
const sameRows = (a: Owed, b: Owed) =>
  a.after === b.after &&
  a.through === b.through &&
  a.written.length === b.written.length &&
  a.written.every((id, i) => id === b.written[i]);
const low = (windows: readonly Owed[]) => Math.min(...windows.map((w) => w.after));
const high = (windows: readonly Owed[]) => Math.max(...windows.map((w) => w.through));

/** The written ids of a window stored running in (?1, ?2]: looked up by id (NOT INDEXED: not a scan of the live index). */
const COUNT_WRITTEN = `SELECT count(*) AS n FROM tasks NOT INDEXED WHERE id IN (SELECT value FROM json_each(?3)) AND id > ?1 AND id <= ?2 AND ${RUNNING}`;

/** The rows stored running in (?1, ?2], and of them in (?3, ?4] and in (?5, ?6]: two ranges counted in one walk of the index. */
const COUNT_TWO = `SELECT count(*) FILTER (WHERE id > ?3 AND id <= ?4) AS k, count(*) FILTER (WHERE id > ?5 AND id <= ?6) AS n
  FROM tasks INDEXED BY tasks_live WHERE ${RUNNING} AND id > ?1 AND id <= ?2`;

/**
 * The rows stored running that `kept` owe (each once, however many windows hold it), and the rows stored running in
 * (after, through] (the open's own window). A row counts once in the OR, so a window equal to an earlier one adds
 * nothing; when one is left (the common case: every open's window moves with the same slices), the count is its
 * range's less its written ids — one index count and a lookup a written id instead of the window's test on every row
 * of the range (decision 0116) — and that count and the open's are one walk of the index, not two (decision 0129).
 */
function keptAndOpen(tx: SqliteTransaction, kept: readonly Owed[], after: number, through: number): [number, number] {
  const distinct = kept.filter((w, i) => kept.findIndex((v) => sameRows(v, w)) === i);
  if (distinct.length !== 1) {
    const owed = distinct.length === 0 ? 0 : Number(tx.get(countSql(distinct), low(distinct), high(distinct), ...params(distinct))?.n);
    return [owed, Number(tx.get(COUNT_IN, after, through)?.n)];
  }
  const w = distinct[0]!;
  const written = w.written.length === 0 ? 0 : Number(tx.get(COUNT_WRITTEN, w.after, w.through, JSON.stringify(w.written))?.n);
  const both = tx.get(COUNT_TWO, Math.min(w.after, after), Math.max(w.through, through), w.after, w.through, after, through);
  return [Number(both?.k) - written, Number(both?.n)];
}

/** Counts what `windows` owe in (lo, hi]; returns the rows counted. */
function countRange(tx: SqliteTransaction, windows: readonly Owed[], lo: number, hi: number): number {
  return tx.run(sliceSql(windows), lo, hi, ...params(windows));
}

/** The windows once (lo, hi] is counted: each moved past `hi`, the ones that end there dropped. */
function movedPast(windows: readonly Owed[], hi: number): Owed[] {
  return windows
    .filter((w) => w.through > hi)
    .map((w) => (w.after >= hi ? w : { ...w, after: hi, written: w.written.filter((id) => id > hi) }));
}

/**
 * The windows of one storage: its own open's (`#windows`, with those it kept from a crashed open) and a crashed
 * open's found at load (`#found`, kept or stored by the first writing transaction). Changes made inside a transaction
 * are staged and kept only once it commits.
 */
export class OwedRecount {
  #windows: Owed[] | undefined;
  #found: { windows: Owed[]; count: number } | undefined;
  #staged: { windows?: Owed[] | null; found?: null } | undefined;
  /** The open's recovery commit keeps the found windows (decision 0098): no settlement in front of it. */
  #keeping = false;
  /** The rows a slice in progress makes pending, with the cache of stored statuses they update once it is stored. */
  #moved: { statuses: Map<number, string>; rows: SqlRow[] } | undefined;
  readonly #label: string;

  constructor(label: string) {
    this.#label = label;
  }

  /** Whether this open still owes restarts, or a crashed open's are not stored yet (a slice is due). */
  get owing(): boolean {
    return this.#windows !== undefined || this.#found !== undefined;
  }

  /** Whether row `id` still owes a restart (it is in a window). */
  owes(id: number): boolean {
    return this.#windows?.some((w) => id > w.after && id <= w.through && !w.written.includes(id)) === true;
  }

  /**
   * A writing transaction (`run` runs one): what a crashed open owed is stored first (unless the open's recovery
   * commit keeps it), and what it stages is kept only if it commits. With nothing owed the transaction runs as it is
   * (no await of its own: decision 0091). `undo`: puts back the caller's own state for a body that ran whole (given
   * its `turn`) when the COMMIT failed — in the same handler as `ended(false)`, which `run`'s raw promise must carry
   * (no handler of its own in between): both run a tick before the connection's next transaction starts, so a writer
   * queued in the same tick never builds on this one's rolled-back staging (review of 0131, M1: S4).
   */
  around<T, U>(
    body: (tx: SqliteTransaction, turn: U) => T,
    run: (settled: (tx: SqliteTransaction, turn: U) => T) => Promise<T>,
    undo?: (turn: U) => void,
  ): Promise<T> {
    if (!this.owing) return run(body);
    let ran = false;
    let opened: U | undefined;
    return run((tx, turn) => {
      if (!this.#keeping) this.settle(tx);
      const result = body(tx, turn);
      ran = true;
      opened = turn;
      return result;
    }).then(
      (result) => {
        this.ended(true);
        return result;
      },
      (error: unknown) => {
        if (ran && undo) undo(opened as U);
        this.ended(false);
        throw error;
      },
    );
  }

  /**
   * At load: the windows a crashed open left are applied to the records just parsed (restarts + 1 for each window a
   * row is in; pending unless every such window kept it running), so the mirror, a read-only open's `inspect()` and
   * S6 see every restart counted.
   */
  loaded(text: string | undefined, tasks: TaskRecord[]): void {
    this.#windows = undefined;
    this.#found = undefined;
    this.#keeping = false;
    if (text === undefined) return;
    const windows = parseOwed(text, this.#label);
    // Equal windows hold the same rows: each is tested once, their number the restarts a row in them owes (decision
    // 0119: the windows every open leaves are usually equal, and this walk is of every live record, in front).
    const distinct: Array<{ window: Owed; times: number; pending: boolean }> = [];
    for (const w of windows) {
      const same = distinct.find((d) => sameRows(d.window, w));
      if (same) {
        same.times++;
        same.pending ||= !w.keepRunning;
      } else distinct.push({ window: w, times: 1, pending: !w.keepRunning });
    }
    let count = 0;
    for (const task of tasks) {
      const state = task.state;
      if (state.status !== "running") continue;
      const id = task.id;
      let owed = 0;
      let pending = false;
      for (let at = 0; at < distinct.length; at++) {
        const { window: w, times } = distinct[at]!;
        if (id > w.after && id <= w.through && !w.written.includes(id)) {
          owed += times;
          pending ||= distinct[at]!.pending;
        }
      }
      if (owed === 0) continue;
      if (pending) task.state = pendingAt(state);
      task.restarts = (task.restarts ?? 0) + owed;
      count++;
    }
    this.#found = { windows, count };
  }

  /** First in every writing transaction: stores what a crashed open owed (once). */
  settle(tx: SqliteTransaction): void {
    const found = this.#found;
    if (!found || this.#staged?.found === null) return;
    const counted = countRange(tx, found.windows, low(found.windows), high(found.windows));
    if (counted !== found.count)
      throw new DatabaseCorrupt(`${this.#label}: the owed restarts counted ${counted} rows, not ${found.count}.`);
    tx.run(SQL.deleteMeta, OWED_KEY);
    this.#stage({ found: null });
  }

  /**
   * Before the open's recovery commit of `ids` (the running rows, ascending, more than a slice): whether it will keep
   * the windows a crashed open left (each kept its tasks running, so every row they owe is among `ids`) instead of
   * storing them first.
   */
  keeps(ids: readonly number[]): boolean {
    const found = this.#found?.windows;
    this.#keeping = found !== undefined && ids.length > RECOUNT_SLICE && found.length < MAX_WINDOWS && found.every((w) => w.keepRunning);
    return this.#keeping;
  }

  /**
   * The open's recovery commit of `ids` (the running rows, ascending, more than a slice): records them as owed, beside
   * the kept windows. An open that makes its tasks pending first counts a slice with what the kept windows owe there
   * (its first passes write the rows they reserve: those are then no longer owed, decision 0092); one that keeps them
   * running counts nothing in front of its first step (decision 0098). False when the rows stored running are not
   * exactly `ids`, or the kept windows owe other rows than the load found (the caller rolls back).
   */
  open(tx: SqliteTransaction, keepRunning: boolean, ids: readonly number[]): boolean {
    const kept = this.#keeping ? this.#found!.windows : [];
    const first = keepRunning ? 0 : RECOUNT_SLICE;
    const after = first === 0 ? 0 : ids[first - 1]!;
    const through = ids[ids.length - 1]!;
    // Both counted before the first slice is (it makes rows in (0, after] pending; the open's count is past `after`),
    // the open's to no end: a row stored running above `through` is not named either (review of 0129, M1).
    const [owedKept, inOpen] = keptAndOpen(tx, kept, after, Number.MAX_SAFE_INTEGER);
    if ((kept.length > 0 && owedKept !== this.#found!.count) || inOpen !== ids.length - first) return false;
    const windows = [...kept, { after: 0, through, keepRunning, written: [] }];
    if (first > 0 && countRange(tx, windows, 0, after) !== first) return false;
    this.#write(tx, first > 0 ? movedPast(windows, after) : windows);
    if (kept.length > 0) this.#stage({ found: null });
    return true;
  }

  /** In a commit that writes task rows: the owed ones among them no longer owe (their records carry the counts). */
  written(tx: SqliteTransaction, tasks: ReadonlyArray<{ id: number }>): void {
    const windows = this.#current();
    if (!windows) return;
    let changed: Owed[] | undefined;
    for (const { id } of tasks)
      for (const [i, w] of (changed ?? windows).entries()) {
        if (id <= w.after || id > w.through || w.written.includes(id)) continue;
        changed ??= windows.map((window) => ({ ...window, written: [...window.written] }));
        changed[i]!.written.push(id);
      }
    if (changed) this.#write(tx, changed);
  }

  /**
   * One slice of what this open owes; returns whether more is owed after it. When a window makes its rows pending,
   * `statuses` (the storage's cache of each live row's stored status) takes the slice's rows' once it is stored, or a
   * later write of such a row (its start) would leave the status column `pending` (found with decision 0112, whose
   * first step comes before the passes have started every owed row).
   */
  slice(tx: SqliteTransaction, statuses?: Map<number, string>): boolean {
    const windows = this.#current();
    if (!windows) return false;
    const lo = low(windows);
    const hi = high(windows);
    const end = Number(tx.get(SLICE_END, lo, hi, RECOUNT_SLICE - 1)?.id ?? hi);
    if (statuses && windows.some((w) => !w.keepRunning))
      this.#moved = { statuses, rows: tx.all(movingSql(windows), lo, end, ...params(windows)) };
    countRange(tx, windows, lo, end);
    const rest = movedPast(windows, end);
    if (rest.length === 0) {
      tx.run(SQL.deleteMeta, OWED_KEY);
      this.#stage({ windows: null });
      return false;
    }
    this.#write(tx, rest);
    return true;
  }

  /** After the transaction: keep what it staged, or (rolled back) drop it. */
  ended(committed: boolean): void {
    const staged = this.#staged;
    const moved = this.#moved;
    this.#staged = undefined;
    this.#moved = undefined;
    if (committed && moved)
      for (const row of moved.rows) if (moved.statuses.has(Number(row.id))) moved.statuses.set(Number(row.id), "pending");
    this.#keeping = false;
    if (!committed || !staged) return;
    if (staged.found === null) this.#found = undefined;
    if (staged.windows !== undefined) this.#windows = staged.windows ?? undefined;
  }

  /** A rebuilt file is another place's copy: nothing of this open is owed in it. */
  forget(): void {
    this.#windows = undefined;
    this.#found = undefined;
  }

  #current(): Owed[] | undefined {
    const staged = this.#staged?.windows;
    return staged === undefined ? this.#windows : (staged ?? undefined);
  }

  #write(tx: SqliteTransaction, windows: Owed[]): void {
    tx.run(SQL.writeMeta, OWED_KEY, JSON.stringify(windows));
    this.#stage({ windows });
  }

  #stage(change: { windows?: Owed[] | null; found?: null }): void {
    this.#staged = { ...this.#staged, ...change };
  }
}

function parseOwed(text: string, label: string): Owed[] {
  let windows: unknown;
  try {
    windows = JSON.parse(text);
  } catch {}
  const ids = (value: unknown) => Number.isSafeInteger(value);
  const sound = (owed: Partial<Owed> | null) =>
    typeof owed === "object" &&
    owed !== null &&
    ids(owed.after) &&
    ids(owed.through) &&
    typeof owed.keepRunning === "boolean" &&
    Array.isArray(owed.written) &&
    owed.written.every(ids);
  if (!Array.isArray(windows) || windows.length === 0 || !windows.every(sound))
    throw new DatabaseCorrupt(`${label}: metadata ${OWED_KEY} is damaged.`);
  return windows as Owed[];
}
