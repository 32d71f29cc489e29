/**
 * The tab's half of a staged rebuild (decision 0084): each part's whole records parsed (`SnapshotReader`), each row
 * checked as it comes — its shape, its id below the header's `nextId`, no document deletion, no key twice — and written
 * beside the copy (`RebuildStage.add`) before the next part is asked for, so the tab holds about one part's rows, not
 * the copy's. The head is checked at the end as `SnapshotReader.finish` checks a whole snapshot; together the checks
 * accept exactly the snapshots `finish` accepts. A refusal found in a row is reported after the digest, as the
 * reader's own (decision 0053); nothing staged reaches the copy until `commit`.
 */
import { FollowMessageRefused } from "../errors.ts";
import type { LogMark, SnapshotHead, SnapshotList, SnapshotRows } from "../storage/records.ts";
import type { RebuildStage } from "../storage/storage.ts";
import { MAX_BATCH_RECORDS, rowProblem } from "./batch-shape.ts";
import { SnapshotReader } from "./snapshot-text.ts";

const LISTS: SnapshotList[] = ["tasks", "conversations", "entries", "submissions", "documents"];
/** A row of each list as a refusal names it. */
const ROW_NAMES: Record<SnapshotList, string> = {
  tasks: "task",
  conversations: "conversation",
  entries: "entry",
  submissions: "submission",
  documents: "document",
};

/** A take's parts staged into the tab's storage as they arrive. */
export class StagedSnapshot {
  readonly #stage: RebuildStage;
  readonly #reader = new SnapshotReader();
  readonly #counts = new Map<SnapshotList, number>();
  /** Each kind of key seen (a table's key, a submission's request in its conversation): a copy stores each once. */
  readonly #keys = new Map<string, Set<string | number>>();
  /** The most rows this take handed to the stage at once (what the tab held: about one part's). */
  mostRows = 0;

  constructor(stage: RebuildStage) {
    this.#stage = stage;
  }

  /** The next part: its whole records parsed and checked, and their rows staged. */
  async add(text: string): Promise<void> {
    this.#reader.add(text);
    const rows = this.#reader.drain();
    let count = 0;
    for (const list of LISTS) count += rows[list].length;
    if (count === 0) return;
    const problem = this.#problem(rows);
    if (problem) return this.#reader.refuse(new FollowMessageRefused("shape", problem));
    this.mostRows = Math.max(this.mostRows, count);
    await this.#stage.add(rows as SnapshotRows);
  }

  /** The snapshot's head at `at`, once its digest and the whole were checked: what `commit` writes with the rows. */
  finish(at: LogMark, digest: string): SnapshotHead {
    return this.#reader.finishHead(at, digest);
  }

  /** Replaces the copy with the staged rows and `head`, in one transaction. */
  commit(head: SnapshotHead): Promise<void> {
    return this.#stage.commit(head);
  }

  /** Drops what was staged (a refused, lost or displaced take). */
  discard(): Promise<void> {
    return this.#stage.discard();
  }

  #problem(rows: Record<SnapshotList, unknown[]>): string | undefined {
    const nextId = (this.#reader.header?.batch as { nextId?: unknown } | undefined)?.nextId;
    for (const list of LISTS) {
      const before = this.#counts.get(list) ?? 0;
      if (before + rows[list].length > MAX_BATCH_RECORDS)
        return `the snapshot's batch.${list} holds more than ${MAX_BATCH_RECORDS} records`;
      this.#counts.set(list, before + rows[list].length);
      for (const [offset, row] of rows[list].entries()) {
        const wrong = rowProblem(list, row, "the snapshot's batch", before + offset);
        if (wrong) return wrong;
        const fields = row as { id?: number; conversationId?: number; requestId?: string; scope?: string; key?: string; value?: unknown };
        if (list === "documents") {
          if (fields.value === null) return "the snapshot's documents hold a deletion";
          const twice = this.#twice("document", JSON.stringify([fields.scope, fields.key]));
          if (twice) return twice;
          continue;
        }
        // A nextId that is not a positive integer is refused with the head.
        if (Number.isSafeInteger(nextId) && fields.id! >= (nextId as number))
          return `the snapshot's row id ${fields.id} is not below its nextId ${String(nextId)}`;
        const twice =
          this.#twice(ROW_NAMES[list], fields.id!) ??
          (list === "submissions" && fields.requestId !== undefined
            ? this.#twice("submission request", `${fields.conversationId}/${fields.requestId}`)
            : undefined);
        if (twice) return twice;
      }
    }
    return undefined;
  }

  /** Why `key` of `kind` cannot be stored (it was seen before; as `parseSnapshot` words it), or undefined (seen now). */
  #twice(kind: string, key: string | number): string | undefined {
    let keys = this.#keys.get(kind);
    if (!keys) this.#keys.set(kind, (keys = new Set()));
    if (keys.has(key)) return `the snapshot holds the ${kind} ${JSON.stringify(key)} twice: a copy stores each row once`;
    keys.add(key);
    return undefined;
  }
}
