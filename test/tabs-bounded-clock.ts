/**
 * A manual clock for the tabs' status watches (src/browser/tabs/own-status.ts) that tells an ask's bound
 * (`STATUS_ASK_MS`, the review of decision 0132, L3) from the backoff's waits: `waiting` is true when the last ask was
 * answered and one wait alone is pending — what a test waits for before it moves the clock to the next ask.
 */
import { STATUS_ASK_MS } from "../src/browser/tabs/own-status.ts";
import { createManualClock, type ManualClock } from "../src/testing/clock.ts";

export interface BoundedClock extends ManualClock {
  /** One backoff wait pending, and no ask under way (no bound pending). */
  readonly waiting: boolean;
  /** An ask under way: its bound is pending. */
  readonly asking: boolean;
}

export function boundedClock(start = 0): BoundedClock {
  const clock = createManualClock(start);
  const live = new Set<{ bound: boolean }>();
  const count = (bound: boolean) => [...live].filter((timer) => timer.bound === bound).length;
  return {
    now: () => clock.now(),
    setTimer(delayMs, fire) {
      // No backoff of the tabs waits exactly the bound (500 ms…10 s, 5 s…60 s).
      const timer = { bound: delayMs === STATUS_ASK_MS };
      live.add(timer);
      const cancel = clock.setTimer(delayMs, () => {
        live.delete(timer);
        fire();
      });
      return () => {
        live.delete(timer);
        cancel();
      };
    },
    advance: (ms) => clock.advance(ms),
    next: () => clock.next(),
    get pending() {
      return clock.pending;
    },
    get waiting() {
      return count(false) === 1 && count(true) === 0;
    },
    get asking() {
      return count(true) === 1;
    },
  };
}
