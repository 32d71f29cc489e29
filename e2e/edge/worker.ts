/**
 * The Worker that e2e tests run in workerd next to the page (e2e/support/edge.ts): the demo's harness object
 * (worker/edge-object.ts's extensions, models and methods), except that the counter prints through the PRINT
 * service binding (a print is a side effect outside the object: the Node side records it, so it survives the
 * object's crash as a real one would), crash points are on, and `POST /<name>/abort` aborts the object
 * (`ctx.abort()`: the crash of an object, its committed writes kept).
 */
import { counterTask } from "../../examples/counter-task.ts";
import { ALL_POWERS, type DurableObjectState, HarnessObject } from "../../src/cloudflare/index.ts";
import { createRegistry, defineExtension, memoryEnvs } from "../../src/index.ts";
import { demoMethods } from "../../worker/methods.ts";
import { createDemoModels } from "../../worker/models.ts";
import { filesExtension, pageToolsExtension } from "../../worker/tools.ts";

interface Env {
  PRINT: { fetch(url: string, init: RequestInit): Promise<Response> };
}

export class E2eObject extends HarnessObject<Env> {
  readonly #state: DurableObjectState;

  constructor(state: DurableObjectState, env: Env) {
    const models = createDemoModels();
    const envs = memoryEnvs();
    const print = async (line: string) => void (await env.PRINT.fetch("http://print/", { method: "POST", body: line }));
    super(state, env, () => ({
      registry: createRegistry()
        .install(defineExtension({ name: "demo", tasks: [counterTask(print)] }))
        .install(filesExtension("unsafe"))
        .install(pageToolsExtension),
      models: models.models,
      env: envs,
      powers: ALL_POWERS,
      methods: demoMethods(models, envs),
      crashPoints: true,
    }));
    this.#state = state;
  }

  override async fetch(request: Request): Promise<Response> {
    if (request.method === "POST" && new URL(request.url).pathname.endsWith("/abort")) {
      this.#state.abort("e2e: the object was aborted");
    }
    return super.fetch(request);
  }
}

/** `/<name>/…` goes to the object `name` (a socket on any path of it). */
export default {
  fetch(
    request: Request,
    env: { OBJECT: { idFromName(name: string): unknown; get(id: unknown): { fetch(r: Request): Promise<Response> } } },
  ) {
    const name = new URL(request.url).pathname.split("/")[1] || "e2e";
    return env.OBJECT.get(env.OBJECT.idFromName(name)).fetch(request);
  },
};
