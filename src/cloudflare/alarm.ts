/**
 * The one alarm of a harness object: at the earliest `until` of its sleeping tasks, and every `heartbeatMs`
 * while work is live, so work goes on after an eviction with no client connected. While work runs the harness's
 * own timers run it; once nothing is ready to run or running the harness clock parks its timers (object-clock.ts)
 * and the alarm comes for the earliest of them too, so the object keeps no timer and can be evicted (decision 0052).
 */
import { safely } from "../base/safely.ts";
import type { Harness } from "../harness.ts";
import type { Batch } from "../storage/records.ts";
import type { ObjectClock } from "./object-clock.ts";
import type { DurableObjectStorage } from "./types.ts";

/**
 * How far off the next wake-up must be before the object parks its timers (decision 0052). Nearer, it keeps them:
 * the object is in memory until then anyway (workerd evicts after 10 s of inactivity).
 */
const PARK_AFTER_MS = 2_000;
/**
 * The latest time an alarm is set for: the last millisecond of the year 9999. A sleep stored further out (a task may
 * sleep until any finite number) would be an alarm no `Date` can hold, and the storage's `setAlarm` would reject with
 * nothing to hear it; the alarm at the cap wakes the object, and the next arm sets it again.
 */
export const LATEST_ALARM = 253_402_300_799_999;

/** Task statuses that are work running or ready to run (a commit leaving its tasks in them moves no alarm). */
const BUSY: ReadonlySet<string> = new Set(["pending", "running", "completing"]);

export class ObjectAlarm {
  readonly #storage: DurableObjectStorage;
  readonly #heartbeatMs: number;
  readonly #clock: ObjectClock;
  /** The alarm this instance last set (undefined: none, or not known yet; NaN: a refused delete, so not known). */
  #alarmAt: number | undefined;
  #armQueued = false;
  /** The last look found work running or ready (so the alarm is a heartbeat, or an earlier sleeper). */
  #armedBusy = false;
  readonly #idleWaiters = new Set<() => void>();

  /** Where a failure of the alarm's own work goes (the object's `onReport`, as an error report: decision 0147). */
  readonly #failed: (error: unknown) => void;

  constructor(storage: DurableObjectStorage, heartbeatMs: number, clock: ObjectClock, failed: (error: unknown) => void = () => {}) {
    this.#storage = storage;
    this.#heartbeatMs = heartbeatMs;
    this.#clock = clock;
    this.#failed = failed;
  }

  /** Reads the alarm the object has (at its start), and looks again after the commits that may move it. */
  async attach(harness: Harness): Promise<void> {
    this.#alarmAt = (await this.#storage.getAlarm()) ?? undefined;
    this.#clock.onParked = () => this.#armSoon(harness);
    harness.onCommit(({ batch }) => {
      if (this.#movesNothing(batch)) return;
      this.#armSoon(harness);
    });
  }

  /** The alarm fired: it is gone. */
  fired(): void {
    this.#alarmAt = undefined;
  }

  /**
   * A commit that leaves every task it wrote busy (a checkpoint, say) cannot move an alarm that is already the
   * heartbeat of busy work; look again only after one that may (most commits of a busy object are such
   * checkpoints, and this check is cheaper than a look at every live task).
   */
  #movesNothing(batch: Batch): boolean {
    return this.#armedBusy && batch.tasks.every((task) => BUSY.has(task.state.status));
  }

  #armSoon(harness: Harness): void {
    if (this.#armQueued) return;
    this.#armQueued = true;
    queueMicrotask(() => {
      this.#armQueued = false;
      // Off the commit line: what it throws would be no one's (an uncaught error in the microtask).
      safely(() => this.arm(harness), this.#failed);
    });
  }

  /**
   * Puts the one alarm on the kernel's next wake-up (`harness.nextWake`: the earliest sleeper not yet due), or
   * the heartbeat while work is live. A due sleeper is work the scheduler takes now (the heartbeat covers a
   * crash before it does): an alarm at a past `until` would only fire again and again. With nothing ready to run
   * or running, the harness clock's timers are parked and the alarm comes for the earliest one that must come on
   * time (a lease's renewal does not: the idle holder lets it lapse).
   */
  arm(harness: Harness): void {
    if (harness.closed) return;
    const now = this.#clock.now();
    const { busy, at } = harness.nextWake(now + this.#heartbeatMs);
    let earliest = at;
    this.#armedBusy = busy;
    if (!busy) for (const wake of this.#idleWaiters) wake();
    // Parked only when nothing is due soon: a wake-up within PARK_AFTER_MS keeps its real timer (an alarm is a
    // storage write and an event each, and no platform evicts an object that soon).
    const soon = at !== undefined && at - now < PARK_AFTER_MS;
    if (busy || soon || this.#clock.dueWithin(now + PARK_AFTER_MS)) this.#clock.run();
    else {
      this.#clock.park();
      const parked = this.#clock.alarmAt;
      if (parked !== undefined) earliest = earliest === undefined ? parked : Math.min(earliest, parked);
    }
    if (busy) {
      // Keep a heartbeat already set within the next period: moving it on every commit would be a write each.
      const beat =
        this.#alarmAt !== undefined && this.#alarmAt > now && this.#alarmAt <= now + this.#heartbeatMs
          ? this.#alarmAt
          : now + this.#heartbeatMs;
      earliest = earliest === undefined ? beat : Math.min(earliest, beat);
    }
    if (earliest === this.#alarmAt) return;
    this.#alarmAt = earliest;
    safely(
      () => (earliest === undefined ? this.#storage.deleteAlarm() : this.#storage.setAlarm(Math.min(earliest, LATEST_ALARM))),
      (error) => {
        // Not set: the next look sets it again (before, this instance took it for set and never asked again) — a refused
        // delete too (NaN: an alarm not known, so the next look deletes it again; L1). A refused set runs the parked timers
        // in memory meanwhile: with no alarm and no later commit nothing else would wake a sleeper (0147's review, M2).
        if (this.#alarmAt === earliest || (earliest === undefined && this.#alarmAt === undefined)) {
          this.#alarmAt = earliest === undefined ? Number.NaN : undefined;
          this.#armedBusy = false;
          if (earliest !== undefined) this.#clock.run();
        }
        this.#failed(error);
      },
    );
  }

  /** Resolves once no task is ready to run or running, or after one heartbeat period. */
  idle(harness: Harness): Promise<void> {
    return new Promise((resolve) => {
      const done = () => {
        cancel();
        this.#idleWaiters.delete(done);
        resolve();
      };
      const cancel = this.#clock.setTimer(this.#heartbeatMs, done);
      this.#idleWaiters.add(done);
      this.arm(harness);
    });
  }
}
