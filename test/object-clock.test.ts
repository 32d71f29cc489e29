import fc from "fast-check";
import { describe, expect, it } from "vitest";
import { counterTask } from "../examples/counter-task.ts";
import { LATEST_ALARM, ObjectAlarm } from "../src/cloudflare/alarm.ts";
import { ObjectClock } from "../src/cloudflare/object-clock.ts";
import type { DurableObjectStorage } from "../src/cloudflare/types.ts";
import { memoryArbiter } from "../src/follow/arbiter.ts";
import { createRegistry, defineExtension, Harness, MemoryStorage } from "../src/index.ts";
import { createManualClock } from "../src/testing/clock.ts";
import { ctx, flush } from "./support.ts";

// Decision 0052: a Durable Object keeps no timer while nothing runs (a pending timer holds it in memory, decision
// 0046); its harness clock parks them and its one alarm comes for the earliest that must come on time.

/** The alarm part of a Durable Object's storage, in memory: where the alarm is. */
function alarmStorage(): { storage: DurableObjectStorage; at(): number | null } {
  let at: number | null = null;
  const storage = {
    getAlarm: async () => at,
    setAlarm: async (time: number | Date) => {
      at = Number(time);
    },
    deleteAlarm: async () => {
      at = null;
    },
  } as unknown as DurableObjectStorage;
  return { storage, at: () => at };
}

