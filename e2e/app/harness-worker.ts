/// <reference lib="webworker" />
// A worker of the e2e page that serves a harness the way an app does (e2e/host.e2e.ts): the counter task,
// its own OPFS pool, and the options the worker's name asks for.
import { counterTask } from "../../examples/counter-task.ts";
import { serveHarness } from "../../src/browser/worker.ts";
import { createRegistry, BACKGROUND_CONTEXT as ctx, defineExtension, defineTask, Harness, MemoryStorage } from "../../src/index.ts";

const options = JSON.parse(self.name || "{}") as { crashPoints?: boolean; tabHook?: boolean };
/** With `tabHook`: how the authorize hook answers another tab's `onStatus` (e2e/tabs-refused.e2e.ts, decision 0132). */
let tabAnswer: "allow" | "refuse" | "throw" = "allow";
/** Holds its invocation without committing: the live work a reload leaves `running` (e2e/host.e2e.ts, S4). */
const stall = defineTask<null, { phase: "stall" }, null>({
  name: "example.stall",
  version: 1,
  initial: () => ({ phase: "stall" }),
  phases: { stall: (_task, runtime) => new Promise<void>((resolve) => runtime.signal.addEventListener("abort", () => resolve())) },
  abort: async () => {},
});
const extension = defineExtension({ name: "example", tasks: [counterTask(() => {}), stall] });

const served = serveHarness({
  extensions: [extension],
  poolDirectory: ".e2e-host-pool",
  crashPoints: options.crashPoints,
  ...(options.tabHook
    ? {
        authorize: (caller: { from: string }, call: { method: string }) => {
          if (caller.from !== "tab" || call.method !== "onStatus") return true;
          if (tabAnswer === "throw") throw new Error("the e2e permission store is down");
          return tabAnswer === "allow";
        },
      }
    : {}),
  methods: {
    /** How the hook answers another tab's status subscription from now on (with `tabHook`). */
    tabAnswer: async (_harness, answer) => {
      tabAnswer = answer as typeof tabAnswer;
    },
    /** Creates `count` stall tasks in one commit (they run at once: scheduling resumes on its own). */
    stall: async (harness, count) => {
      const root = await harness.root(ctx);
      await root.commit((tx) => {
        for (let index = 0; index < Number(count); index++) tx.createTask(stall, null);
      }, ctx);
    },
    /** Listeners the host holds for the page's subscriptions. */
    listeners: () => served.listenerCount(),
    /** `resume()` on a read-only harness: the library's ReadOnlySession, thrown inside the worker. */
    resumeReadOnly: async () => {
      const viewer = await Harness.open(new MemoryStorage(), { registry: createRegistry().install(extension), readOnly: true }, ctx);
      viewer.resume();
    },
  },
});
