/**
 * The harness clock of a Durable Object (decision 0052). A pending timer holds the object in memory (workerd adds
 * every timer of an actor to its event's `waitUntil` tasks, decision 0046), so an object whose tasks only sleep
 * must keep none: while work runs its timers are real ones, and once nothing is ready to run or running they are
 * parked — kept in memory with no timer behind them — and the object's one alarm (alarm.ts) is set at the earliest
 * parked one that must come on time. The alarm, or any event of the object, fires what is due; an object evicted
 * meanwhile loses its parked timers with the rest of its memory, and its next instance sets them again from what
 * it stored (the sleepers' `until`, a new lease).
 *
 * A lease's renewal (`kind: "lease-renewal"`) is parked without an alarm: an idle holder is not woken to renew, so
 * its lease lapses as a crashed holder's does (the object then ends the instance and its next one takes a new
 * epoch, following.ts).
 */
import { type Clock, systemClock, type TimerKind } from "../base/clock.ts";

interface Timer {
  readonly at: number;
  readonly fire: () => void;
  readonly kind: TimerKind | undefined;
  /** Cancels the real timer behind it, while the clock runs live. */
  cancel: (() => void) | undefined;
}

export class ObjectClock implements Clock {
  readonly #base: Clock;
  readonly #timers = new Set<Timer>();
  #parked = false;
  /** Told when a timer was parked that the alarm may have to come for. */
  onParked: () => void = () => {};

  constructor(base: Clock = systemClock) {
    this.#base = base;
  }

  now(): number {
    return this.#base.now();
  }

  setTimer(delayMs: number, fire: () => void, kind?: TimerKind): () => void {
    const timer: Timer = { at: this.now() + Math.max(0, delayMs), fire, kind, cancel: undefined };
    this.#timers.add(timer);
    if (this.#parked) {
      if (kind !== "lease-renewal") this.onParked();
    } else this.#run(timer);
    return () => {
      timer.cancel?.();
      this.#timers.delete(timer);
    };
  }

  /** Whether the timers are parked (the object has nothing ready to run or running). */
  get parked(): boolean {
    return this.#parked;
  }

  /** Nothing runs: every timer is kept without a real one behind it (the object may be evicted now). */
  park(): void {
    if (this.#parked) return;
    this.#parked = true;
    for (const timer of this.#timers) {
      timer.cancel?.();
      timer.cancel = undefined;
    }
  }

  /** Work runs again: every timer gets a real one for the time it has left (one already due fires at once). */
  run(): void {
    if (!this.#parked) return;
    this.#parked = false;
    for (const timer of this.#timers) this.#run(timer);
  }

  /** When the alarm must come for a parked timer: the earliest that is not a lease's renewal. */
  get alarmAt(): number | undefined {
    if (!this.#parked) return undefined;
    let earliest: number | undefined;
    for (const timer of this.#timers) {
      if (timer.kind === "lease-renewal") continue;
      if (earliest === undefined || timer.at < earliest) earliest = timer.at;
    }
    return earliest;
  }

  /** Whether a timer that is no lease's renewal comes due by `at` (parked or not). */
  dueWithin(at: number): boolean {
    for (const timer of this.#timers) if (timer.kind !== "lease-renewal" && timer.at <= at) return true;
    return false;
  }

  /** Fires every parked timer that is due, earliest first (at the alarm, or at any event of the object). */
  fireDue(): void {
    if (!this.#parked) return;
    const now = this.now();
    const due = [...this.#timers].filter((timer) => timer.at <= now).sort((a, b) => a.at - b.at);
    for (const timer of due) {
      if (!this.#timers.delete(timer)) continue; // cancelled by one fired before it
      timer.fire();
    }
  }

  #run(timer: Timer): void {
    timer.cancel = this.#base.setTimer(timer.at - this.now(), () => {
      timer.cancel = undefined;
      if (this.#timers.delete(timer)) timer.fire();
    });
  }
}
