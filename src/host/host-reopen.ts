/**
 * The host's reopen (moved out of host.ts, decision 0127): the harness opened again on its storage — after the lease
 * came back here (`runHere`), a leave, a fenced stop, or a rebuild that replaced the copy — and the copy a page's read
 * answers from meanwhile. A read-only copy being replaced stays open and answers reads until the storage changes under
 * it (a rebuild's snapshot is fetched over the link first) or the harness that replaces it is open (a take-back's
 * writable open asks the object for the lease): reads never wait on the link for it (decision 0127).
 */
import { BACKGROUND_CONTEXT as ctx } from "../base/context.ts";
import { safely } from "../base/safely.ts";
import { HarnessClosed } from "../errors.ts";
import type { Harness } from "../harness.ts";

export interface ReopenParts {
  /** The harness now (undefined while one opens). */
  harness(): Harness | undefined;
  /** The host drops its harness (one opens next). */
  drop(): void;
  /** Bumped by every close and takeover: a reopen started before one opens nothing (review of 0125, M1). */
  generation(): number;
  /** Whether the host was closed for good (not a takeover, after which it opens again once the database is free). */
  closedForGood(): boolean;
  /** Opens the harness on the same storage (`open(storage, watchingPages, readOnly)`). */
  open(readOnly?: true): Promise<Harness>;
  /**
   * A read-only copy kept open lets its storage go (one opened under a lease that another place held claims it as a
   * writer would): it no longer follows (the take-back or the rebuild stopped its follower) and writes nothing.
   */
  unclaim(copy: Harness): void;
  /** Whether the host is under its object's lease (an open that could not ask for it opens read-only instead). */
  readonly leased: boolean;
  /** Nothing opened again: the status says so, and the error the views end with. */
  notOpened(error: unknown): Error;
  /** The page's views: each moves to the harness opened next. */
  readonly rebinds: Set<(next: Harness | Error) => void>;
}

/** Between closing the copy and opening it again (a rebuild): `closeCopy` before the storage changes under the copy. */
export type Between = (closeCopy: () => Promise<void>) => Promise<void>;

export function hostReopen(parts: ReopenParts) {
  /** The read-only copy being replaced, open still: reads answer from it (decision 0127). */
  let kept: Harness | undefined;
  /** Closes `kept` (the harness that replaces it is open). */
  let retire: (() => void) | undefined;
  /** The reopen under way (its open included): a close waits for it before it closes the storage. */
  let reopening: Promise<unknown> | undefined;
  /**
   * A close or a takeover ended the switch before its views moved (review of 0134, L1). A close for good: each ends,
   * `lost` with `HarnessClosed`, and holds nothing (before, a watch on the copy that close then closed stayed silent,
   * counted). A takeover: they stay, silent on the copy it closes, and move to the harness the host opens once the
   * database is free again (decision 0140; 0134's review ended them here, and the page had to watch again).
   */
  const closedMeanwhile = () => {
    if (parts.closedForGood()) for (const rebind of [...parts.rebinds]) safely(() => rebind(new HarnessClosed()));
    return undefined;
  };

  const reopenOnce = async (between?: Between, readOnly?: true): Promise<unknown> => {
    const old = parts.harness()!;
    parts.drop();
    let closed: Promise<void> | undefined;
    const closeOld = () => {
      if (kept === old) kept = undefined;
      closed ??= old.close(ctx);
      return closed;
    };
    // A close (or a takeover, which clears `closing`) came meanwhile: nothing opens (its storage is closed, or another
    // tab holds the database), and the host ends as that close says (review of 0125, M1).
    const started = parts.generation();
    // A read-only copy answers reads until what replaces it is ready to (0127); a stopped writer is closed first.
    if (old.readOnly && !old.closed) {
      kept = old;
      retire = () => void closeOld().catch(() => {});
    } else await closeOld();
    try {
      if (parts.generation() !== started) return closedMeanwhile();
      let betweenFailed: { error: unknown } | undefined;
      if (between) {
        await between(closeOld).catch((error: unknown) => void (betweenFailed = { error }));
        // Rebuilt: the copy's rows changed under it. Failed before it asked to close the copy (the snapshot not
        // fetched: a silent link's call timed out): the copy, unchanged, answers until it is open again.
        if (!betweenFailed) await closeOld();
        if (parts.generation() !== started) return closedMeanwhile();
      }
      let failed: unknown;
      if (kept === old) parts.unclaim(old);
      const opened = parts.open(readOnly).catch((error: unknown) => {
        if (!parts.leased || parts.harness()) throw error; // opened, and failed after: not a second harness
        failed = error;
        return parts.open(true);
      });
      // Nothing opened again: the status says so and every view ends with the open's error (decision 0117, later;
      // before, they stayed bound to the closed harness, silent). One opened that failed after: they move to it.
      const next = await opened.catch((error: unknown) => parts.harness() ?? parts.notOpened(error));
      // The kept copy answers no more once the views move (an open that failed never retired it): a watch made after
      // this, on it, would stay on a closed copy that no rebind moves (decision 0133).
      retire?.();
      // One view that cannot move (its owner told: decision 0117) never keeps the others where they were.
      for (const rebind of [...parts.rebinds]) safely(() => rebind(next));
      await opened;
      if (betweenFailed) throw betweenFailed.error; // opened again on the storage as it was, then rejects
      return failed;
    } finally {
      retire = undefined;
      void closeOld().catch(() => {});
    }
  };

  return {
    /**
     * Opens the harness again on its storage (after the lease came back here, or `between` rebuilt it): views follow.
     * A failed `between` still opens it again (on the storage as it was) and then rejects. An open that could not ask
     * for the lease (the object's link down past a call's timeout) opens read-only instead — nothing is written
     * without the lease, and the page may ask again — and resolves with that error.
     */
    reopen(between?: Between, readOnly?: true): Promise<unknown> {
      const run: Promise<unknown> = (reopening = reopenOnce(between, readOnly));
      const done = () => void (reopening === run && (reopening = undefined));
      run.then(done, done);
      return run;
    },
    /** A take-back that a close or takeover ended before its reopen: the views end as one ended by it does. */
    closedMeanwhile,
    /** The reopen under way, if one is. */
    reopening: () => reopening,
    /** The read-only copy being replaced, while it still answers reads. */
    kept: (): Harness | undefined => (kept && !kept.closed ? kept : undefined),
    /** The harness that replaces the kept copy is open (its status not ready yet): the copy closes, reads wait for it. */
    opened(): void {
      retire?.();
    },
  };
}
