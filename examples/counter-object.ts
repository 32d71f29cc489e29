/**
 * The seed's Example 12 on a Cloudflare Durable Object: the Worker module `npm run example:counter -- --edge`
 * runs in workerd. Each object name is one counter world with its own SQLite.
 *
 * Routes (on the object): `POST /start?to=5&abortAfter=tick%202` creates the counter task (and, on this
 * instance only, aborts the object right after printing that line); `/query` runs the seed's query;
 * `/wait?id=` answers when the task is terminal; `/task?id=` and `/alarm` show the record and the alarm.
 * Anything else is the client API of `HarnessObject` (`connectHarness(url)` over a WebSocket, `POST /rpc`).
 */

import { type DurableObjectState, HarnessObject } from "../src/cloudflare/index.ts";
import { createRegistry, BACKGROUND_CONTEXT as ctx, defineExtension } from "../src/index.ts";
import { counterTask, SEED_QUERY } from "./counter-task.ts";

export interface CounterEnv {
  /** Where a line is printed: a service outside the object (so it survives the crash), else the console. */
  PRINT?: { fetch(url: string, init: RequestInit): Promise<Response> };
  /** The heartbeat of the object's alarm while a task runs (default 30 s). */
  HEARTBEAT_MS?: string;
}

export class CounterObject extends HarnessObject<CounterEnv> {
  /** Which start of the object this instance is: a new one after every crash. */
  readonly instance = crypto.randomUUID();
  readonly #plan: { abortAfter?: string };

  constructor(state: DurableObjectState, env: CounterEnv) {
    const plan: { abortAfter?: string } = {};
    const print = async (line: string) => {
      // An object woken by its alarm does not know its name (workerd gives it with requests only): the id then.
      const text = `${state.id.name ?? state.id.toString()}: ${line}`;
      if (env.PRINT) await env.PRINT.fetch("http://print/", { method: "POST", body: text });
      else console.log(text);
      if (plan.abortAfter === line) state.abort(`the object crashes right after "${line}"`);
    };
    super(state, env, () => ({
      registry: createRegistry().install(defineExtension({ name: "example", tasks: [counterTask(print)] })),
      // Its pages start counters and read the seed's query (powers an object serves only when asked).
      powers: ["createTask", "query"],
      ...(env.HEARTBEAT_MS ? { heartbeatMs: Number(env.HEARTBEAT_MS) } : {}),
    }));
    this.#plan = plan;
  }

  override async fetch(request: Request): Promise<Response> {
    const url = new URL(request.url);
    // The client API answers for itself, also when the harness could not open (JSON errors, the failed status).
    if (!ROUTES.has(url.pathname)) return super.fetch(request);
    const id = Number(url.searchParams.get("id"));
    const reply = (value: object) => Response.json({ ...value, instance: this.instance, object: this.ctx.id.toString() });
    try {
      return await this.serve(async (harness) => {
        switch (url.pathname) {
          case "/start": {
            this.#plan.abortAfter = url.searchParams.get("abortAfter") ?? undefined;
            const root = await harness.root(ctx);
            const to = Number(url.searchParams.get("to") ?? 5);
            return reply({
              id: await root.commit(
                (tx) =>
                  tx.createTask(
                    counterTask(() => {}),
                    { to },
                  ),
                ctx,
              ),
            });
          }
          case "/query":
            return reply({ rows: await harness.storage.query(SEED_QUERY) });
          case "/wait":
            return reply({ task: await harness.waitForTask(id, ctx) });
          case "/task":
            return reply({ task: await harness.getTask(id, ctx) });
          default:
            return reply({ alarm: await this.ctx.storage.getAlarm() }); // /alarm
        }
      });
    } catch (error) {
      return this.errorResponse(error); // { error: { name, message } }; 503 when the harness could not open
    }
  }
}

/** The counter's own routes; anything else is the client API of `HarnessObject` (a WebSocket, `POST /rpc`). */
const ROUTES = new Set(["/start", "/query", "/wait", "/task", "/alarm"]);

/** The Worker: `/<name>/<route>` goes to the object `name`. */
export default {
  fetch(request: Request, env: CounterEnv & { COUNTER: DurableObjectNamespaceLike }): Promise<Response> {
    const url = new URL(request.url);
    const [, name, ...rest] = url.pathname.split("/");
    const stub = env.COUNTER.get(env.COUNTER.idFromName(decodeURIComponent(name || "counter")));
    return stub.fetch(new Request(new URL(`/${rest.join("/")}${url.search}`, url), request));
  },
};

interface DurableObjectNamespaceLike {
  idFromName(name: string): unknown;
  get(id: unknown): { fetch(request: Request): Promise<Response> };
}
