import fc from "fast-check";
import { describe, it } from "vitest";
import { createRegistry, BACKGROUND_CONTEXT as ctx, defineExtension, defineTask, Harness, type TaskDefinition } from "../src/index.ts";
import { type CrashScenario, crashSweep } from "../src/testing/index.ts";

// Random task programs with random crash points (issue 9). Reproduce a failure with PROPERTY_SEED=<seed>.

type Step =
  | { t: "effect"; key: string }
  | { t: "sleep"; ms: number }
  | { t: "fail" }
  | { t: "children"; policy: "allSettled" | "failFast"; programs: Step[][] };
type Program = { steps: Step[] };
type Checkpoint = { phase: "step"; i: number };

const leaf: fc.Arbitrary<Step> = fc.oneof(
  fc.record({ t: fc.constant("effect" as const), key: fc.constantFrom("a", "b", "c") }),
  fc.record({ t: fc.constant("sleep" as const), ms: fc.integer({ min: 0, max: 500 }) }),
  { arbitrary: fc.record({ t: fc.constant("fail" as const) }), weight: 1 },
);
const steps = (depth: number): fc.Arbitrary<Step[]> =>
  fc.array(
    depth === 0
      ? leaf
      : fc.oneof(
          { arbitrary: leaf, weight: 3 },
          {
            arbitrary: fc.record({
              t: fc.constant("children" as const),
              policy: fc.constantFrom("allSettled" as const, "failFast" as const),
              programs: fc.array(steps(depth - 1), { minLength: 1, maxLength: 3 }),
            }),
            weight: 1,
          },
        ),
    { minLength: 1, maxLength: 4 },
  );

function programTask(once: (key: string) => void): TaskDefinition<Program, Checkpoint, string> {
  const task: TaskDefinition<Program, Checkpoint, string> = defineTask<Program, Checkpoint, string>({
    name: "prop.program",
    version: 1,
    initial: () => ({ phase: "step", i: 0 }),
    phases: {
      step: async (record, runtime, context) => {
        const i = record.state.checkpoint.i;
        const step = record.input.steps[i];
        const next = { phase: "step" as const, i: i + 1 };
        if (!step) return runtime.commit(() => ({ status: "terminal", outcome: { status: "completed", result: `ran ${i}` } }), context);
        switch (step.t) {
          case "effect":
            if ((await runtime.memo(`${i}`, context)) === undefined) {
              await runtime.memo(`${i}`, true, context);
              once(`task ${record.id} step ${i} (${step.key})`);
            }
            return runtime.commit(() => ({ status: "running", checkpoint: next }), context);
          case "sleep":
            return runtime.sleepUntil(runtime.now() + step.ms, next, context);
          case "fail":
            return runtime.commit(
              () => ({ status: "terminal", outcome: { status: "failed", error: { message: `step ${i} fails` } } }),
              context,
            );
          case "children":
            return runtime.commit((tx) => {
              const on = step.programs.map((steps) => tx.createTask(task, { steps }));
              return { status: "waiting", checkpoint: next, on, policy: step.policy };
            }, context);
        }
      },
    },
    abort: async (_r, runtime, context) =>
      runtime.commit(() => ({ status: "terminal", outcome: { status: "aborted", reason: "owner failed fast" } }), context),
  });
  return task;
}

function scenario(program: Program): CrashScenario {
  return {
    name: `program ${JSON.stringify(program)}`,
    open: (storage, clock, world) =>
      Harness.open(
        storage,
        { registry: createRegistry().install(defineExtension({ name: "prop", tasks: [programTask((key) => world.once(key))] })), clock },
        ctx,
      ),
    start: async (harness) => {
      const root = await harness.root(ctx);
      if ((await harness.storage.listTasks()).length === 0)
        await root.commit(
          (tx) =>
            tx.createTask(
              programTask(() => {}),
              program,
            ),
          ctx,
        );
      harness.resume();
    },
  };
}

describe("property: random task programs with random crash points", () => {
  it("S3/S4/S6: every program keeps the invariants with one or two crashes anywhere", { timeout: 300_000 }, async () => {
    const seed = Number(process.env.PROPERTY_SEED ?? 20261201);
    let worlds = 0;
    try {
      await fc.assert(
        fc.asyncProperty(steps(2), fc.integer({ min: 1, max: 1_000_000 }), async (program, crashSeed) => {
          worlds += (
            await crashSweep(scenario({ steps: program }), {
              single: { sample: 3, seed: crashSeed },
              double: { sample: 2, seed: crashSeed },
            })
          ).worlds;
        }),
        { seed, numRuns: 60 },
      );
      console.log(`property test: 60 random programs, ${worlds} crash worlds (seed ${seed})`);
    } catch (error) {
      console.log(`property test: seed ${seed}`);
      throw new Error(`Property failed with PROPERTY_SEED=${seed} (rerun with it to reproduce).\n${String((error as Error).message)}`, {
        cause: error,
      });
    }
  });
});
