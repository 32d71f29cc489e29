/**
 * A SQLite copy's snapshot (decisions 0047, 0084): read whole or a row at a time as the rows' stored text, each in one
 * of its storage's writing turns (what waits of the task rows written first, decision 0081: the rows are then the log
 * head's), and rebuilt at once or staged part by part (the swap drops what waits: every row is the snapshot's).
 */
import { ReadOnlySession } from "../../errors.ts";
import type { Snapshot, SnapshotHead, SnapshotList } from "../records.ts";
import type { RebuildStage } from "../storage.ts";
import type { SqliteDatabase, SqliteTransaction } from "./database.ts";
import type { Turn } from "./deferred.ts";
import { startRebuildStage } from "./rebuild-stage.ts";
import { readSnapshotIn, rebuildStatements } from "./snapshot.ts";
import { readSnapshotRowsIn } from "./snapshot-rows.ts";

/** A transaction as one of the storage's writing turns (`SqliteStorage.#writing`). */
export type Writing = <T>(body: (tx: SqliteTransaction, turn: Turn | undefined) => T) => Promise<T>;

export class SnapshotStore {
  readonly #db: SqliteDatabase;
  readonly #label: string;
  readonly #writing: Writing;
  readonly #logExists: () => boolean;
  /** Runs after a rebuild committed: the storage's caches then describe the rows stored. */
  readonly #rebuilt: () => void;

  constructor(db: SqliteDatabase, label: string, writing: Writing, logExists: () => boolean, rebuilt: () => void) {
    this.#db = db;
    this.#label = label;
    this.#writing = writing;
    this.#logExists = logExists;
    this.#rebuilt = rebuilt;
  }

  /** `Storage.readSnapshot`. */
  async read(): Promise<Snapshot | undefined> {
    if (!this.#logExists()) return undefined;
    return this.#writing((tx, turn) => {
      turn?.flush({}); // in the snapshot's transaction: its rows are then the log's head's
      return readSnapshotIn(tx, this.#label);
    });
  }

  /** `Storage.readSnapshotRows`. */
  async readRows(head: (head: SnapshotHead) => void, row: (list: SnapshotList, record: string) => void): Promise<boolean> {
    if (!this.#logExists()) return false;
    return this.#writing((tx, turn) => {
      turn?.flush({}); // as `read`
      return readSnapshotRowsIn(tx, this.#label, head, row);
    });
  }

  /** `Storage.rebuild`. */
  async rebuild(snapshot: Snapshot): Promise<void> {
    if (this.#db.readOnly) throw new ReadOnlySession("Rebuilding from a snapshot");
    const statements = rebuildStatements(snapshot, this.#db.maxRowBytes);
    await this.#writing((tx, turn) => {
      for (const [sql, ...params] of statements) tx.run(sql, ...params); // the mark too: every row is the snapshot's
      turn?.drop();
    });
    this.#rebuilt();
  }

  /** `Storage.stageRebuild`. */
  stage(): Promise<RebuildStage> {
    const swap = (body: (tx: SqliteTransaction) => void) =>
      this.#writing((tx, turn) => {
        body(tx);
        turn?.drop();
      });
    return startRebuildStage(this.#db, swap, this.#rebuilt);
  }
}