describe("the object's harness clock (decision 0052)", () => {
  it("decision 0052, B3: a sleep until a time no Date can hold sets the alarm at the latest one a Date holds (a storage that refuses an invalid time is never asked one); the task still sleeps", async () => {
    const base = createManualClock(1_000_000);
    const clock = new ObjectClock(base);
    const registry = createRegistry().install(defineExtension({ name: "example", tasks: [counterTask(() => {})] }));
    const harness = await Harness.open(new MemoryStorage(), { registry, clock }, ctx);
    let at: number | null = null;
    const refused: unknown[] = [];
    const storage = {
      getAlarm: async () => at,
      // As a real storage does: a time no Date can hold is refused.
      setAlarm: async (time: number | Date) => {
        if (Number.isNaN(new Date(Number(time)).getTime())) {
          refused.push(time);
          throw new RangeError("invalid alarm time");
        }
        at = Number(time);
      },
      deleteAlarm: async () => {
        at = null;
      },
    } as unknown as DurableObjectStorage;
    const objectAlarm = new ObjectAlarm(storage, 30_000, clock);
    await objectAlarm.attach(harness);
    harness.resume();
    const id = await (await harness.root(ctx)).commit(
      (tx) =>
        tx.createTask(
          counterTask(() => {}),
          { to: 3, everyMs: 1e300 },
        ),
      ctx,
    );
    await flush(20);
    objectAlarm.arm(harness);
    await flush(5);
    expect((await harness.getTask(id, ctx))!.state).toMatchObject({ status: "sleeping", until: 1_000_000 + 1e300 });
    expect(refused).toEqual([]);
    expect(at).toBe(LATEST_ALARM);
    await harness.close(ctx);
  });

  it("decision 0052, S3: holding a lease with only a sleeping task, the object keeps no timer; the alarm is at the sleeper's until (not the lease's renewal), and at it the task goes on and counts once each", async () => {
    const base = createManualClock(1_000_000);
    const clock = new ObjectClock(base);
    const printed: string[] = [];
    const registry = createRegistry().install(
      defineExtension({ name: "example", tasks: [counterTask((line) => void printed.push(line))] }),
    );
    const arbiter = memoryArbiter({ clock: base, ttlMs: 30_000 });
    const harness = await Harness.open(new MemoryStorage(), { registry, clock, lease: { place: "object", arbiter } }, ctx);
    const alarm = alarmStorage();
    const objectAlarm = new ObjectAlarm(alarm.storage, 30_000, clock);
    await objectAlarm.attach(harness);
    harness.resume();
    const root = await harness.root(ctx);
    const id = await root.commit(
      (tx) =>
        tx.createTask(
          counterTask(() => {}),
          { to: 3, everyMs: 25_000 },
        ),
      ctx,
    );
    await flush(20);
    objectAlarm.arm(harness);
    expect(printed).toEqual(["tick 1"]);
    const until = 1_000_000 + 25_000;
    expect((await harness.getTask(id, ctx))!.state).toMatchObject({ status: "sleeping", until });
    // Nothing left that would hold the object in memory: the sleep timer and the lease's renewal are parked.
    expect(clock.parked).toBe(true);
    expect(base.pending).toBe(0);
    expect(alarm.at()).toBe(until);
    // The alarm fires on this instance: what is due runs (the renewal too, the lease still holds), and the work goes on.
    base.advance(25_000);
    expect(printed).toEqual(["tick 1"]); // no real timer fired anything
    objectAlarm.fired();
    clock.fireDue();
    objectAlarm.arm(harness);
    await flush(20);
    expect(printed).toEqual(["tick 1", "tick 2"]);
    expect(arbiter.record).toMatchObject({ holder: "object", epoch: 1, expiresAt: 1_025_000 + 30_000 });
    expect(alarm.at()).toBe(until + 25_000);
    base.advance(25_000);
    objectAlarm.fired();
    clock.fireDue();
    objectAlarm.arm(harness);
    await flush(20);
    expect(printed).toEqual(["tick 1", "tick 2", "tick 3"]);
    expect((await harness.getTask(id, ctx))!.state).toMatchObject({ status: "terminal" });
    expect(base.pending).toBe(0);
    expect(alarm.at()).toBe(null);
    await harness.close(ctx);
  });

  it("decision 0052: an idle holder's lease lapses (its renewal is parked, no alarm for it); the harness stops writing at the expiry as after a crash", async () => {
    const base = createManualClock(0);
    const clock = new ObjectClock(base);
    const arbiter = memoryArbiter({ clock: base, ttlMs: 30_000 });
    const harness = await Harness.open(
      new MemoryStorage(),
      { registry: createRegistry(), clock, lease: { place: "object", arbiter } },
      ctx,
    );
    const alarm = alarmStorage();
    const objectAlarm = new ObjectAlarm(alarm.storage, 30_000, clock);
    await objectAlarm.attach(harness);
    objectAlarm.arm(harness);
    expect(clock.parked).toBe(true);
    expect(alarm.at()).toBe(null); // nothing to wake for: no alarm for the renewal
    expect(clock.alarmAt).toBe(undefined);
    base.advance(40_000);
    clock.fireDue(); // an event after the expiry: the renewal is refused
    await flush(10);
    expect(harness.closed).toBe(true);
    expect(arbiter.record).toMatchObject({ holder: "object", epoch: 1, expiresAt: 30_000 });
  });

  it("parked timers fire at fireDue earliest first, a cancelled one never, and run() gives the rest a real timer for the time they have left (fast-check)", () => {
    fc.assert(
      fc.property(
        fc.array(fc.record({ delay: fc.integer({ min: 0, max: 1_000 }), cancel: fc.boolean(), renewal: fc.boolean() }), { maxLength: 20 }),
        fc.integer({ min: 0, max: 1_200 }),
        (timers, wait) => {
          const base = createManualClock(0);
          const clock = new ObjectClock(base);
          let parkedAsks = 0;
          clock.onParked = () => parkedAsks++;
          clock.park();
          const fired: number[] = [];
          const cancels = timers.map((timer, index) =>
            clock.setTimer(timer.delay, () => fired.push(index), timer.renewal ? "lease-renewal" : undefined),
          );
          expect(parkedAsks).toBe(timers.filter((timer) => !timer.renewal).length);
          for (const [index, timer] of timers.entries()) if (timer.cancel) cancels[index]!();
          const kept = timers.map((timer, index) => ({ ...timer, index })).filter((timer) => !timer.cancel);
          const onTime = kept.filter((timer) => !timer.renewal).map((timer) => timer.delay);
          expect(clock.alarmAt).toBe(onTime.length ? Math.min(...onTime) : undefined);
          expect(base.pending).toBe(0);
          base.advance(wait);
          expect(fired).toEqual([]);
          clock.fireDue();
          const due = kept.filter((timer) => timer.delay <= wait).sort((a, b) => a.delay - b.delay || a.index - b.index);
          expect(fired).toEqual(due.map((timer) => timer.index));
          clock.run();
          expect(base.pending).toBe(kept.length - due.length);
          base.advance(1_000);
          expect([...fired].sort((a, b) => a - b)).toEqual(kept.map((timer) => timer.index));
        },
      ),
    );
  });
});
