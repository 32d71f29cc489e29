/**
 * A fenced effect-free step whose only write is its log row (decision 0081, decision 0076's Step 2). On OPFS a
 * commit costs its WAL frames, and a fenced step touched two pages (its task's row and the log's last leaf): 2.13
 * frames against a lease-less step's 1.00. Here the task rows of such a step wait in memory and reach the table at
 * the next flush point; the log already holds them, so a crash loses nothing acknowledged (S4): the next writable
 * open replays the log rows past the mark.
 *
 * The mark (`tasks_behind_log` in the metadata) is the log position the task table is complete through. It is
 * written in the transaction of a deferring commit that finds none. Invariant: while it exists, every task-row write
 * of the file since is in the log rows past it — so every write of the task table outside the log (a commit without
 * a lease, the recount, a rebuild) deletes it, after writing what waits, in its own transaction, and a trim writes
 * what waits before it deletes the log rows that hold it. Writes that keep the invariant keep the mark (decision
 * 0086: a fenced commit that writes what waited, a read, a trim; moved up only when a replay from it grew long), so
 * a run of deferring commits writes the metadata page once, not twice; a copy and a close delete it (read-only
 * opens refuse a file with the mark).
 */
import { DatabaseCorrupt } from "../../errors.ts";
import type { Batch, LogMark, TaskRecord } from "../records.ts";
import type { SqliteDatabase, SqliteTransaction } from "./database.ts";
import { batchesOf } from "./fenced-log.ts";
import { META_TABLE, SQL, TASKS_BEHIND_LOG } from "./schema.ts";
import type { MetaTable } from "./schema-open.ts";
import { overlayTaskRows } from "./task-overlay.ts";

/**
 * How many deferring commits in a row at most: the next one writes what waits (decision 0086: 256, was 32 — the
 * task's page and the mark's once per run; a crash's replay reads at most about this many log rows past the mark).
 */
export const FLUSH_EVERY = 256;

/** The record bytes deferring commits may leave waiting at most before the next one writes them (decision 0086). */
export const FLUSH_BYTES = 1 << 20;

/** `SqliteStorageOptions.deferTaskRows`: on (true, or how often the waiting rows are written at the latest). */
export type DeferTaskRows = boolean | { flushEvery: number };

/**
 * Whether `batch` may leave its task rows waiting: fenced, tasks only, each a live task whose stored status this
 * storage knows and keeps (so the row exists and only its `record` changes), and no counter to write.
 */
export function mayDefer(batch: Batch, liveStatus: ReadonlyMap<number, string>): boolean {
  if (!batch.fence || batch.tasks.length === 0 || batch.rootConversationId !== undefined) return false;
  if (batch.conversations.length + batch.entries.length + batch.submissions.length + batch.documents.length > 0) return false;
  let largest = 0;
  for (const task of batch.tasks) {
    const status = task.state.status;
    if (status === "terminal" || liveStatus.get(task.id) !== status) return false;
    if (task.id > largest) largest = task.id;
  }
  // The storage writes `next_id` only when the batch minted an id no row of it carries (storage.ts).
  return batch.nextId === undefined || batch.nextId <= largest + 1;
}

/** The rows a storage keeps waiting, and the mark's state in its file. One per storage; only the open turns it on. */
export class DeferredTaskRows {
  /** Each waiting task's record text (a later step of the same task replaces it). */
  #pending = new Map<number, string>();
  /** Deferring commits since what waited was last written. */
  #commits = 0;
  /** The record bytes those commits left waiting. */
  #bytes = 0;
  /** The mark's value while it is in the file (undefined: no mark); known only while `#writes` is. */
  #mark: number | undefined;
  /** The connection's write count at the end of this storage's last writing transaction (undefined: not known). */
  #writes: number | undefined;
  readonly #every: number;
  readonly #label: string;

  constructor(option: DeferTaskRows, label: string) {
    const every = option === true ? FLUSH_EVERY : option === false ? 1 : option.flushEvery;
    if (!Number.isSafeInteger(every) || every < 1)
      throw new TypeError(`deferTaskRows.flushEvery must be a positive integer, not ${every}.`);
    this.#every = every;
    this.#label = label;
  }

