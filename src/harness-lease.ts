import type { Clock } from "./base/clock.ts";
import { LeaseNotHeld, StaleEpoch } from "./errors.ts";
import type { LeaseOptions } from "./harness-types.ts";

/** How long a resumed place waits before it tells its arbiter again, after it could not reach it. */
const RESUME_RETRY_MS = 1_000;

/**
 * Tells the arbiter that this place writes on under its pinned epoch (decision 0039): a renewal, asked until it is
 * answered. Refused — the lease was released or taken meanwhile (the app moved it) — the place stops as a crash stops.
 */
export function confirmResumed(
  lease: LeaseOptions,
  epoch: number,
  clock: Clock,
  stopped: () => boolean,
  lose: (error: Error) => void,
): void {
  const ask = () => {
    if (stopped()) return;
    lease.arbiter.renew(lease.place, epoch).then(
      () => {},
      (error: unknown) => {
        if (error instanceof LeaseNotHeld || error instanceof StaleEpoch) return lose(error);
        clock.setTimer(RESUME_RETRY_MS, ask); // unreachable: offline, or the call timed out
      },
    );
  };
  ask();
}
