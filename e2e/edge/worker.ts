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

/** How long a lease lasts on an object named `short-…`, and on every other one. */
const SHORT_TTL_MS = 3_000;
const LONG_TTL_MS = 600_000;

class E2eObject extends HarnessObject<Env> {
  readonly #state: DurableObjectState;

  constructor(state: DurableObjectState, env: Env, ttlMs?: number) {
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
      ...(ttlMs === undefined ? {} : { follow: { authorize: () => true, ttlMs } }),
    }));
    this.#state = state;
  }

  override async fetch(request: Request): Promise<Response> {
    if (request.method === "POST" && new URL(request.url).pathname === "/abort") {
      this.#state.abort("e2e: the object was aborted");
    }
    return super.fetch(request);
  }
}

export class PlainObject extends E2eObject {
  constructor(state: DurableObjectState, env: Env) {
    super(state, env);
  }
}

export class LongLeaseObject extends E2eObject {
  constructor(state: DurableObjectState, env: Env) {
    super(state, env, LONG_TTL_MS);
  }
}

export class ShortLeaseObject extends E2eObject {
  constructor(state: DurableObjectState, env: Env) {
    super(state, env, SHORT_TTL_MS);
  }
}

interface Namespace {
  idFromName(name: string): unknown;
  get(id: unknown): { fetch(request: Request): Promise<Response> };
}

/** `/<name>/<rest>` goes to the object `name` as `/<rest>` (its host socket on `/`, `/follow`, `/abort`). */
export default {
  fetch(request: Request, env: { PLAIN: Namespace; LONG: Namespace; SHORT: Namespace }) {
    const url = new URL(request.url);
    const [, encoded = "e2e", ...rest] = url.pathname.split("/");
    const name = decodeURIComponent(encoded);
    url.pathname = `/${rest.join("/")}`;
    const namespace = name.startsWith("short-") ? env.SHORT : name.startsWith("follow-") ? env.LONG : env.PLAIN;
    return namespace.get(namespace.idFromName(name)).fetch(new Request(url, request));
  },
};
