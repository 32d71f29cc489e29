/// <reference lib="webworker" />
// The demo app's worker: it owns the OPFS database and runs the harness and the agent; the page talks to
// it with `connectHarness` (pi-durable-web/client). The contract with the page is ./protocol.ts.

import { opfsEnvs, serveHarness } from "../src/browser/worker.ts";
import { workerConfig } from "./config.ts";
import { demoExtension } from "./demo-tasks.ts";
import { demoMethods } from "./methods.ts";
import { createDemoModels } from "./models.ts";
import { filesExtension, pageToolsExtension } from "./tools.ts";

// The page passes its DemoWorkerConfig as the worker's name: it must be known before the database opens.
const config = workerConfig();
const models = createDemoModels();
const envs = opfsEnvs();

serveHarness({
  extensions: [demoExtension, filesExtension(config.probeReplay === "safe" ? "safe" : "unsafe"), pageToolsExtension],
  models: models.models,
  env: envs,
  settings: config.settings,
  autoResume: !config.paused,
  methods: demoMethods(models, envs),
  ...(config.follow ? { follow: { url: config.follow } } : {}),
});
