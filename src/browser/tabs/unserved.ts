/**
 * The tabs' endpoint's answered subscriptions that the database's place could not serve now (a retryable answer: its
 * door's hook threw), by id (follower.ts): one wait each, asked there again after a backoff that doubles while it cannot
 * serve it (decision 0117 after review and its second review). Served after a wait, a subscription's attempt is kept for
 * `UNSERVED_MAX_RETRY_MS`: one the place answers and then ends again soon after goes on backing off, instead of being
 * asked at the first backoff each time; served that long, its next end starts over (decision 0117, later).
 */

import { type Clock, systemClock } from "../../base/clock.ts";

/** The first wait before a place that could not serve a subscription now is asked again, and the longest. */
const UNSERVED_RETRY_MS = 500;
const UNSERVED_MAX_RETRY_MS = 10_000;

/** A backoff: the first wait, doubling to the longest. */
export interface Backoff {
  firstMs: number;
  maxMs: number;
}

export const UNSERVED_BACKOFF: Backoff = { firstMs: UNSERVED_RETRY_MS, maxMs: UNSERVED_MAX_RETRY_MS };

export interface UnservedWait {
  attempt: number;
  retryInMs: number;
  cancel?: () => void;
}

export class UnservedWaits {
  readonly #waits = new Map<number, UnservedWait>();
  /** When each was last served after a wait, and at which attempt. */
  readonly #served = new Map<number, { attempt: number; at: number }>();
  readonly #clock: Clock;
  readonly #backoff: Backoff;

  /** `clock`'s timers ask again (the page's `setTimeout` by default; a test's manual clock). */
  constructor(clock: Clock = systemClock, backoff: Backoff = UNSERVED_BACKOFF) {
    this.#clock = clock;
    this.#backoff = backoff;
  }

  get size(): number {
    return this.#waits.size;
  }

  /** The longest wait (the page's status shows it), if any. */
  longest(): UnservedWait | undefined {
    let most: UnservedWait | undefined;
    for (const wait of this.#waits.values()) if (!most || wait.attempt > most.attempt) most = wait;
    return most;
  }

  /**
   * Ends `id`'s wait, if any (its timer cleared): `served` keeps its attempt a while; otherwise (refused, unsubscribed,
   * given up) it is forgotten. True when it waited.
   */
  end(id: number, served = false): boolean {
    const wait = this.#waits.get(id);
    if (!served) this.#served.delete(id);
    else if (wait) this.#served.set(id, { attempt: wait.attempt, at: this.#clock.now() });
    if (!wait) return false;
    wait.cancel?.();
    this.#waits.delete(id);
    return true;
  }

  /** `id`'s next wait — a running one is replaced, not doubled — whose timer calls `fire`. */
  next(id: number, fire: () => void): UnservedWait {
    const before = this.#waits.get(id);
    before?.cancel?.();
    const { firstMs, maxMs } = this.#backoff;
    const kept = this.#served.get(id);
    const prior = before?.attempt ?? (kept && this.#clock.now() - kept.at < maxMs ? kept.attempt : 0);
    const attempt = prior + 1;
    const wait: UnservedWait = { attempt, retryInMs: Math.min(maxMs, firstMs * 2 ** Math.min(attempt - 1, 30)) };
    this.#waits.set(id, wait);
    wait.cancel = this.#clock.setTimer(wait.retryInMs, fire);
    return wait;
  }

  /** No wait is left (the endpoint closed). */
  clear(): void {
    for (const wait of this.#waits.values()) wait.cancel?.();
    this.#waits.clear();
    this.#served.clear();
  }
}
