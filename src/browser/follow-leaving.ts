/**
 * The follow link's leave and close, apart from `followObject` (src/browser/follow.ts): a leave's wait for the
 * object's answer, and what a close lets reach the object before it ends the link (review of decision 0133).
 */

import type { Clock } from "../base/clock.ts";
import { HandOverUnanswered, HarnessClosed } from "../errors.ts";
import type { FollowLink } from "../follow/link-client.ts";
import type { LogMark } from "../storage/records.ts";

/** A link call's bound (`FollowLink`'s `callTimeoutMs` default): the longest a close waits for the object. */
export const CLOSE_WAIT_MS = 15_000;

export interface LeaveWatch {
  readonly clock: Clock;
  readonly link: FollowLink;
  /** Listeners for the link's drops, and for its close. */
  readonly drops: Set<() => void>;
  readonly closed: () => boolean;
  /** The lease's expiry as the tab reckons it (infinite: a pinned lease). */
  readonly expiresAt: () => number;
}

/**
 * `leaving`, or `HandOverUnanswered` once the link is down past the lease's expiry (at the expiry, or at a drop after
 * it): the object takes the lease then, whether or not the release reached it. A pinned lease never expires: a
 * leave of one waits for the link (the lease is the tab's until the object answers). Either rejects `HarnessClosed`
 * when the link closes first (for a pinned lease too: review of 0133, L1, it stayed pending for good).
 */
export function unanswered(watch: LeaveWatch, leaving: Promise<void>, mark: LogMark, stop: () => void): Promise<void> {
  const { clock, link, drops } = watch;
  return new Promise<void>((resolve, reject) => {
    let settled = false;
    let expired = false;
    const done = (outcome: () => void) => {
      if (settled) return;
      settled = true;
      cancel();
      drops.delete(check);
      outcome();
    };
    const check = () => {
      const closed = watch.closed();
      if (!closed && !(expired && !link.up)) return;
      stop(); // closed (its worker's host closed, decision 0133), or unanswered past the expiry
      done(() => reject(closed ? new HarnessClosed("The follow link") : new HandOverUnanswered(mark.position)));
    };
    const expiresAt = watch.expiresAt();
    const cancel = Number.isFinite(expiresAt)
      ? clock.setTimer(Math.max(0, expiresAt - clock.now()), () => {
          expired = true;
          check();
        })
      : () => {};
    drops.add(check);
    leaving.then(
      () => done(resolve),
      (error: unknown) => done(() => reject(error)),
    );
  });
}

/** Resolves once every one of `waits` settled, or after `ms` (its timer cleared either way). */
export function settledWithin(clock: Clock, ms: number, waits: ReadonlyArray<Promise<unknown>>): Promise<void> {
  if (waits.length === 0 || ms <= 0) return Promise.resolve();
  return new Promise<void>((resolve) => {
    const cancel = clock.setTimer(ms, resolve);
    void Promise.allSettled(waits).then(() => {
      cancel();
      resolve();
    });
  });
}
