/**
 * A two-place scenario made of effect-free steps under the lease (decision 0088): a task walks 1..TO, each step a memo
 * write (`printed-n`, before its tick is printed) and a checkpoint commit (`running`, n + 1). Both are fenced commits
 * of a live task whose status stays, so with deferring on (decision 0081) they write their log row only and most crash
 * points fall while task rows wait in memory. The tab walks to LEAVE_AT and leaves there (its step waits until the
 * hand-over cuts it off); the object walks the rest. A lost acknowledged memo (a missing replay) prints a tick twice.
 */
import { waitFor } from "../src/base/context.ts";
import { createRegistry, BACKGROUND_CONTEXT as ctx, defineExtension, defineTask, Harness, type TaskDefinition } from "../src/index.ts";
import type { CrashWorldView, SweepWorld } from "../src/testing/index.ts";
import type { Place, TwoPlaceScenario } from "../src/testing/two-places/sweep.ts";
import { ticksInOrder } from "./counter-scenario.ts";

const TO = 14;
const LEAVE_AT = 7;

interface WalkerState {
  /** Set when the tab's step LEAVE_AT starts: the tab hands over now. */
  leave?: boolean;
}

type Checkpoint = { phase: "step"; n: number };

function walker(place: Place, world: SweepWorld<WalkerState>): TaskDefinition<{ to: number }, Checkpoint, string> {
  return defineTask<{ to: number }, Checkpoint, string>({
    name: "sweep.walker",
    version: 1,
    initial: () => ({ phase: "step", n: 1 }),
    phases: {
      step: async (task, runtime, context) => {
        const n = task.state.checkpoint.n;
        if (place === "tab" && n === LEAVE_AT) {
          world.state.leave = true; // the tab closes now: this step is cut off by the hand-over, the object runs it
          await waitFor(new Promise<never>(() => {}), context);
        }
        if ((await runtime.memo(`printed-${n}`, context)) === undefined) {
          await runtime.memo(`printed-${n}`, true, context);
          world.once(`tick ${n}`);
          world.log(`tick ${n}`);
        }
        if (n === task.input.to) {
          await runtime.commit(() => ({ status: "terminal", outcome: { status: "completed", result: `walked to ${n}` } }), context);
          return;
        }
        await runtime.commit(() => ({ status: "running", checkpoint: { phase: "step", n: n + 1 } }), context);
      },
    },
    abort: async (_task, runtime, context) => {
      await runtime.commit(() => ({ status: "terminal", outcome: { status: "aborted", reason: "aborted by request" } }), context);
    },
  });
}

/** The walker ended, walked to TO. */
async function walked({ storage }: CrashWorldView<WalkerState>): Promise<string | undefined> {
  const [task] = await storage.listTasks();
  if (task?.state.status !== "terminal" || (task.state.outcome as { result?: unknown }).result !== `walked to ${TO}`)
    return `the walker ended ${JSON.stringify(task?.state)}`;
}

export const walkerTurn: TwoPlaceScenario<WalkerState> = {
  name: "a walk of effect-free steps handed over half-way",
  world: () => ({}),
  open: (place, storage, clock, lease, world) =>
    Harness.open(
      storage,
      { registry: createRegistry().install(defineExtension({ name: "sweep", tasks: [walker(place, world)] })), clock, lease },
      ctx,
    ),
  start: async (harness, world) => {
    const root = await harness.root(ctx);
    if ((await harness.storage.listTasks()).length === 0) await root.commit((tx) => tx.createTask(walker("tab", world), { to: TO }), ctx);
  },
  leaveWhen: (harness, world) => world.state.leave === true || harness.quiet,
  invariants: [walked, ticksInOrder],
};
