import { counterTask } from "../examples/counter-task.ts";
import { hostEndpoint } from "../src/host/endpoint.ts";
import { createHost } from "../src/host/host.ts";
import { createRegistry, defineExtension, type Storage } from "../src/index.ts";
import { createManualClock } from "../src/testing/clock.ts";
import { ScriptedModels } from "./agent-support.ts";
import { sqliteMemoryBackend } from "./support.ts";

/** A host on a fresh SQLite database with the counter task, an app method `echo` and a root conversation. */
export async function served(models = new ScriptedModels()) {
  const storage: Storage = await sqliteMemoryBackend.create();
  const host = createHost({
    database: "doors",
    openStorage: async () => storage,
    harness: {
      registry: createRegistry().install(defineExtension({ name: "example", tasks: [counterTask(() => {})] })),
      models: models.api,
      clock: createManualClock(1_000),
      resume: true,
    },
    methods: { echo: (_harness, value) => value },
    crashPoints: false,
    now: () => 0,
  });
  const harness = await host.ready;
  const root = await host.service.rootConversation({ model: "faux/faux-1" });
  const image = async () => (await storage.exportImage()).join(",");
  return { ...host, harness, root, storage, image, endpoint: hostEndpoint(host.service), models };
}
