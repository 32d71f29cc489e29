/**
 * The harness clock and its timer. The core never reads the wall clock or schedules a timer except through
 * this interface, so tests move time instead of sleeping (see `createManualClock` in testing/).
 */
export interface Clock {
  /** Milliseconds on the harness clock. */
  now(): number;
  /**
   * Calls `fire` once `delayMs` have passed on this clock; returns a function that cancels it. `kind` says what the
   * timer is for, where a platform may treat it apart (`TimerKind`); a clock may ignore it.
   */
  setTimer(delayMs: number, fire: () => void, kind?: TimerKind): () => void;
}

/**
 * What a timer is for. `"lease-renewal"`: a lease holder's renewal, which a place with no work to run may let pass
 * (its lease then lapses as a crashed holder's does, and the place takes a new epoch when it has work again; a
 * Durable Object parks it so that it can be evicted while its tasks sleep, decision 0052).
 */
export type TimerKind = "lease-renewal";

/** The real clock: `Date.now` and `setTimeout` (the one place the core touches them). */
export const systemClock: Clock = {
  now: () => Date.now(),
  setTimer(delayMs, fire) {
    // Timers longer than 2^31-1 ms overflow to immediate in every JS engine; the scheduler re-arms instead.
    const handle = setTimeout(fire, Math.min(Math.max(0, delayMs), 2_147_483_647));
    return () => clearTimeout(handle);
  },
};
