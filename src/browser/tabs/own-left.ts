/**
 * The calls this tab's worker answered `HarnessClosed` while its status still said `ready`, each waiting for that status
 * to leave `ready` (./follower.ts, `ownLost`): the status says where the database went (a takeover: sent again where it
 * went). Each waits `OWN_STATUS_GRACE_MS` from that answer at most, then ends `ConnectionLost`; all end so at the
 * endpoint's close, their timers cleared (decision 0151, its review's M2 and L3).
 */
import type { Clock } from "../../base/clock.ts";
import { ConnectionLost } from "../../errors.ts";

/**
 * How long after its worker's `HarnessClosed` a call waits for that worker's status to leave `ready`. The status comes
 * from the same worker over the same port as the answer, and a harness that closes tells its status as it closes (a
 * takeover: `closed`, then `waiting-for-lock`): one message behind the answer, milliseconds. 5 s covers a worker or a
 * page busy for seconds (a long task, a collection); a timer in a hidden tab fires late, never early. Counted from the
 * answer, not from the call (review of 0151, M2: a call answered near its 60 s bound had no time left for the status,
 * and a real takeover ended `HarnessClosed`, not retryable).
 */
export const OWN_STATUS_GRACE_MS = 5_000;

interface Waiter {
  left: () => void;
  end: (error: Error) => void;
}

export class OwnLeaves {
  private readonly waiting = new Set<Waiter>();
  private closed = false;
  constructor(private readonly clock: Clock) {}

  /**
   * Resolves when the worker's status leaves `ready` (`left()`). Rejects `ConnectionLost` after `OWN_STATUS_GRACE_MS`
   * (the worker's harness closed under the call or before it, and it still says `ready`: broken, hostile, or its status
   * late — the call may have run, as a loss at a bound may, decision 0146), or at `close()`.
   */
  wait(): Promise<void> {
    if (this.closed) return Promise.reject(new ConnectionLost());
    return new Promise<void>((resolve, reject) => {
      const waiter: Waiter = {
        left: () => {
          cancel();
          resolve();
        },
        end: (error) => {
          cancel();
          reject(error);
        },
      };
      const cancel = this.clock.setTimer(OWN_STATUS_GRACE_MS, () => {
        if (this.waiting.delete(waiter)) reject(new ConnectionLost());
      });
      this.waiting.add(waiter);
    });
  }

  /** The worker's status left `ready`: every wait ends now. */
  left(): void {
    for (const waiter of this.waiting) waiter.left();
    this.waiting.clear();
  }

  /** The endpoint closed: every wait ends `ConnectionLost` now, as its other waits do, and any later one at once. */
  close(): void {
    this.closed = true;
    for (const waiter of this.waiting) waiter.end(new ConnectionLost());
    this.waiting.clear();
  }
}