  /** How many task rows wait. */
  get waiting(): number {
    return this.#pending.size;
  }

  /** Whether the file may carry the mark (rows wait, or a fenced commit kept it: decision 0086). */
  get marked(): boolean {
    return this.#pending.size > 0 || this.#mark !== undefined;
  }

  /** Whether task `id`'s row waits (a read of only that row need not write the others first). */
  waits(id: number): boolean {
    return this.#pending.has(id);
  }

  /**
   * Runs `body` in one transaction of `db` as a turn of this storage: what the turn changed here is put back if the
   * body throws (at once, before any other transaction) or the commit fails. A `plain` body (one that defers nothing)
   * while nothing waits and no mark is kept runs with no turn (`#plain`).
   */
  transaction<T>(db: SqliteDatabase, body: (tx: SqliteTransaction, turn: Turn | undefined) => T, plain = false): Promise<T> {
    if (!plain || this.#pending.size > 0 || this.#mark !== undefined || this.#writes === undefined) return this.#turn(db, body);
    return db.transaction((tx) => this.#plain(tx, body));
  }

  /**
   * A `plain` commit (it defers nothing) while nothing waits and this storage keeps no mark (decision 0091: a lone
   * step with no lease, every step): when nothing else wrote since this storage's last turn, the file has no mark and
   * a turn would do nothing, so the body runs with none — no turn, no state to put back: a rollback leaves the file
   * as it was (no mark), and the count taken here only ever makes the next turn replay. When something else wrote,
   * a whole turn (its flush replays from a mark the file may hold), and the next commit takes a whole turn too.
   */
  #plain<T>(tx: SqliteTransaction, body: (tx: SqliteTransaction, turn: Turn | undefined) => T): T {
    if (tx.writes!() === this.#writes) {
      const result = body(tx, undefined);
      this.#writes = tx.writes!();
      return result;
    }
    const turn = this.#begin(tx);
    try {
      return body(tx, turn);
    } catch (error) {
      this.#restore(turn);
      throw error;
    } finally {
      this.#writes = undefined; // not known until a whole turn commits (it puts back what this one changed if not)
    }
  }

  /**
   * `transaction` of a deferring step (decision 0131): a body that throws is put back at once as in `#turn`, but a
   * failed COMMIT is its caller's to put back (`failed`, with the turn its body was given), from the handler the
   * caller chains on the commit anyway — no promise and no handler more than a step with no lease makes.
   */
  owned<T>(db: SqliteDatabase, body: (tx: SqliteTransaction, turn: Turn) => T): Promise<T> {
    return db.transaction((tx) => {
      const turn = this.#begin(tx);
      try {
        const result = body(tx, turn);
        this.#writes = tx.writes?.();
        return result;
      } catch (error) {
        this.#restore(turn);
        throw error;
      }
    });
  }

  /**
   * The COMMIT of an `owned` transaction whose body ran whole with `turn` failed: what the turn changed is put back —
   * once (while restarts are owed their handler puts it back first, then the storage's own finds it done).
   */
  failed(turn: Turn): void {
    this.#restore(turn);
  }

  /** Not an async function: a fenced step's hot path (decision 0120: what a step allocates counts there). */
  #turn<T>(db: SqliteDatabase, body: (tx: SqliteTransaction, turn: Turn) => T): Promise<T> {
    let turn: Turn | undefined;
    return db
      .transaction((tx) => {
        turn = this.#begin(tx);
        try {
          const result = body(tx, turn);
          this.#writes = tx.writes?.();
          return result;
        } catch (error) {
          this.#restore(turn);
          turn = undefined;
          throw error;
        }
      })
      .catch((error: unknown) => {
        if (turn) this.#restore(turn); // the commit itself failed
        throw error;
      });
  }

  #begin(tx: SqliteTransaction): Turn {
    const writes = tx.writes?.();
    // Nothing wrote since this storage's last turn: the mark is in the file exactly as this storage left it.
    const known = writes !== undefined && writes === this.#writes;
    return new Turn(this, tx, known, this.#pending, this.#commits, this.#bytes, this.#mark, this.#writes);
  }

