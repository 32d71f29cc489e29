import type { Batch } from "../storage/records.ts";
import type { Pending } from "./commit-types.ts";

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
