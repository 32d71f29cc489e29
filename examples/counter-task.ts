import { defineTask, type TaskDefinition } from "../src/index.ts";

/**
 * Count to `to`, a tick every `everyMs` (default 50 ms). `declared`: this task's print is a declared effect, as with
 * the definition's own `declared` option (a page or test can ask for it per task of an app whose counter is plain).
 */
export type CounterInput = { to: number; everyMs?: number; declared?: boolean };
export type CounterCheckpoint = { phase: "tick"; n: number };

/**
 * The seed's Example 12 (S12): count 1..to. Each step is safe to rerun: it checks memo `printed-n` before
 * printing, then commits the next checkpoint together with when to run it (`sleepUntil`, 50 ms later, or `everyMs`).
 * `print` is where the example writes its line; tests and the demo pass their own.
 */
export function counterTask(
  print: (line: string) => void | Promise<void>,
  options: {
    /**
     * The print is a declared effect (`runtime.beforeEffect` right before it): under a followed lease it waits for the
     * object's acknowledgement of the memo, so no hand-over prints a tick twice (README "Close the tab").
     */
    declared?: boolean;
  } = {},
): TaskDefinition<CounterInput, CounterCheckpoint, string> {
  return defineTask<CounterInput, CounterCheckpoint, string>({
    name: "example.counter",
    version: 1,
    initial: () => ({ phase: "tick", n: 1 }),
    phases: {
      tick: async (task, runtime, context) => {
        const n = task.state.checkpoint.n;
        if ((await runtime.memo(`printed-${n}`, context)) === undefined) {
          await runtime.memo(`printed-${n}`, true, context);
          if (options.declared || task.input.declared === true) await runtime.beforeEffect(context);
          await print(`tick ${n}`);
          await runtime.crashPoint(`counter:after-tick-${n}`); // where the seed cuts it: printed, next step not stored
        }
        if (n === task.input.to) {
          await runtime.commit(() => ({ status: "terminal", outcome: { status: "completed", result: `counted to ${n}` } }), context);
          return;
        }
        await runtime.sleepUntil(runtime.now() + (task.input.everyMs ?? 50), { phase: "tick", n: n + 1 }, context);
      },
    },
    abort: async (_task, runtime, context) => {
      await runtime.commit(() => ({ status: "terminal", outcome: { status: "aborted", reason: "aborted by request" } }), context);
    },
  });
}

/** The seed's query over the tasks table (S11, S12). */
export const SEED_QUERY = `SELECT id, status, record ->> '$.state.checkpoint.n' AS n,
       record ->> '$.memos' AS memos, record ->> '$.restarts' AS restarts
FROM tasks;`;
