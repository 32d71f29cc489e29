/**
 * The demo's harness on a Cloudflare Durable Object (`npm run start:edge`): the same extensions, the offline
 * demo model and the client API the demo page uses, served by `HarnessObject` over a WebSocket. Files live in
 * the object's memory (an eviction loses them; the transcript and tasks are in its SQLite). Printed lines go
 * to the object's console (workerd's output), since an object has no BroadcastChannel to the page.
 */
import { counterTask } from "../examples/counter-task.ts";
import { ALL_POWERS, type DurableObjectState, HarnessObject } from "../src/cloudflare/index.ts";
import { createRegistry, defineExtension, memoryEnvs } from "../src/index.ts";
import { demoMethods } from "./methods.ts";
import { createDemoModels } from "./models.ts";
import { filesExtension, pageToolsExtension } from "./tools.ts";

export class DemoObject extends HarnessObject {
  constructor(state: DurableObjectState, env: unknown) {
    const models = createDemoModels();
    const envs = memoryEnvs();
    super(state, env, () => ({
      registry: createRegistry()
        .install(defineExtension({ name: "demo", tasks: [counterTask((line) => console.log(line))] }))
        .install(filesExtension("unsafe"))
        .install(pageToolsExtension),
      models: models.models,
      env: envs,
      // The demo's page does everything a page can (tasks, SQL, models, files): a demo to run locally. An app on
      // the internet lists the powers its pages need, and checks its callers (README: "Who may call what").
      powers: ALL_POWERS,
      methods: demoMethods(models, envs),
    }));
  }
}

/** Every connection goes to one object (one demo database), named by the path: `/demo` by default. */
export default {
  fetch(
    request: Request,
    env: { DEMO: { idFromName(name: string): unknown; get(id: unknown): { fetch(request: Request): Promise<Response> } } },
  ) {
    const name = new URL(request.url).pathname.split("/")[1] || "demo";
    return env.DEMO.get(env.DEMO.idFromName(name)).fetch(request);
  },
};
