import { findFork, historyOf } from "../../follow/fork.ts";
import type { Storage } from "../../storage/storage.ts";

/** What each place stored at each log position: the epoch and the transaction's text. */
export type StoredLog = Map<number, { epoch: number; text: string }>;

/**
 * The visible fork's checks at the end of a world where the object took the lease over (decision 0032): the tab's
 * fork (found from its own storage against the object's history) holds exactly the transactions the tab stored
 * that the object's history does not — nothing the tab stored vanished unseen — and none of them recorded an
 * effect. Returns a problem, or whether there was a fork.
 */
export async function checkFork(
  tab: Storage,
  object: Storage,
  stored: { tab: StoredLog; object: StoredLog },
  effects: ReadonlyArray<{ what: string; position: number }>,
): Promise<{ problem?: string; forked: boolean }> {
  const fork = await findFork(tab, await historyOf(object));
  const inFork = new Set(fork?.transactions.map((transaction) => transaction.position));
  for (const [position, mine] of stored.tab) {
    const theirs = stored.object.get(position);
    const held = theirs?.epoch === mine.epoch && theirs.text === mine.text;
    if (held && inFork.has(position))
      return { problem: `the fork names position ${position}, which the object's history holds`, forked: true };
    if (!held && !inFork.has(position))
      return {
        problem: `the tab's transaction at position ${position} is neither in the object's history nor in its fork`,
        forked: !!fork,
      };
  }
  for (const effect of effects)
    if (inFork.has(effect.position))
      return { problem: `the fork holds the commit of ${effect.what} (position ${effect.position})`, forked: true };
  return { forked: fork !== undefined };
}
