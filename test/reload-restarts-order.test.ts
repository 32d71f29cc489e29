import fc from "fast-check";
import { afterEach, describe, expect, it, vi } from "vitest";
import { createRegistry, defineExtension, defineTask } from "../src/index.ts";
import type { KernelTx } from "../src/session/tx.ts";
import type { TaskRecord } from "../src/storage/records.ts";
import { byRestarts, SchedulingPass } from "../src/tasks/pass.ts";
import { createManualClock } from "../src/testing/clock.ts";
import { ctx, openHarness, runUntil, stallNoting } from "./support.ts";

/**
 * Decision 0105: after a crash, the passes reserve the tasks with the fewest restarts first (then by id). A task that
 * made progress before the crash is started in the first pass, before a backlog of tasks cut off again and again
 * without progress; its first resumed step is then stored before the rest of the backlog is started. S4's count and
 * the seed's query are unchanged.
 */

const begun: number[] = [];
const stall = stallNoting((id) => void begun.push(id));
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
const HOUR = 3_600_000;
const woke: number[] = [];
const sleeper = defineTask<null, { phase: "sleep" | "woke" }, null>({
  name: "test.sleeper",
  version: 1,
  initial: () => ({ phase: "sleep" }),
  phases: {
    sleep: async (_task, runtime, context) => runtime.sleepUntil(runtime.now() + HOUR, { phase: "woke" }, context),
    woke: async (task, runtime, context) => {
      woke.push(task.id);
      await runtime.commit(() => ({ status: "terminal", outcome: { status: "completed", result: null } }), context);
    },
  },
  abort: async (_task, runtime, context) => runtime.commit(() => ({ status: "terminal", outcome: { status: "aborted" } }), context),
});
const registry = () => createRegistry().install(defineExtension({ name: "test", tasks: [stall, stepper, sleeper] }));

afterEach(() => vi.restoreAllMocks());
const SEED_QUERY = "SELECT id, kind, status, record ->> '$.restarts' AS restarts FROM tasks ORDER BY id";
const STALLED = 1000;

describe("the reservation order after a crash (decision 0105)", () => {
  it("S4, S6, S11: a task that made progress before the crash steps before 1,000 stalled tasks with lower ids are started, at the first crash (decision 0112) and the second; every restart counted", async () => {
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
      // Crash 2 (stalled 2, stepper 1): fewest restarts first (decision 0105; before it, 1,000). Crash 1 (every task 1):
      // the stepper's progress stamp ranks it first among equal counts (decision 0112; before it, id order: 1,000).
      expect(steps[0]!.begunBefore).toBeLessThan(256);
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

describe("a full scan hands the pass no sleeper that is not due (decision 0105)", () => {
  it("S4, B1: at a reload with 1,000 tasks asleep, the first pass looks at the stepper alone; the sleepers still wake when due, and one marked for abort still aborts", async () => {
    const { openSqliteStorage } = await import("../src/storage/sqlite/open-storage.ts");
    const seeded = await openSqliteStorage({ vfs: "memory" });
    const first = await openHarness(seeded, { registry: registry() });
    const root = await first.harness.root(ctx);
    await root.commit((tx) => {
      for (let index = 0; index < 1000; index++) tx.createTask(sleeper, null);
    }, ctx);
    first.harness.resume();
    await runUntil(
      first.clock,
      async () => (await seeded.query("SELECT count(*) AS n FROM tasks WHERE status = 'sleeping'"))[0]!.n === 1000,
    );
    steps.length = 0;
    await root.commit((tx) => tx.createTask(stepper, null), ctx);
    await runUntil(first.clock, () => steps.length === 1);
    const image = await seeded.exportImage(); // the crash

    const storage = await openSqliteStorage({ vfs: "memory", image });
    const looked: number[] = [];
    const run = SchedulingPass.prototype.run;
    vi.spyOn(SchedulingPass.prototype, "run").mockImplementation(function (this: SchedulingPass, ...args: Parameters<typeof run>) {
      looked.push(args[1].length);
      return run.apply(this, args);
    });
    steps.length = 0;
    woke.length = 0;
    const { harness, clock } = await openHarness(storage, {
      registry: registry(),
      resume: true,
      clock: createManualClock(first.clock.now()),
    });
    await runUntil(clock, () => steps.length === 1, 50);
    // Before: 1,001 (every live task, each reconciled, sorted and looked up twice, to be passed over).
    expect(looked[0]).toBe(1);
    expect((await harness.inspect(ctx)).tasks.filter((task) => task.record.state.status === "sleeping")).toHaveLength(1000);
    // B1: a sleeper marked for abort runs its abort handler now, not after its sleep.
    const [marked] = (await harness.inspect(ctx)).tasks.filter((task) => task.record.kind === "test.sleeper").map((task) => task.record.id);
    await harness.abortTask(marked!, ctx);
    await runUntil(
      clock,
      async () => (await storage.query("SELECT status FROM tasks WHERE id = ?", marked!))[0]!.status === "terminal",
      50,
    );
    // The others wake when due.
    clock.advance(HOUR);
    await runUntil(clock, () => woke.length === 999);
    expect(new Set(woke).size).toBe(999);
    vi.restoreAllMocks();
    await harness.close(ctx);
  });
});
