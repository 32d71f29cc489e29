import fc from "fast-check";
import { describe, expect, it } from "vitest";
import type { TaskRecord } from "../src/storage/records.ts";
import { SleepQueue } from "../src/tasks/sleep-queue.ts";
import { SleepTimer } from "../src/tasks/timers.ts";
import { createManualClock } from "../src/testing/clock.ts";

/**
 * Decision 0115: the sleep timer keeps the sleepers earliest first (a min-heap with lazy removal) instead of walking
 * every sleeper at each arm, and builds it after the open's first step instead of in front of it.
 */

type Op =
  | { op: "sleep"; id: number; until: number }
  | { op: "end"; id: number }
  | { op: "earliest"; held: number[] }
  | { op: "due"; now: number };

const id = fc.integer({ min: 1, max: 40 });
const until = fc.integer({ min: 0, max: 60 }); // few values: many equal untils, ties broken by id
const op: fc.Arbitrary<Op> = fc.oneof(
  { weight: 5, arbitrary: fc.record({ op: fc.constant("sleep" as const), id, until }) },
  { weight: 2, arbitrary: fc.record({ op: fc.constant("end" as const), id }) },
  { weight: 2, arbitrary: fc.record({ op: fc.constant("earliest" as const), held: fc.array(id, { maxLength: 6 }) }) },
  { weight: 2, arbitrary: fc.record({ op: fc.constant("due" as const), now: until }) },
);

describe("the sleep queue against a sorted model (decision 0115)", () => {
  it("S3: earliest and due are exactly the sorted model's, whatever sleeps, ends, repeats and is held; the heap stays bounded", () => {
    fc.assert(
      fc.property(fc.array(fc.record({ id, until }), { maxLength: 40 }), fc.array(op, { maxLength: 120 }), (opened, ops) => {
        // The model: each sleeper's current `until` (what the mirror says), read plainly and sorted.
        const model = new Map<number, number>();
        const queue = new SleepQueue((sleeper, at) => model.get(sleeper) === at);
        const sorted = () => [...model].sort(([a, x], [b, y]) => x - y || a - b);
        for (const entry of opened) {
          if (model.has(entry.id)) continue; // an open's mirror: each sleeper once
          model.set(entry.id, entry.until);
          queue.push(entry.until, entry.id);
        }
        queue.loaded();
        let peak = model.size;
        for (const step of ops) {
          if (step.op === "sleep") {
            model.set(step.id, step.until);
            queue.push(step.until, step.id);
          } else if (step.op === "end") model.delete(step.id);
          else if (step.op === "earliest") {
            const held = new Set(step.held);
            expect(queue.earliest((sleeper) => held.has(sleeper))).toBe(sorted().find(([sleeper]) => !held.has(sleeper))?.[1]);
          } else {
            expect(queue.due(step.now)).toEqual(
              sorted()
                .filter(([, at]) => at <= step.now)
                .map(([sleeper]) => sleeper),
            );
          }
          peak = Math.max(peak, model.size);
          expect(queue.entries).toBeLessThanOrEqual(2 * peak + 65);
        }
        // Nothing was lost: every current sleeper is still there, in order.
        expect(queue.due(Number.POSITIVE_INFINITY)).toEqual(sorted().map(([sleeper]) => sleeper));
      }),
      { numRuns: 300, seed: 115 },
    );
  });

  it("S3: a sleeper asleep many times with the same until, or woken and asleep again, is one entry after a clean-up", () => {
    const model = new Map<number, number>();
    const queue = new SleepQueue((sleeper, at) => model.get(sleeper) === at);
    queue.loaded();
    for (let round = 0; round < 10_000; round++) {
      model.set(7, 500);
      queue.push(500, 7);
    }
    expect(queue.entries).toBeLessThanOrEqual(65);
    expect(queue.due(500)).toEqual([7]);
  });
});

/** A mirror that counts its lookups. */
class CountingMap<K, V> extends Map<K, V> {
  gets = 0;
  override get(key: K): V | undefined {
    this.gets += 1;
    return super.get(key);
  }
}

function asleep(id: number, until: number): TaskRecord {
  return {
    id,
    conversationId: 1,
    kind: "test.sleeper",
    version: 1,
    input: null,
    background: false,
    abortRequested: false,
    state: { status: "sleeping", until, checkpoint: { phase: "woke" } },
  } as TaskRecord;
}

describe("the sleep timer at an open (decision 0115)", () => {
  it("S3, S4: with 10,000 asleep, the first arm looks up no sleeper and sets one timer for the least until; the queue is built at the first arm after the first step, and each sleeper wakes at its time", async () => {
    const clock = createManualClock(1_000);
    const live = new CountingMap<number, TaskRecord>();
    for (let id = 1; id <= 10_000; id++) live.set(id, asleep(id, 1_000 + 10 * ((id * 7919) % 10_000) + 5));
    let stepped!: () => void;
    const woken: Array<{ at: number; ids: number[] }> = [];
    const timer = new SleepTimer({
      clock,
      live,
      running: () => false,
      seenDue: new Map(),
      stepStored: new Promise<void>((resolve) => (stepped = resolve)),
      wake: (due) => {
        woken.push({ at: clock.now(), ids: due });
        for (const id of due) live.delete(id); // woken: the scheduler's commit takes it out of the sleepers
        timer.arm();
      },
    });
    for (const task of live.values()) timer.index(task);
    live.gets = 0;
    timer.arm();
    // Before: a walk of every sleeper (10,000 lookups) at this arm, in front of the first resumed step.
    expect(live.gets).toBe(0);
    expect(clock.pending).toBe(1);
    stepped(); // the open's first step is stored: the next arm (a drain's end) builds the queue
    await Promise.resolve();
    timer.arm();
    expect(live.gets).toBeLessThan(20); // the build reads the mirror's values, not `get`; the arm after it a few
    expect(clock.pending).toBe(1);
    const sleepers = [...live.values()].sort(
      (a, b) => (a.state as { until: number }).until - (b.state as { until: number }).until || a.id - b.id,
    );
    for (let at = 0; at < 30; at++) clock.next();
    // Each of the first 30 woke alone, at exactly its until: not before, not later.
    expect(woken.map(({ at, ids }) => ({ at, ids }))).toEqual(
      sleepers.slice(0, 30).map((task) => ({ at: (task.state as { until: number }).until, ids: [task.id] })),
    );
    timer.cancel();
  });
});