  #restore(before: Turn): void {
    if (before.restored) return; // a second put-back would undo what later turns did
    before.restored = true;
    this.#pending = before.pending;
    const replaced = before.replaced;
    if (replaced !== undefined)
      for (let index = replaced.length - 2; index >= 0; index -= 2)
        this.#put(replaced[index] as number, replaced[index + 1] as string | undefined);
    if (before.firstId !== undefined) this.#put(before.firstId, before.firstRecord);
    this.#commits = before.commits;
    this.#bytes = before.bytes;
    this.#mark = before.mark;
    this.#writes = before.writes;
  }

  /** Puts `id`'s waiting text back to `record` (undefined: none waited). */
  #put(id: number, record: string | undefined): void {
    if (record === undefined) this.#pending.delete(id);
    else this.#pending.set(id, record);
  }

  /** `Turn.defer`. */
  defer(tx: SqliteTransaction, before: Turn, fence: LogMark, rows: ReadonlyArray<{ task: TaskRecord; record: string }>): boolean {
    if (!before.known) return false; // the next turn knows again
    if (this.#pending.size > 0 && (this.#commits + 1 >= this.#every || this.#bytes >= FLUSH_BYTES)) return false;
    if (this.#mark === undefined) {
      // Nothing waits (the table is complete) through the row before this one (the log has no row between).
      this.#mark = fence.position - 1;
      tx.run(SQL.writeMeta, TASKS_BEHIND_LOG, String(this.#mark));
    } else if (this.#far(fence.position - 1)) return false; // the caller's flush moves the mark up
    for (let index = 0; index < rows.length; index++) {
      const { task, record } = rows[index]!;
      // What it replaced: a lone task's step (the first row of the turn) in the turn's own fields, no list (0131).
      if (before.firstId === undefined) {
        before.firstId = task.id;
        before.firstRecord = this.#pending.get(task.id);
      } else (before.replaced ??= []).push(task.id, this.#pending.get(task.id));
      this.#pending.set(task.id, record);
      this.#bytes += record.length;
    }
    this.#commits++;
    return true;
  }

  /** Whether a replay from the mark would read more than twice a run's log rows to reach `through`. */
  #far(through: number): boolean {
    return this.#mark !== undefined && through - this.#mark > 2 * this.#every;
  }

  /**
   * `Turn.flush`. `keep`: the turn writes the task table only as its log rows say (a fenced commit, whose own task
   * rows are in its log row; a read; a trim, which writes what waits before it deletes rows): the mark stays
   * (decision 0086: the next deferring commit need not write it again), moved up to `keep.through` — the position
   * the table is complete through once this turn commits — only when a replay from it would be long. Without
   * `keep` the turn writes the task table outside the log (or makes a copy, or closes): the mark goes.
   */
  flush(tx: SqliteTransaction, before: Turn, keep?: { through?: number }): void {
    if (!before.known || this.#pending.size > 0) {
      let applied = before.known;
      if (applied) {
        for (const [id, record] of this.#pending) {
          if (tx.run(SQL.updateTaskRecord, record, id) !== 1) {
            applied = false; // not the row this storage left: the log says what it is
            break;
          }
        }
      }
      this.drop();
      if (!applied) {
        replayLog(tx, this.#label); // another storage wrote on the connection, or the count is not known
        this.#mark = undefined;
        return;
      }
    }
    if (this.#mark === undefined) return;
    if (!keep) {
      this.#mark = undefined;
      tx.run(SQL.deleteMeta, TASKS_BEHIND_LOG);
    } else if (keep.through !== undefined && this.#far(keep.through)) {
      this.#mark = keep.through;
      tx.run(SQL.writeMeta, TASKS_BEHIND_LOG, String(this.#mark));
    }
  }

  /** Forgets what waits (applied, or a rebuild replaced every row and deleted the mark). */
  drop(): void {
    this.#pending = new Map();
    this.#commits = 0;
    this.#bytes = 0;
  }

  /** A rebuild replaced every row and deleted the mark in its transaction. */
  rebuilt(): void {
    this.drop();
    this.#mark = undefined;
  }
}

/**
 * One writing transaction of a storage that defers, with what it found — what to put back if it does not commit (one
 * object a turn: decision 0120).
 */
export class Turn {
  readonly #rows: DeferredTaskRows;
  readonly #tx: SqliteTransaction;
  /**
   * The first id a deferring commit of this turn set, and the text it replaced (undefined: none was waiting): a lone
   * task's step needs no list (decision 0131). Put back after `replaced`.
   */
  firstId: number | undefined = undefined;
  firstRecord: string | undefined = undefined;
  /** Each further id a deferring commit set, then the text it replaced (undefined: none was waiting), in pairs. */
  replaced: Array<number | string | undefined> | undefined;
  /** Put back already (`failed` twice does nothing the second time). */
  restored = false;

  constructor(
    rows: DeferredTaskRows,
    tx: SqliteTransaction,
    readonly known: boolean,
    readonly pending: Map<number, string>,
    readonly commits: number,
    readonly bytes: number,
    readonly mark: number | undefined,
    readonly writes: number | undefined,
  ) {
    this.#rows = rows;
    this.#tx = tx;
  }

  /**
   * After the log row's write: leaves `rows` waiting (writing the mark if there is none), or says no (false) — the
   * mark's state is not known this turn, or enough commits deferred in a row: then the caller flushes and writes.
   */
  defer(fence: LogMark, rows: ReadonlyArray<{ task: TaskRecord; record: string }>): boolean {
    return this.#rows.defer(this.#tx, this, fence, rows);
  }

  /**
   * Writes what waits (from the log, when this storage cannot vouch for its own list). With `keep` (the turn writes
   * no task row outside the log) the mark stays, moved up to `keep.through` if a replay from it grew long; without,
   * it is deleted.
   */
  flush(keep?: { through?: number }): void {
    this.#rows.flush(this.#tx, this, keep);
  }

  /** A rebuild replaced every row and deleted the mark in this transaction: nothing waits. */
  drop(): void {
    this.#rows.rebuilt();
  }
}

/**
 * Brings the task table up to date from the log past the mark, in order (the last logged state of each task wins,
 * which by the mark's invariant is its latest), and deletes the mark. Nothing when there is no mark.
 */
export function replayLog(tx: SqliteTransaction, label: string): void {
  const row = tx.get(SQL.readMetaKey, TASKS_BEHIND_LOG);
  if (row === undefined) return;
  const through = markOf(row.value, label);
  for (const batch of batchesOf(tx.all(SQL.readLog, through, -1))) {
    for (const task of batch.tasks) {
      const status = task.state.status;
      const record = JSON.stringify(task);
      if (tx.run(SQL.updateTask, status, record, task.id) === 0)
        tx.run(SQL.insertTask, task.id, task.conversationId, task.kind, status, record);
    }
  }
  tx.run(SQL.deleteMeta, TASKS_BEHIND_LOG);
}

/**
 * At an open (before anything reads the task table): a file whose task rows are behind its log is brought up to date
 * when writable; when read-only the log is replayed into an overlay in memory, the file untouched (task-overlay.ts,
 * decision 0088). Resolves true when the task table is read through that overlay.
 */
export async function recoverTaskRows(db: SqliteDatabase, label: string, meta: MetaTable): Promise<boolean> {
  if (meta !== META_TABLE) return false; // version 1's marker: older than the mark
  const row = await db.get(SQL.readMetaKey, TASKS_BEHIND_LOG);
  if (row === undefined) return false;
  const through = markOf(row.value, label);
  if (db.readOnly) return overlayTaskRows(db, label, through);
  await db.transaction((tx) => replayLog(tx, label));
  return false;
}

function markOf(value: unknown, label: string): number {
  const through = Number(value);
  if (!Number.isSafeInteger(through) || through < 0) throw new DatabaseCorrupt(`${label}: metadata ${TASKS_BEHIND_LOG} is damaged.`);
  return through;
}
