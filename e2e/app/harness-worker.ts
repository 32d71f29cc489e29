/// <reference lib="webworker" />
// A worker of the e2e page that serves a harness the way an app does (e2e/host.e2e.ts): the counter task,
// its own OPFS pool, and the options the worker's name asks for.
import { counterTask } from "../../examples/counter-task.ts";
import { serveHarness } from "../../src/browser/worker.ts";
import { createRegistry, BACKGROUND_CONTEXT as ctx, defineExtension, Harness, MemoryStorage } from "../../src/index.ts";

const options = JSON.parse(self.name || "{}") as { crashPoints?: boolean };
const extension = defineExtension({ name: "example", tasks: [counterTask(() => {})] });

const served = serveHarness({
  extensions: [extension],
  poolDirectory: ".e2e-host-pool",
  crashPoints: options.crashPoints,
  methods: {
    /** Listeners the host holds for the page's subscriptions. */
    listeners: () => served.listenerCount(),
    /** `resume()` on a read-only harness: the library's ReadOnlySession, thrown inside the worker. */
    resumeReadOnly: async () => {
      const viewer = await Harness.open(new MemoryStorage(), { registry: createRegistry().install(extension), readOnly: true }, ctx);
      viewer.resume();
    },
  },
});
