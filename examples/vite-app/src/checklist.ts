import { defineExtension, defineTask } from "pi-durable-web";

export type ChecklistInput = { steps: number };
export type ChecklistCheckpoint = { phase: "step"; n: number };

/**
 * The app's own task: works through `steps` steps. Each step appends an `app.step` entry in the same commit
 * as the next checkpoint, so a step is recorded exactly once however often the tab reloads. The crash point
 * after each step lets a test cut the worker exactly there.
 */
export const checklist = defineTask<ChecklistInput, ChecklistCheckpoint, string>({
  name: "app.checklist",
  version: 1,
  initial: () => ({ phase: "step", n: 1 }),
  phases: {
    step: async (task, runtime, context) => {
      const n = task.state.checkpoint.n;
      await runtime.commit((tx) => {
        tx.appendEntry({ kind: "app.step", payload: { n } });
        if (n === task.input.steps) return { status: "terminal", outcome: { status: "completed", result: `${n} steps done` } };
        return { status: "running", checkpoint: { phase: "step", n: n + 1 } };
      }, context);
      await runtime.crashPoint(`checklist:after-step-${n}`);
    },
  },
  abort: async (_task, runtime, context) => {
    await runtime.commit(() => ({ status: "terminal", outcome: { status: "aborted" } }), context);
  },
});

export const app = defineExtension({ name: "app", tasks: [checklist] });
