import type { Batch } from "../storage/records.ts";
import type { Pending } from "./commit-types.ts";

/**
 * Commits a group carries at most (decision 0026): one storage transaction, and every one of them waits for
 * it, so a group stays small enough that its transaction is a short wait.
 */
export const GROUP_LIMIT = 128;

/** The batch a commit that stored nothing is published with (it has reports only). */
export const emptyBatch: Batch = { tasks: [], conversations: [], entries: [], submissions: [], documents: [] };

/** Rejects a commit, telling its `settled` first. */
export function refuse(pending: Pending, error: unknown): void {
  drop(pending);
  pending.settled?.refused(error);
  pending.reject(error);
}

/** Resolves a stored and published commit with its callback's result, telling its `settled` first. */
export function resolveStored(pending: Pending): void {
  const result = pending.result;
  drop(pending);
  pending.settled?.stored();
  pending.resolve(result);
}

/**
 * Forgets what `Session` built for a settling commit (decision 0087: kept on the commit itself), so a record its
 * caller reuses keeps none of it alive until its next commit.
 */
function drop(pending: Pending): void {
  pending.tx = undefined;
  pending.result = undefined;
  pending.batch = undefined;
  pending.error = undefined;
}

/**
 * The commits one turn of the line carries as a group (decision 0026), and the promise of its end (decision 0087):
 * a grouped commit through a reused record (`CommitRecord.settle`) follows it with one `then`, instead of a promise
 * of its own with two resolving functions. It ends once every member is settled (`Session`'s turn, in a `finally`).
 */
export class TurnGroup {
  /** Made with its first member (decision 0126: a one-element list, not an empty one grown by its first push). */
  readonly members: Pending[];
  readonly ended: Promise<void>;
  readonly end: () => void;
  /** The group queued on the line after this one, while this one's turn has not started (`Session`'s queue). */
  next: TurnGroup | undefined = undefined;
  /** What follows a stored turn of task steps before the group ends (the session's checkpoint hold ends). */
  readonly #afterStored: () => void;

  constructor(afterStored: () => void, first: Pending) {
    this.members = [first];
    this.#afterStored = afterStored;
    this.ended = new Promise<void>(keepResolve);
    this.end = kept!;
    kept = undefined;
  }

  /**
   * A lone commit's turn stored (`Session`'s turn without an async frame, decision 0124); the group ends whatever
   * happens. Methods, not a closure each per group (decision 0126: `CommitLine.storeLone` calls them).
   */
  stored(): void {
    try {
      this.#afterStored();
    } finally {
      this.end();
    }
  }

  /** A lone commit's turn failed: the group ends and the turn rejects as it did. */
  failed(error: unknown): never {
    this.end();
    throw error;
  }
}

/** The one executor every group's promise is made with (decision 0126: no closure a group); it runs synchronously. */
let kept: (() => void) | undefined;
function keepResolve(resolve: () => void): void {
  kept = resolve;
}
