/**
 * When the worker asks again for a rebuild that failed (decisions 0070 and 0078): after a failure that passes by itself
 * (`isRetryable`: the object's take limit answered `busy`, a part held past the call's timeout) on a timer, 1 s
 * doubling up to 30 s, at most `REBUILD_TRIES` failures in a row (or the app's `rebuildTries`); then it stops and says so (`stopped`), as it does at
 * once for a failure that does not pass by itself (a snapshot larger than the object serves). A success, a reconnect
 * or the page's `retryRebuild()` (`again`) starts the count afresh. A refused take reads and counts nothing at the
 * object, so each try costs one small call.
 */
import type { Clock } from "../base/clock.ts";
import { InvalidSetting, SnapshotUnavailable } from "../errors.ts";
import { isRetryable } from "../retryable.ts";

export const REBUILD_RETRY_FIRST_MS = 1_000;
export const REBUILD_RETRY_MAX_MS = 30_000;
/**
 * Failures in a row after which the worker stops asking by itself (decision 0078): 1 + 2 + 4 + 8 + 16 + 30 + 30 s of
 * waits, about two minutes. Before, the timer had no bound: a copy the object never served asked every 30 s for as
 * long as the page stayed open, and the page was never told.
 */
export const REBUILD_TRIES = 8;
/** The most `FollowObjectOptions.rebuildTries` may say (a thousand tries at 30 s apart: more than eight hours). */
export const REBUILD_TRIES_LIMIT = 1_000;

/** Checks `FollowObjectOptions.rebuildTries`: an integer from 1 to REBUILD_TRIES_LIMIT, else `InvalidSetting`. */
export function rebuildTriesOf(value: unknown): number {
  if (value === undefined) return REBUILD_TRIES;
  if (typeof value !== "number" || !Number.isInteger(value) || value < 1 || value > REBUILD_TRIES_LIMIT)
    throw new InvalidSetting(
      `follow.rebuildTries must be a whole number from 1 to ${REBUILD_TRIES_LIMIT} (failures in a row before the worker stops rebuilding by itself); got ${describe(value)}.`,
    );
  return value;
}

const describe = (value: unknown) =>
  typeof value === "number" ? String(value) : typeof value === "string" ? `a string (${JSON.stringify(value.slice(0, 40))})` : typeof value;

export interface RebuildRetryOptions {
  /** Asks for the rebuild again (the copy, if it still cannot follow, tells the host). */
  ask(): void;
  /** Whether the link is up (a timer that finds it down leaves the next try to the reconnect). */
  up(): boolean;
  /** The worker stopped trying by itself after `tries` failures in a row, the last `error`. */
  stopped(tries: number, error: unknown): void;
  /** Failures in a row before it stops (checked by `rebuildTriesOf`). Default REBUILD_TRIES. */
  tries?: number;
}

export class RebuildRetry {
  readonly #clock: Clock;
  readonly #options: RebuildRetryOptions;
  #delay = REBUILD_RETRY_FIRST_MS;
  #failures = 0;
  #cancel: (() => void) | undefined;
  /** The last rebuild failed: the copy's "cannot follow" is not passed on until a retry, a reconnect or `again`. */
  waiting = false;

  constructor(clock: Clock, options: RebuildRetryOptions) {
    this.#clock = clock;
    this.#options = options;
  }

  /** A rebuild succeeded. */
  succeeded(): void {
    this.#failures = 0;
    this.#delay = REBUILD_RETRY_FIRST_MS;
  }

  /** A rebuild failed with `error`: tried again later, or stopped (told). */
  failed(error: unknown): void {
    this.waiting = true;
    this.#failures++;
    // A snapshot larger than the object serves is refused again: that one waits for a reconnect, as before.
    const passes = isRetryable(error) && !(error instanceof SnapshotUnavailable && error.reason === "size");
    if (!passes || this.#failures >= (this.#options.tries ?? REBUILD_TRIES)) {
      this.#cancel?.();
      this.#cancel = undefined;
      this.#options.stopped(this.#failures, error);
      return;
    }
    this.#cancel?.();
    const delay = this.#delay;
    this.#delay = Math.min(2 * this.#delay, REBUILD_RETRY_MAX_MS);
    this.#cancel = this.#clock.setTimer(delay, () => {
      this.#cancel = undefined;
      if (!this.#options.up()) return; // a reconnect asks again
      this.waiting = false;
      this.#options.ask();
    });
  }

  /** Starts afresh (a reconnect, the page's `retryRebuild()`): the next "cannot follow" is passed on. */
  again(): void {
    this.#cancel?.();
    this.#cancel = undefined;
    this.waiting = false;
    this.#failures = 0;
    this.#delay = REBUILD_RETRY_FIRST_MS;
  }

  /** The worker's link closed for good. */
  close(): void {
    this.#cancel?.();
    this.#cancel = undefined;
  }
}
