import { counterTask } from "../examples/counter-task.ts";
import { defineExtension, defineTask } from "../src/index.ts";
import { workerConfig } from "./config.ts";

/**
 * The demo's own tasks. A task's printed lines are its side effects: they go to the page over a broadcast
 * channel (the page keeps a transcript across reloads), at most once — exactly the seed's `console.log`.
 */
const printChannel = new BroadcastChannel("pi-durable-web:print");
/** The page's tab id, from the worker's name: every tab hears the broadcast, only this worker's tab records it. */
const { tab } = workerConfig();

export function print(line: string, taskId?: number): void {
  printChannel.postMessage({ line, taskId, tab });
}

/** A phase that never makes progress until released: each reload in it counts a restart (S6 demo). */
const stall = defineTask<{ label?: string }, { phase: "stall" }, string>({
  name: "demo.stall",
  version: 1,
  initial: () => ({ phase: "stall" }),
  phases: {
    stall: async (task, runtime) => {
      print(`stall: run ${(task.restarts ?? 0) + 1}`, task.id);
      await new Promise((resolve) => runtime.signal.addEventListener("abort", resolve));
      throw new Error("stopped");
    },
  },
  abort: async (_task, runtime, context) => runtime.commit(() => ({ status: "terminal", outcome: { status: "aborted" } }), context),
});

export const demoExtension = defineExtension({
  name: "demo",
  tasks: [counterTask((line) => print(line)), stall],
});
