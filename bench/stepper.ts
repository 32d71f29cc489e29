import { defineTask } from "../src/index.ts";

/**
 * A bench task of `steps` checkpoint steps, one commit each, then it completes with the count. With
 * `beforeEffect`, each step but the last waits for `runtime.beforeEffect` after its commit, as an unsafe tool's
 * intent does before its effect (a no-op here).
 */
function stepTask(name: string, options: { beforeEffect?: boolean } = {}) {
  return defineTask<{ steps: number }, { phase: "step"; n: number }, number>({
    name,
    version: 1,
    initial: () => ({ phase: "step", n: 0 }),
    phases: {
      step: async (task, runtime, context) => {
        const n = task.state.checkpoint.n + 1;
        await runtime.commit(
          () =>
            n >= task.input.steps
              ? { status: "terminal", outcome: { status: "completed", result: n } }
              : { status: "running", checkpoint: { phase: "step", n } },
          context,
        );
        if (options.beforeEffect && n < task.input.steps) await runtime.beforeEffect(context); // the effect of step n would start here
      },
    },
    abort: async (_task, runtime, context) => runtime.commit(() => ({ status: "terminal", outcome: { status: "aborted" } }), context),
  });
}

/** The benches' task: `steps` checkpoint steps, one commit each, then it completes with the count. */
export const stepper = stepTask("bench.stepper");

/** The hand-over bench's effect task: each step waits for `runtime.beforeEffect` before its (no-op) effect. */
export const effectTask = stepTask("bench.effect", { beforeEffect: true });
