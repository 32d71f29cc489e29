import { defineTask } from "../src/index.ts";

/** The benches' task: `steps` checkpoint steps, one commit each, then it completes with the count. */
export const stepper = defineTask<{ steps: number }, { phase: "step"; n: number }, number>({
  name: "bench.stepper",
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
    },
  },
  abort: async (_task, runtime, context) => runtime.commit(() => ({ status: "terminal", outcome: { status: "aborted" } }), context),
});
