/**
 * Decision 0147's review, M2 and L1: a refused `setAlarm` at the last look of an object going idle left it with no
 * alarm and its timers parked — with no later commit nothing woke a sleeping task; a refused `deleteAlarm` was never
 * tried again. Now a refused set runs the parked timers in memory (and the next look sets the alarm again), and a
 * refused delete is asked again at the next look.
 */
import { expect, it } from "vitest";
import { counterTask } from "../examples/counter-task.ts";
import { ObjectAlarm } from "../src/cloudflare/alarm.ts";
import { ObjectClock } from "../src/cloudflare/object-clock.ts";
import type { DurableObjectStorage } from "../src/cloudflare/types.ts";
import { createRegistry, defineExtension, Harness, MemoryStorage } from "../src/index.ts";
import { createManualClock } from "../src/testing/clock.ts";
import { ctx, flush } from "./support.ts";

async function sleeperObject(left: number | null = null) {
  const manual = createManualClock(1_000_000);
  const clock = new ObjectClock(manual);
  const lines: string[] = [];
  const task = counterTask((line) => void lines.push(line));
  const registry = createRegistry().install(defineExtension({ name: "example", tasks: [task] }));
  const harness = await Harness.open(new MemoryStorage(), { registry, clock, resume: true }, ctx);
  const storage = { at: left, refuse: false, deletes: 0 };
  const platform = {
    getAlarm: async () => storage.at,
    setAlarm: async (time: number | Date) => {
      if (storage.refuse) throw new Error("setAlarm refused");
      storage.at = Number(time);
    },
    deleteAlarm: async () => {
      storage.deletes++;
      if (storage.refuse) throw new Error("deleteAlarm refused");
      storage.at = null;
    },
  } as unknown as DurableObjectStorage;
  const failures: unknown[] = [];
  const alarm = new ObjectAlarm(platform, 30_000, clock, (error) => failures.push(error));
  await alarm.attach(harness);
  return { manual, clock, lines, task, harness, storage, alarm, failures };
}

it("S3, S7 (0147's review, M2): an idle object's last setAlarm refused — the sleeper still wakes on time (its timer runs in memory), the failure is reported, and the alarm is set again", async () => {
  const o = await sleeperObject();
  const root = await o.harness.root(ctx);
  await root.commit((tx) => tx.createTask(o.task, { to: 3, everyMs: 60_000 }), ctx);
  for (let i = 0; i < 20 && o.lines.length < 1; i++) await flush(2);
  await flush(5);
  expect(o.lines).toEqual(["tick 1"]);
  expect(o.storage.at).toBe(1_000_000 + 60_000); // the sleeper's alarm; the timers parked
  expect(o.clock.parked).toBe(true);
  // The alarm fired early (an earlier instance's heartbeat, say): gone from storage; the handler's last look is refused.
  o.storage.at = null;
  o.alarm.fired();
  o.storage.refuse = true;
  o.alarm.arm(o.harness);
  await flush(3);
  o.storage.refuse = false;
  expect(o.failures).toHaveLength(1);
  expect(o.clock.parked).toBe(false);
  o.manual.advance(60_000);
  for (let i = 0; i < 20 && o.lines.length < 2; i++) await flush(2);
  await flush(5);
  expect(o.lines).toEqual(["tick 1", "tick 2"]);
  expect(o.storage.at).toBe(1_000_000 + 120_000); // the next sleep's alarm, set by the look after tick 2's commit
  await o.harness.close(ctx);
});

it("S7 (0147's review, L1): a refused deleteAlarm is asked again at the next look", async () => {
  const o = await sleeperObject(5_000_000); // an alarm left by an earlier instance; no work here
  o.storage.refuse = true;
  o.alarm.arm(o.harness);
  await flush(3);
  expect(o.failures).toHaveLength(1);
  expect(o.storage.deletes).toBe(1);
  o.storage.refuse = false;
  o.alarm.arm(o.harness);
  await flush(3);
  expect(o.storage.deletes).toBe(2);
  expect(o.storage.at).toBeNull();
  await o.harness.close(ctx);
});
