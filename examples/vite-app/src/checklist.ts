import { defineExtension, defineTask } from "pi-durable-web";

/** `memo: false` plants a bug for the crash sweep's own test: the step's side effect outside a memo. */
export type ChecklistInput = { steps: number; memo?: boolean };
export type ChecklistCheckpoint = { phase: "step"; n: number };

/**
 * The app's own task: works through `steps` steps. Each step tells the world once that it ran (a side effect,
 * here a console line: the memo before it makes a rerun skip it), then appends an `app.step` entry in the same
 * commit as the next checkpoint. The crash point after each step lets a test cut the worker exactly there.
 */
export const checklist = defineTask<ChecklistInput, ChecklistCheckpoint, string>({
  name: "app.checklist",
  version: 1,
  initial: () => ({ phase: "step", n: 1 }),
  phases: {
    step: async (task, runtime, context) => {
      const n = task.state.checkpoint.n;
      if (task.input.memo === false) console.log(`effect: checklist step ${n}`);
      else if ((await runtime.memo(`told-${n}`, context)) === undefined) {
        await runtime.memo(`told-${n}`, true, context); // memo before the side effect: a rerun skips it
        console.log(`effect: checklist step ${n}`);
      }
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
export type ReminderCheckpoint = { phase: "wait" } | { phase: "remind" };

/** A task that sleeps durably (`sleepUntil`, also across a reload) for `afterMs`, then reminds once. */
export const reminder = defineTask<{ afterMs: number }, ReminderCheckpoint, string>({
  name: "app.reminder",
  version: 1,
  initial: () => ({ phase: "wait" }),
  phases: {
    wait: async (task, runtime, context) => {
      await runtime.sleepUntil(runtime.now() + task.input.afterMs, { phase: "remind" }, context);
    },
    remind: async (_task, runtime, context) => {
      if ((await runtime.memo("reminded", context)) === undefined) {
        await runtime.memo("reminded", true, context);
        console.log("effect: reminder");
      }
      await runtime.commit(() => ({ status: "terminal", outcome: { status: "completed", result: "reminded" } }), context);
    },
  },
  abort: async (_task, runtime, context) => {
    await runtime.commit(() => ({ status: "terminal", outcome: { status: "aborted" } }), context);
  },
});

export const app = defineExtension({ name: "app", tasks: [checklist, reminder] });
