import type { Clock } from "../base/clock.ts";
import type { TaskRecord } from "../storage/records.ts";
import { SleepQueue } from "./sleep-queue.ts";

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
  readonly live: ReadonlyMap<number, TaskRecord>;
  /** Whether task `id` has an invocation (its sleep is its own business). */
  readonly running: (id: number) => boolean;
  /** The sleepers a pass found due, with the `until` it found due (written by the pass, pruned here). */
  readonly seenDue: Map<number, number>;
  /** Called when the timer fires, with the sleepers now due. */
  readonly wake: (due: number[]) => void;
  /** Settles once the open's first group of task steps is stored (`Session.stepStored`): the queue is built then. */
  readonly stepStored: Promise<void>;
}

/**
 * One timer on the harness clock for the earliest sleeper that is not due yet. No polling. The sleepers are kept
 * earliest first (`SleepQueue`, decision 0115), told of every committed record through `index`, so arming costs the
 * sleepers it passes over, not every sleeper.
 *
 * The queue is not built at open: that would walk every sleeper in front of the first resumed step. Until it is,
 * `index` keeps only the least `until` it was shown, and `arm` sets the timer for it — never later than the queue's
 * earliest would be (that one passes over held sleepers), and a timer that finds nobody due only re-arms. The queue is
 * built from the mirror by the first `arm` after the open's first group of task steps is stored (`stepStored`), or
 * when that timer fires first. No timer of its own: a Durable Object keeps none while nothing runs (decision 0052).
 */
export class SleepTimer {
  readonly #options: SleepTimerOptions;
  /** Undefined until built (`#build`): until then the mirror holds every sleeper and `#least` their least `until`. */
  #queue: SleepQueue | undefined;
  #least: number | undefined;
  /** Whether the first `arm` listens for `stepStored`, and whether it settled (the next `arm` builds the queue). */
  #waiting = false;
  #stepped = false;
  #cancel: (() => void) | undefined;
  #at: number | undefined;

  constructor(options: SleepTimerOptions) {
    this.#options = options;
  }

  /** Takes a committed record in (at open and after every commit): a sleep with `until` is queued. */
  index(task: TaskRecord): void {
    const state = task.state;
    if (state.status !== "sleeping" || state.until === undefined) return;
    if (this.#queue) this.#queue.push(state.until, task.id);
    else if (this.#least === undefined || state.until < this.#least) this.#least = state.until;
  }

  /** Sets the timer for the earliest sleeper (or clears it when there is none). */
  arm(): void {
    const { clock, live, running, seenDue } = this.#options;
    if (!this.#queue && this.#stepped) this.#build();
    let earliest: number | undefined;
    if (!this.#queue) {
      if (!this.#waiting) {
        this.#waiting = true;
        void this.#options.stepStored.then(() => (this.#stepped = true));
      }
      earliest = this.#least;
    } else {
      for (const [id, until] of seenDue) {
        const task = live.get(id);
        if (task?.state.status !== "sleeping" || task.state.until !== until) seenDue.delete(id);
      }
      // Sleepers a pass found due (and abort-marked ones, which a pass looks at at once) are held by something that
      // wakes them with a commit (owned work, an owner's intent). A timer for them would fire at 0 ms for ever (B8).
      // Without `until` a sleep ends only by a commit that wakes it: never queued, no timer.
      // A sleeper past its `until` that no pass found due keeps its timer (it fires at once): its time may have
      // passed after the pass read the clock, or while its timer's callback waited on a busy event loop.
      earliest = this.#queue.earliest((id, until) => {
        const task = live.get(id);
        return task!.abortRequested || running(id) || seenDue.get(id) === until; // current: in the mirror
      });
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
      if (!this.#queue) this.#build();
      this.#options.wake(this.#queue!.due(clock.now()));
    });
  }

  cancel(): void {
    this.#cancel?.();
  }

  /** The queue of every sleeper with `until` in the mirror now; later commits reach it through `index`. */
  #build(): void {
    const live = this.#options.live;
    const queue = new SleepQueue((id, until) => {
      const state = live.get(id)?.state;
      return state?.status === "sleeping" && state.until === until;
    });
    for (const task of live.values()) {
      const state = task.state;
      if (state.status === "sleeping" && state.until !== undefined) queue.push(state.until, task.id);
    }
    queue.loaded();
    this.#queue = queue;
    this.#least = undefined;
  }
}
