import fc from "fast-check";
import { describe, expect, it } from "vitest";
import { createRegistry, defineExtension, defineTask } from "../src/index.ts";
import type { KernelTx } from "../src/session/tx.ts";
import type { TaskRecord } from "../src/storage/records.ts";
import { byRestarts } from "../src/tasks/pass.ts";
import { ctx, openHarness, runUntil } from "./support.ts";

/**
 * Decision 0105: after a crash, the passes reserve the tasks with the fewest restarts first (then by id). A task that
 * made progress before the crash is started in the first pass, before a backlog of tasks cut off again and again
 * without progress; its first resumed step is then stored before the rest of the backlog is started. S4's count and
 * the seed's query are unchanged.
 */

const begun: number[] = [];
const stall = defineTask<null, { phase: "stall" }, null>({
  name: "test.stall",
  version: 1,
  initial: () => ({ phase: "stall" }),
  phases: {
    stall: async (task, runtime) => {
      begun.push(task.id);
      await runtime.untilAborted();
      throw new Error("stopped");
    },
  },
  abort: async () => {},
});
/** Steps once a start (progress: its restarts are cleared), then holds; notes how many stalled tasks had begun. */
const steps: Array<{ id: number; begunBefore: number }> = [];
const stepper = defineTask<null, { phase: "step"; n: number }, null>({
  name: "test.stepper",
  version: 1,
  initial: () => ({ phase: "step", n: 0 }),
  phases: {
    step: async (task, runtime, context) => {
      await runtime.commit(() => ({ status: "running", checkpoint: { phase: "step", n: task.state.checkpoint.n + 1 } }), context);
      steps.push({ id: task.id, begunBefore: begun.length });
      await runtime.untilAborted();
      throw new Error("stopped");
    },
  },
  abort: async () => {},
});
const registry = () => createRegistry().install(defineExtension({ name: "test", tasks: [stall, stepper] }));
const SEED_QUERY = "SELECT id, kind, status, record ->> '$.restarts' AS restarts FROM tasks ORDER BY id";
const STALLED = 1000;

describe("the reservation order after a crash (decision 0105)", () => {
  it("S4, S6, S11: a task that made progress before the crash steps before 1,000 stalled tasks with lower ids are started; every restart counted", async () => {
    const { openSqliteStorage } = await import("../src/storage/sqlite/open-storage.ts");
    const seeded = await openSqliteStorage({ vfs: "memory" });
    const first = await openHarness(seeded, { registry: registry() });
    const root = await first.harness.root(ctx);
    await root.commit((tx) => {
      for (let index = 0; index < STALLED; index++) tx.createTask(stall, null);
    }, ctx);
    first.harness.resume();
    await runUntil(first.clock, () => begun.length === STALLED);
    await root.commit((tx) => tx.createTask(stepper, null), ctx);
    await runUntil(first.clock, () => steps.length === 1);
    const hotId = steps[0]!.id;
    const stalledIds = [...begun].sort((a, b) => a - b);
    expect(Math.max(...stalledIds)).toBeLessThan(hotId);

    // Two crashes: at the second open the stalled tasks have restarts 1 (2 once counted), the stepper 0 (1).
    let image = await seeded.exportImage();
    for (let crash = 1; crash <= 2; crash++) {
      begun.length = 0;
      steps.length = 0;
      const storage = await openSqliteStorage({ vfs: "memory", image });
      const { harness, clock } = await openHarness(storage, { registry: registry(), resume: true, settings: { restartLimit: 10 } });
      // S4/S11: every restart is counted in the seed's query before any task begins.
      expect(begun).toEqual([]);
      expect(await storage.query(SEED_QUERY)).toEqual([
        ...stalledIds.map((id) => ({ id, kind: "test.stall", status: "running", restarts: crash })),
        { id: hotId, kind: "test.stepper", status: "running", restarts: 1 },
      ]);
      await runUntil(clock, () => steps.length === 1 && begun.length === STALLED);
      if (crash === 1) {
        // Every task has one restart: id order, as before (the stepper is started last).
        expect(steps[0]!.begunBefore).toBe(STALLED);
      } else {
        // Before: 1,000 (the stepper, largest id, was started by the fourth pass, after every stalled task).
        expect(steps[0]!.begunBefore).toBeLessThan(256);
      }
      expect(begun).toEqual(stalledIds); // each started once, in id order among equals
      image = await storage.exportImage(); // the next crash: never closed
      await harness.close(ctx);
    }
  });
});

describe("byRestarts (decision 0105)", () => {
  it("orders ascending ids by restarts then id, and returns the same list when every count is equal", () => {
    fc.assert(
      fc.property(
        fc.uniqueArray(fc.integer({ min: 1, max: 2 ** 40 }), { maxLength: 60 }),
        fc.array(
          fc.oneof(fc.constant(undefined), fc.nat(4), fc.constant(Number.NaN), fc.constant("3"), fc.constant(Number.POSITIVE_INFINITY)),
          {
            minLength: 60,
            maxLength: 60,
          },
        ),
        (unsorted, counts) => {
          const ids = [...unsorted].sort((a, b) => a - b);
          const records = new Map(ids.map((id, at) => [id, { id, restarts: counts[at] } as unknown as TaskRecord]));
          const tx = { task: (id: number) => records.get(id) } as unknown as KernelTx;
          const rank = (id: number) => {
            const restarts = records.get(id)!.restarts as unknown;
            return typeof restarts === "number" && Number.isFinite(restarts) ? restarts : 0;
          };
          const ordered = byRestarts(tx, ids);
          expect([...ordered].sort((a, b) => a - b)).toEqual(ids);
          expect(ordered).toEqual([...ids].sort((a, b) => rank(a) - rank(b) || a - b));
          if (new Set(ids.map(rank)).size <= 1) expect(ordered).toBe(ids);
        },
      ),
      { numRuns: 200, seed: 105 },
    );
  });
});
