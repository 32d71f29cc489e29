import type { Clock } from "../base/clock.ts";
import type { TaskRecord } from "../storage/records.ts";

/** The wait before retry number `failures + 1` after storage refused a commit: 100 ms doubling up to 30 s. */
export function retryDelay(failures: number): number {
  return Math.min(30_000, 100 * 2 ** failures);
}

/**
 * The scheduler's retry after a storage failure: one timer on the harness clock, its delay doubling with
 * each consecutive failure (`retryDelay`) until a commit is stored again (`succeeded`).
 */
export class Backoff {
  readonly #clock: Clock;
  readonly #retry: () => void;
  #failures = 0;
  #retrying = false;
  #cancel: (() => void) | undefined;

  constructor(clock: Clock, retry: () => void) {
    this.#clock = clock;
    this.#retry = retry;
  }

  /** True while waiting out a backoff (no pass starts before it ends). */
  get retrying(): boolean {
    return this.#retrying;
  }

  /** Counts a failure and calls `retry` after the backoff. */
  failed(): void {
    const delay = retryDelay(this.#failures++);
    this.#retrying = true;
    this.#cancel?.();
    this.#cancel = this.#clock.setTimer(delay, () => {
      this.#cancel = undefined;
      this.#retrying = false;
      this.#retry();
    });
  }

  succeeded(): void {
    this.#failures = 0;
  }

  cancel(): void {
    this.#cancel?.();
  }
}

export interface SleepTimerOptions {
  readonly clock: Clock;
  readonly sleepers: ReadonlySet<number>;
  readonly live: ReadonlyMap<number, TaskRecord>;
  /** Whether task `id` has an invocation (its sleep is its own business). */
  readonly running: (id: number) => boolean;
  /** The sleepers a pass found due, with the `until` it found due (written by the pass, pruned here). */
  readonly seenDue: Map<number, number>;
  /** Called when the timer fires, with the sleepers now due. */
  readonly wake: (due: number[]) => void;
}

/** One timer on the harness clock for the earliest sleeper that is not due yet. No polling. */
export class SleepTimer {
  readonly #options: SleepTimerOptions;
  #cancel: (() => void) | undefined;
  #at: number | undefined;

  constructor(options: SleepTimerOptions) {
    this.#options = options;
  }

  /** Sets the timer for the earliest sleeper (or clears it when there is none). */
  arm(): void {
    const { clock, sleepers, live, running, seenDue, wake } = this.#options;
    for (const [id, until] of seenDue) {
      const task = live.get(id);
      if (task?.state.status !== "sleeping" || task.state.until !== until) seenDue.delete(id);
    }
    let earliest: number | undefined;
    for (const id of sleepers) {
      const task = live.get(id);
      if (task?.state.status !== "sleeping" || running(id)) continue;
      // Sleepers a pass found due (and abort-marked ones, which a pass looks at at once) are held by something
      // that wakes them with a commit (owned work, an owner's intent). A timer for them would fire at 0 ms for
      // ever (B8). Without `until` a sleep ends only by a commit that wakes it: no timer.
      // A sleeper past its `until` that no pass found due keeps its timer (it fires at once): its time may have
      // passed after the pass read the clock, or while its timer's callback waited on a busy event loop.
      if (task.abortRequested || task.state.until === undefined || seenDue.get(id) === task.state.until) continue;
      if (earliest === undefined || task.state.until < earliest) earliest = task.state.until;
    }
    if (earliest === this.#at) return;
    this.#cancel?.();
    this.#cancel = undefined;
    this.#at = earliest;
    if (earliest === undefined) return;
    const delay = Math.max(0, earliest - clock.now());
    this.#cancel = clock.setTimer(delay, () => {
      this.#cancel = undefined;
      this.#at = undefined;
      const due: number[] = [];
      const now = clock.now();
      for (const id of sleepers) {
        const task = live.get(id);
        if (task?.state.status === "sleeping" && task.state.until !== undefined && task.state.until <= now) due.push(id);
      }
      wake(due);
    });
  }

  cancel(): void {
    this.#cancel?.();
  }
}
