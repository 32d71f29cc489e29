/**
 * The harness clock and its timer. The core never reads the wall clock or schedules a timer except through
 * this interface, so tests move time instead of sleeping (see `createManualClock` in testing/).
 */
export interface Clock {
  /** Milliseconds on the harness clock. */
  now(): number;
  /** Calls `fire` once `delayMs` have passed on this clock; returns a function that cancels it. */
  setTimer(delayMs: number, fire: () => void): () => void;
}

/** The real clock: `Date.now` and `setTimeout` (the one place the core touches them). */
export const systemClock: Clock = {
  now: () => Date.now(),
  setTimer(delayMs, fire) {
    // Timers longer than 2^31-1 ms overflow to immediate in every JS engine; the scheduler re-arms instead.
    const handle = setTimeout(fire, Math.min(Math.max(0, delayMs), 2_147_483_647));
    return () => clearTimeout(handle);
  },
};
