/// <reference lib="webworker" />
// The demo app's worker: it owns the OPFS database and runs the harness and the agent; the page talks to
// it with `connectHarness` (pi-durable-web/client). The contract with the page is ./protocol.ts.

import { opfsEnvs, serveHarness } from "../src/browser/worker.ts";
import { BACKGROUND_CONTEXT as ctx, type Harness, type Json, NotFound } from "../src/index.ts";
import { workerConfig } from "./config.ts";
import { demoExtension } from "./demo-tasks.ts";
import { createDemoModels, type DemoModels } from "./models.ts";
import type { DemoMethods } from "./protocol.ts";
import { filesExtension } from "./tools.ts";

// The page passes its DemoWorkerConfig as the worker's name: it must be known before the database opens.
const config = workerConfig();
const models = createDemoModels();
const envs = opfsEnvs();

serveHarness({
  extensions: [demoExtension, filesExtension(config.probeReplay === "safe" ? "safe" : "unsafe")],
  models: models.models,
  env: envs,
  settings: config.settings,
  autoResume: !config.paused,
  methods: demoMethods(models, envs),
});

/** The app methods of DemoMethods (`client.call(name, ...args)`); arguments are checked, they come from the page. */
function demoMethods(
  models: DemoModels,
  envs: ReturnType<typeof opfsEnvs>,
): Record<keyof DemoMethods, (harness: Harness, ...args: Json[]) => unknown> {
  const files = (harness: Harness, conversationId: Json) => {
    if (typeof conversationId !== "number" || !harness.conversationIds().includes(conversationId)) {
      throw new NotFound(`There is no conversation ${JSON.stringify(conversationId)}.`);
    }
    return envs(conversationId);
  };
  return {
    "models.list": () => models.list(),
    "models.configure": (_harness, provider) => models.configure(provider),
    "files.list": (harness, conversationId) => files(harness, conversationId).list(undefined, ctx),
    "files.read": (harness, conversationId, path) => files(harness, conversationId).read(String(path), ctx),
  };
}
