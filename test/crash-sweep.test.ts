import { describe, expect, it } from "vitest";
import { counterTask } from "../examples/counter-task.ts";
import { createRegistry, BACKGROUND_CONTEXT as ctx, defineExtension, defineTask, Harness } from "../src/index.ts";
import { type CrashScenario, CrashSweepViolation, crashSweep } from "../src/testing/index.ts";
import { counterCounted, counterRegistry, startCounter, ticksInOrder } from "./counter-scenario.ts";

/** S12 Example 12 as a sweep scenario: every process starts the counter unless it exists (test/counter-scenario.ts). */
const example12: CrashScenario = {
  name: "Example 12",
  open: (storage, clock, world) => Harness.open(storage, { registry: counterRegistry(world), clock }, ctx),
  start: startCounter,
  invariants: [
    async ({ storage }) => {
      const problem = await counterCounted({ storage });
      if (problem) return problem;
      const [task] = await storage.listTasks();
      if (task!.memos || task!.restarts) return "memos or restarts left on a terminal task";
    },
    ticksInOrder,
  ],
};

for (const storage of ["memory", "sqlite"] as const) {
  describe(`crashSweep on ${storage}`, () => {
    it("S12/S4: Example 12 keeps its invariants when crashed at every commit boundary, and again during recovery", {
      timeout: 240_000,
    }, async () => {
      const result = await crashSweep(example12, { storage, double: storage === "memory" ? true : { sample: 30, seed: 12 } });
      expect(result.commits).toBeGreaterThan(10);
      expect(result.single).toBe(2 * result.commits - 1); // both sides of every boundary
      expect(result.double).toBeGreaterThan(storage === "memory" ? result.commits * 10 : 29);
      console.log(`crashSweep Example 12 on ${storage}: ${result.commits} commits, ${result.worlds} crash worlds`);
    });
  });
}

/**
 * A failFast group: the parent owns three children and waits on them failFast. One child fails after a short
 * sleep; the others sleep long and would write a memo-guarded effect when they wake. The failure aborts them,
 * and the parent ends once all three are terminal — at every crash point.
 */
function failFastGroup(): CrashScenario {
  const child = (world: { once(key: string): void }) =>
    defineTask<{ fail: boolean; ms: number }, { phase: "nap" | "woke" }, string>({
      name: "sweep.child",
      version: 1,
      initial: () => ({ phase: "nap" }),
      phases: {
        nap: async (task, runtime, context) => runtime.sleepUntil(runtime.now() + task.input.ms, { phase: "woke" }, context),
        woke: async (task, runtime, context) => {
          if (task.input.fail) {
            await runtime.commit(
              () => ({ status: "terminal", outcome: { status: "failed", error: { message: "child failed" } } }),
              context,
            );
            return;
          }
          if ((await runtime.memo("effect", context)) === undefined) {
            await runtime.memo("effect", true, context);
            world.once(`child ${task.id} woke`);
          }
          await runtime.commit(() => ({ status: "terminal", outcome: { status: "completed", result: "woke" } }), context);
        },
      },
      abort: async (_t, runtime, context) =>
        runtime.commit(() => ({ status: "terminal", outcome: { status: "aborted", reason: "failFast" } }), context),
    });
  const parent = (kid: ReturnType<typeof child>) =>
    defineTask<null, { phase: "spawn" | "joined" }, string>({
      name: "sweep.group",
      version: 1,
      initial: () => ({ phase: "spawn" }),
      phases: {
        spawn: async (_t, runtime, context) =>
          runtime.commit((tx) => {
            const on = [
              tx.createTask(kid, { fail: true, ms: 100 }),
              tx.createTask(kid, { fail: false, ms: 60_000 }),
              tx.createTask(kid, { fail: false, ms: 120_000 }),
            ];
            return { status: "waiting", checkpoint: { phase: "joined" }, on, policy: "failFast" };
          }, context),
        joined: async (_t, runtime, context) =>
          runtime.commit(() => ({ status: "terminal", outcome: { status: "completed", result: "joined" } }), context),
      },
      abort: async (_t, runtime, context) => runtime.commit(() => ({ status: "terminal", outcome: { status: "aborted" } }), context),
    });
  return {
    name: "failFast group",
    open: (storage, clock, world) => {
      const kid = child(world);
      return Harness.open(
        storage,
        { registry: createRegistry().install(defineExtension({ name: "sweep", tasks: [kid, parent(kid)] })), clock },
        ctx,
      );
    },
    start: async (harness) => {
      const root = await harness.root(ctx);
      if (!(await harness.storage.listTasks()).some((t) => t.kind === "sweep.group")) {
        const kid = child({ once: () => {} });
        await root.commit((tx) => tx.createTask(parent(kid), null), ctx);
      }
      harness.resume();
    },
    invariants: [
      async ({ storage }) => {
        const tasks = await storage.listTasks();
        const outcome = (kind: string) =>
          tasks.filter((t) => t.kind === kind).map((t) => (t.state as { outcome: { status: string } }).outcome.status);
        if (outcome("sweep.group").join() !== "completed") return `the group ended ${outcome("sweep.group").join()}`;
        if (outcome("sweep.child").sort().join() !== "aborted,aborted,failed")
          return `the children ended ${outcome("sweep.child").join()} (failFast must abort the sleepers)`;
      },
      ({ effects }) => (effects.size > 0 ? `a sleeper woke although failFast aborted it: ${[...effects.keys()].join(", ")}` : undefined),
    ],
  };
}

describe("crashSweep: a failFast group", () => {
  it("S3/S4: failFast holds at every commit boundary, also with a second crash during recovery", { timeout: 240_000 }, async () => {
    const result = await crashSweep(failFastGroup(), { double: { sample: 80, seed: 4 } });
    expect(result.single).toBe(2 * result.commits - 1);
    console.log(`crashSweep failFast group: ${result.commits} commits, ${result.worlds} crash worlds`);
  });
});

describe("crashSweep finds violations", () => {
  it("S3: an effect without a memo guard runs twice in some crash world, and the report names the world and its log", async () => {
    const careless: CrashScenario = {
      ...example12,
      name: "careless",
      open: (storage, clock, world) => {
        // Prints before its memo: a crash between the print and the memo commit prints again.
        const registry = createRegistry().install(
          defineExtension({
            name: "example",
            tasks: [
              {
                ...counterTask(() => {}),
                phases: {
                  tick: async (task: any, runtime: any, context: any) => {
                    const n = task.state.checkpoint.n;
                    world.once(`tick ${n}`);
                    if (n === task.input.to)
                      return runtime.commit(
                        () => ({ status: "terminal", outcome: { status: "completed", result: `counted to ${n}` } }),
                        context,
                      );
                    await runtime.sleepUntil(runtime.now() + 50, { phase: "tick", n: n + 1 }, context);
                  },
                },
              },
            ],
          }),
        );
        return Harness.open(storage, { registry, clock }, ctx);
      },
      invariants: [],
    };
    const error = await crashSweep(careless).catch((e: unknown) => e);
    expect(error).toBeInstanceOf(CrashSweepViolation);
    const violation = error as CrashSweepViolation;
    expect(violation.invariant).toBe("effects-at-most-once");
    expect(violation.crashes).toHaveLength(1);
    expect(violation.message).toMatch(/crashing right before commit \d+ breaks effects-at-most-once: effect "tick \d" happened 2 times/);
    expect(violation.log.some((line) => line.startsWith("-- crash right before commit"))).toBe(true);
  });
});
