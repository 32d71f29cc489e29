/**
 * A Worker with one harness object per counter name. The Worker reaches its object by typed RPC (no HTTP):
 * `env.COUNTER.getByName(name).createTask(…)`; pages reach it over a WebSocket (`connectHarness(url)`).
 * The object keeps its own note in KV (`ctx.storage.put`) and reads the harness's tables with
 * `ctx.storage.sql.exec(…).one()`, beside the harness, in the same SQLite.
 *
 * Routes: `/<name>/start?to=5` creates the counter, `/<name>/task?id=` reads its record, `/<name>/status?id=`
 * its status from the harness's table (an app method of the object, by RPC too), `/<name>/note` counts the object's starts in its own KV; anything else goes to the object (the
 * client API). The Worker's RPC calls pass the object's doors like a page's: it turns on the powers it uses.
 */
import { createRegistry, defineExtension, defineTask } from "pi-durable-web";
import { HarnessObject } from "pi-durable-web/cloudflare";

/** The seed's counter: prints tick 1..to, one step per `TICK_MS`, each line at most once (a memo before it). */
const counter = (tickMs: number) =>
  defineTask<{ to: number }, { phase: "tick"; n: number }, string>({
    name: "app.counter",
    version: 1,
    initial: () => ({ phase: "tick", n: 1 }),
    phases: {
      tick: async (task, runtime, context) => {
        const n = task.state.checkpoint.n;
        if ((await runtime.memo(`printed-${n}`, context)) === undefined) {
          await runtime.memo(`printed-${n}`, true, context);
          console.log(`tick ${n}`);
        }
        if (n === task.input.to) {
          await runtime.commit(() => ({ status: "terminal", outcome: { status: "completed", result: `counted to ${n}` } }), context);
          return;
        }
        await runtime.sleepUntil(runtime.now() + tickMs, { phase: "tick", n: n + 1 }, context);
      },
    },
    abort: async (_task, runtime, context) => {
      await runtime.commit(() => ({ status: "terminal", outcome: { status: "aborted" } }), context);
    },
  });

export class CounterObject extends HarnessObject<Env> {
  constructor(ctx: DurableObjectState, env: Env) {
    super(ctx, env, () => ({
      registry: createRegistry().install(defineExtension({ name: "app", tasks: [counter(Number(env.TICK_MS))] })),
      powers: ["createTask"],
    }));
  }

  /** A task's status from the harness's table (the seed's kind of query), read with the runtime's own cursor. */
  taskStatus(id: number): { status: string; outcome: string | null; restarts: number | null } {
    return this.ctx.storage.sql
      .exec<{ status: string; outcome: string | null; restarts: number | null }>(
        "SELECT status, record ->> '$.state.outcome.status' AS outcome, record ->> '$.restarts' AS restarts FROM tasks WHERE id = ?",
        id,
      )
      .one();
  }

  /** The app's own state beside the harness: its KV and a read of the harness's table. */
  async note(): Promise<{ started: number; tasks: number }> {
    const started = ((await this.ctx.storage.get<number>("started")) ?? 0) + 1;
    await this.ctx.storage.put("started", started);
    const { n } = this.ctx.storage.sql.exec<{ n: number }>("SELECT count(*) AS n FROM tasks").one();
    return { started, tasks: n };
  }
}

export default {
  async fetch(request, env): Promise<Response> {
    const url = new URL(request.url);
    const [, name = "counter", route, ...rest] = url.pathname.split("/");
    const object = env.COUNTER.getByName(decodeURIComponent(name));
    if (route === "start") {
      const id = await object.createTask("app.counter", { to: Number(url.searchParams.get("to") ?? 5) });
      return Response.json({ id });
    }
    const id = Number(url.searchParams.get("id"));
    if (route === "task") return Response.json({ task: await object.getTask(id) }); // the client API by RPC, typed
    if (route === "status") return Response.json(await object.taskStatus(id)); // an app method by RPC
    if (route === "note") return Response.json(await object.note());
    return object.fetch(new Request(new URL(`/${[route, ...rest].join("/")}${url.search}`, url), request));
  },
} satisfies ExportedHandler<Env>;
