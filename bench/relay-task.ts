import { defineTask } from "../src/index.ts";

/**
 * The hand-over bench's tasks (bench/handover.ts), the same on the tab and on the object.
 * - `bench.relay`: step n prints `n` (where: the place's own `print`), then commits step n + 1 at once; done at `to`.
 * - `bench.effect` (bench/stepper.ts): each step commits its checkpoint and waits for `runtime.beforeEffect` before
 *   its effect: under a tab's takeover lease, the object's acknowledgement.
 */
export function relayTask(print: (n: number) => void | Promise<void>) {
  return defineTask<{ to: number }, { phase: "step"; n: number }, number>({
    name: "bench.relay",
    version: 1,
    initial: () => ({ phase: "step", n: 1 }),
    phases: {
      step: async (task, runtime, context) => {
        const n = task.state.checkpoint.n;
        await print(n);
        await runtime.commit(
          () =>
            n >= task.input.to
              ? { status: "terminal", outcome: { status: "completed", result: n } }
              : { status: "running", checkpoint: { phase: "step", n: n + 1 } },
          context,
        );
      },
    },
    abort: async (_task, runtime, context) => runtime.commit(() => ({ status: "terminal", outcome: { status: "aborted" } }), context),
  });
}
