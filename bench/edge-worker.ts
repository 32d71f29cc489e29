/**
 * The Worker of the edge benchmark (bench/edge.ts), run in workerd. `/<name>/<route>` goes to the object `name`.
 * - `/raw?steps=N`: N single-row UPDATE commits, each its own transaction, through the same facade.
 * - `/direct?steps=N`: the same commits on the object's own API (`transactionSync` + `sql.exec`), no facade.
 * - `/kernel?steps=N`: one task commits N checkpoints; answers when it is terminal.
 * - `/hang`: a task that prints `step` and stays in its phase (the object is then aborted with `/abort`).
 * - `/ping`: nothing (the round trip, and the request that starts an aborted object again).
 */

import { DurableObjectDatabase, type DurableObjectState, HarnessObject } from "../src/cloudflare/index.ts";
import { createRegistry, BACKGROUND_CONTEXT as ctx, defineExtension, defineTask, type Harness } from "../src/index.ts";
import { stepper } from "./stepper.ts";

interface Env {
  PRINT: { fetch(url: string, init: RequestInit): Promise<Response> };
  BENCH: { idFromName(name: string): unknown; get(id: unknown): { fetch(request: Request): Promise<Response> } };
}

/** The baselines' row: a JSON record as large as the stepper task's own at step `n`. */
function taskRecordText(steps: number, n: number): string {
  const record = { id: 2, conversationId: 1, kind: stepper.name, version: 1, input: { steps }, background: false, abortRequested: false };
  return JSON.stringify({ ...record, startedAt: 0, state: { status: "running", checkpoint: { phase: "step", n } } });
}

function hanger(env: Env) {
  return defineTask<null, { phase: "step" }, string>({
    name: "bench.hanger",
    version: 1,
    initial: () => ({ phase: "step" }),
    phases: {
      step: async (task, runtime, context) => {
        await env.PRINT.fetch("http://print/", { method: "POST", body: `step with restarts ${task.restarts ?? 0}` });
        if (!task.restarts) await new Promise(() => {}); // in its phase until the object is aborted
        await runtime.commit(() => ({ status: "terminal", outcome: { status: "completed", result: "resumed" } }), context);
      },
    },
    abort: async () => {},
  });
}

export class BenchObject extends HarnessObject<Env> {
  constructor(state: DurableObjectState, env: Env) {
    super(state, env, () => ({ registry: createRegistry().install(defineExtension({ name: "bench", tasks: [stepper, hanger(env)] })) }));
  }

  override async fetch(request: Request): Promise<Response> {
    const url = new URL(request.url);
    const steps = Number(url.searchParams.get("steps"));
    return this.serve(async (harness: Harness) => {
      switch (url.pathname) {
        case "/raw": {
          const db = new DurableObjectDatabase(this.ctx.storage);
          await db.exec(
            "CREATE TABLE IF NOT EXISTS raw (id INTEGER PRIMARY KEY, record TEXT NOT NULL); INSERT OR REPLACE INTO raw VALUES (1, '{}')",
          );
          for (let n = 0; n < steps; n++) {
            const text = taskRecordText(steps, n);
            await db.transaction((tx) => tx.run("UPDATE raw SET record = ? WHERE id = 1", text));
          }
          return new Response("ok");
        }
        case "/direct": {
          // What an app writes without the facade: the object's own API, one statement per commit.
          const { sql } = this.ctx.storage;
          sql.exec("CREATE TABLE IF NOT EXISTS direct (id INTEGER PRIMARY KEY, record TEXT NOT NULL)");
          sql.exec("INSERT OR REPLACE INTO direct VALUES (1, '{}')");
          for (let n = 0; n < steps; n++) {
            const text = taskRecordText(steps, n);
            this.ctx.storage.transactionSync(() => sql.exec("UPDATE direct SET record = ? WHERE id = 1", text));
            await undefined; // one turn per commit, as the other two routes take at least
          }
          return new Response("ok");
        }
        case "/kernel": {
          const root = await harness.root(ctx);
          const id = await root.commit((tx) => tx.createTask(stepper, { steps }), ctx);
          const done = await harness.waitForTask(id, ctx);
          return Response.json(done.state);
        }
        case "/hang": {
          const root = await harness.root(ctx);
          await root.commit((tx) => tx.createTask(hanger(this.env), null), ctx);
          return new Response("ok");
        }
        case "/abort":
          this.ctx.abort("bench: crash");
          return new Response("unreachable");
        default:
          return new Response("ok");
      }
    });
  }
}

export default {
  fetch(request: Request, env: Env): Promise<Response> {
    const url = new URL(request.url);
    const [, name, ...rest] = url.pathname.split("/");
    return env.BENCH.get(env.BENCH.idFromName(name!)).fetch(new Request(new URL(`/${rest.join("/")}${url.search}`, url), request));
  },
};
