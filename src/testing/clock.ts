import type { Clock } from "../base/clock.ts";

/** A clock for tests: time moves only when the test says so, and due timers fire in time order. */
export interface ManualClock extends Clock {
  /** Moves time forward by `ms`, firing every timer that falls due on the way. */
  advance(ms: number): void;
  /** Moves time to the next pending timer and fires it; false when there is none. */
  next(): boolean;
  /** How many timers are pending. */
  readonly pending: number;
}

export function createManualClock(start = 0): ManualClock {
  let now = start;
  let sequence = 0;
  const timers: Array<{ at: number; order: number; fire: () => void }> = [];
  const fireDue = (until: number) => {
    for (;;) {
      timers.sort((a, b) => a.at - b.at || a.order - b.order);
      const first = timers[0];
      if (!first || first.at > until) break;
      timers.shift();
      now = Math.max(now, first.at);
      first.fire();
    }
    now = Math.max(now, until);
  };
  return {
    now: () => now,
    setTimer(delayMs, fire) {
      const timer = { at: now + Math.max(0, delayMs), order: sequence++, fire };
      timers.push(timer);
      return () => {
        const index = timers.indexOf(timer);
        if (index >= 0) timers.splice(index, 1);
      };
    },
    advance(ms) {
      fireDue(now + ms);
    },
    next() {
      timers.sort((a, b) => a.at - b.at || a.order - b.order);
      const first = timers[0];
      if (!first) return false;
      fireDue(first.at);
      return true;
    },
    get pending() {
      return timers.length;
    },
  };
}
