import type { Batch, EpochStart, LogMark } from "../records.ts";
import { parseStored } from "../rows.ts";
import type { SqliteDatabase, SqliteTransaction, SqlRow } from "./database.ts";
import { logHead, writeLog } from "./log-write.ts";
import { SQL } from "./schema.ts";

/**
 * A `SqliteStorage`'s fenced log (decisions 0029, 0048, 0056): the head it last read or stored, the check and the
 * row a fenced commit adds inside its transaction, and the tail's reads and trims.
 *
 * The check a same-epoch continuation makes is "the log's last row is where this storage left it" (decision 0048).
 * On a connection that is its file's only writer and counts what its statements wrote (`SqliteTransaction.writes`),
 * that check is a number compared in memory (decision 0056): the count taken at the end of this storage's last
 * fenced commit (or its own trim) still being the count when the next one starts means no statement wrote anything
 * since — no other storage on the connection, no trim, no rebuild — so the last row is still there. Anything else
 * (the count moved, or the connection does not count) reads the last row as before.
 */
export class FencedLog {
  readonly #db: SqliteDatabase;
  readonly #label: string;
  /** Whether the log's table exists (not on a read-only open of a version 2 database). */
  readonly #log: boolean;
  /** Whether the tail's slices' table exists (not on a read-only open of a database before version 4). */
  readonly #parts: boolean;
  /** The head as this storage last read or stored it. */
  #head: LogMark | undefined;
  /** The connection's write count when `#head` was last known to be the log's head (undefined: not known). */
  #writes: number | undefined;

  constructor(db: SqliteDatabase, label: string, tables: { log: boolean; parts: boolean }) {
    this.#db = db;
    this.#label = label;
    this.#log = tables.log;
    this.#parts = tables.parts;
  }

  /** Whether the database has a log at all. */
  get exists(): boolean {
    return this.#log;
  }

  /** The head as read by `load()` (undefined before the first fenced commit). */
  async load(): Promise<LogMark | undefined> {
    const head = this.#log ? logHead(await this.#db.get(SQL.logHead)) : undefined;
    this.#head = head;
    this.#writes = undefined;
    return head;
  }

  /**
   * Inside the commit's transaction, first: checks `fence` against the head and appends its `slices` (decision
   * 0029), refusing with `StaleEpoch` / `LogOutOfOrder` (nothing written) as `writeLog` does.
   */
  write(tx: SqliteTransaction, fence: LogMark, slices: string | readonly string[]): void {
    const unchanged = this.#writes !== undefined && tx.writes?.() === this.#writes;
    writeLog(tx, fence, this.#head, slices, this.#label, unchanged);
  }

  /**
   * Inside the same transaction, after its last statement: the connection's write count, what `stored` takes once it
   * committed (a number, or undefined where the connection does not count; no object a step: decision 0131).
   */
  written(tx: SqliteTransaction): number | undefined {
    return tx.writes?.();
  }

  /** The transaction `write` wrote `fence` in committed, leaving the count at `writes`: its fence is the head. */
  stored(fence: LogMark, writes: number | undefined): void {
    this.#head = fence;
    this.#writes = writes;
  }

  /** The rows changed under the log (a rebuild): the next commit reads the head. */
  forget(): void {
    this.#writes = undefined;
  }

  async read(after: number, limit: number, maxBytes?: number): Promise<Array<Batch & { fence: LogMark }>> {
    if (!this.#log) return [];
    // One statement: a trim cannot fall between a transaction's first slice and its others.
    const rows = !this.#parts
      ? await this.#db.all(SQL.readLogRows, after, limit)
      : maxBytes === undefined
        ? await this.#db.all(SQL.readLog, after, limit)
        : await this.#db.all(SQL.readLogWithin, after, limit, maxBytes);
    return batchesOf(rows);
  }

  async epochs(): Promise<EpochStart[]> {
    if (!this.#log) return [];
    return (await this.#db.all(SQL.readEpochs)).map((row) => ({ epoch: Number(row.epoch), start: Number(row.start) }));
  }

  /**
   * Drops the tail through `through`, keeping the head as the floor (decision 0048). A trim that finds the count
   * where this storage's last commit left it keeps the head known (its floor is that head): a link's
   * acknowledgement trims after most rounds, and the next step then need not read the head. `transaction`: how
   * the storage runs its writing transactions (decision 0081: its waiting task rows are written first).
   */
  async trim(through: number, transaction: Transaction = (body) => this.#db.transaction(body)): Promise<void> {
    const expected = this.#writes;
    const writes = await transaction((tx, first) => {
      const unchanged = expected !== undefined && tx.writes?.() === expected;
      first?.();
      // The head's floor next (decision 0048): a trim through the last row must not lose the head.
      tx.run(SQL.keepLogFloor);
      tx.run(SQL.trimLog, through);
      tx.run(SQL.trimLogParts, through);
      return unchanged ? tx.writes?.() : undefined;
    });
    // Only if no commit of this storage came between (it would have moved the count it left).
    if (this.#writes === expected) this.#writes = writes;
  }
}

/**
 * A storage's way to run a writing transaction; `first`, when given, is what the storage writes before the body's own
 * statements (the body calls it after its first read of the write count).
 */
export type Transaction = <T>(body: (tx: SqliteTransaction, first?: () => void) => T) => Promise<T>;

/** The tail's rows (position, part, text; in order) as its transactions. */
export function batchesOf(rows: readonly SqlRow[]): Array<Batch & { fence: LogMark }> {
  const batches: Array<Batch & { fence: LogMark }> = [];
  for (let index = 0; index < rows.length; ) {
    const position = Number(rows[index]!.position);
    let text = "";
    for (; index < rows.length && Number(rows[index]!.position) === position; index++) text += String(rows[index]!.text);
    batches.push(parseStored("sqlite", "pi_durable_log", position, text));
  }
  return batches;
}
