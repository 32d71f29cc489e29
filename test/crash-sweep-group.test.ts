import { describe, expect, it } from "vitest";
import { type Batch, createRegistry, defineExtension, defineTask, Harness, MemoryStorage, StorageQuotaExceeded } from "../src/index.ts";
import { type CrashScenario, crashSweep, type SweepBackend } from "../src/testing/index.ts";
import { ctx } from "./support.ts";

const TASKS = 4;
const STEPS = 3;

/**
 * Group commit under crashes (decision 0026): TASKS tasks step at once, each step a memo-guarded effect and a
 * checkpoint, so their memos and checkpoints share transactions. Every boundary between two groups is a crash
 * point on both sides (a crash right before a group is stored is a crash inside it: none of it is there).
 */
function parallelSteps(): CrashScenario {
  const stepper = (world: { once(key: string): void }) =>
    defineTask<{ name: string }, { phase: "step"; n: number }, number>({
      name: "sweep.parallel",
      version: 1,
      initial: () => ({ phase: "step", n: 0 }),
      phases: {
        step: async (task, runtime, context) => {
          const n = task.state.checkpoint.n + 1;
          if ((await runtime.memo(`effect ${n}`, context)) === undefined) {
            await runtime.memo(`effect ${n}`, true, context);
            world.once(`${task.input.name} step ${n}`);
          }
          await runtime.commit(
            () =>
              n >= STEPS
                ? { status: "terminal", outcome: { status: "completed", result: n } }
                : { status: "running", checkpoint: { phase: "step", n } },
            context,
          );
        },
      },
      abort: async () => {},
    });
  return {
    name: "parallel steps",
    open: (storage, clock, world) =>
      Harness.open(
        storage,
        { registry: createRegistry().install(defineExtension({ name: "sweep", tasks: [stepper(world)] })), clock },
        ctx,
      ),
    start: async (harness) => {
      const root = await harness.root(ctx);
      if ((await harness.storage.listTasks()).length === 0) {
        const kind = stepper({ once: () => {} });
        await root.commit((tx) => {
          for (let i = 1; i <= TASKS; i++) tx.createTask(kind, { name: `t${i}` });
        }, ctx);
      }
      harness.resume();
    },
    invariants: [
      async ({ storage }) => {
        const tasks = await storage.listTasks();
        const results = tasks.map((task) => (task.state as { outcome?: { result?: unknown } }).outcome?.result);
        if (tasks.length !== TASKS || results.some((result) => result !== STEPS)) return `the tasks ended ${JSON.stringify(results)}`;
      },
      // Every effect at most once is built in (effects-at-most-once); a crash between a memo and its effect
      // may skip the effect (S3: the memo is written first), never repeat it.
    ],
  };
}

/**
 * One transaction in `every` that carries a step is refused (a full quota): the kernel retries it after a
 * backoff. (The app's own start-up commits are not refused: a page whose first commit fails shows the error.)
 */
function refusingBackend(every: number): SweepBackend & { refused: number } {
  const backend = {
    refused: 0,
    create: async () => refusing(new MemoryStorage()),
    fromImage: async (image: Uint8Array) => refusing(MemoryStorage.fromImage(image)),
  };
  function refusing(storage: MemoryStorage): MemoryStorage {
    const apply = storage.apply.bind(storage);
    let tries = 0;
    storage.apply = async (batch: Batch) => {
      const stepping = batch.tasks.some((task) => task.kind === "sweep.parallel" && task.state.status !== "pending");
      if (stepping && ++tries % every === 0) {
        backend.refused++;
        throw new StorageQuotaExceeded("The origin's storage quota is exhausted.");
      }
      return apply(batch);
    };
    return storage;
  }
  return backend;
}

/** What the scenario commits with every commit alone: the create, and per task and step two memos' worth and a checkpoint. */
const UNGROUPED = 1 + TASKS * STEPS * 2;

describe("crashSweep: group commit", () => {
  for (const storage of ["memory", "sqlite"] as const) {
    it(`S3/S4: parallel tasks whose commits share transactions keep every invariant at every group boundary (${storage})`, {
      timeout: 240_000,
    }, async () => {
      const result = await crashSweep(parallelSteps(), { storage, double: { sample: storage === "memory" ? 60 : 20, seed: 26 } });
      expect(result.commits).toBeLessThan(UNGROUPED);
      expect(result.single).toBe(2 * result.commits - 1);
      console.log(`crashSweep parallel steps on ${storage}: ${result.commits} commits (${UNGROUPED} alone), ${result.worlds} crash worlds`);
    });
  }

  it("S3/S4/B9: refused groups (one transaction in three refused) are retried without a commit stored twice, crashed anywhere", {
    timeout: 240_000,
  }, async () => {
    const backend = refusingBackend(3);
    const result = await crashSweep(parallelSteps(), { storage: backend, double: { sample: 40, seed: 9 } });
    expect(backend.refused).toBeGreaterThan(result.worlds);
    console.log(
      `crashSweep parallel steps with refusals: ${result.commits} commits, ${result.worlds} crash worlds, ${backend.refused} refused`,
    );
  });
});
