/**
 * The Worker the edge tests run in workerd. `/<object>/<name>/<route>` goes to the Durable Object `name` of
 * that class. Objects print through the PRINT service binding, which the Node side of the test records: a
 * print is a side effect outside the object, so it survives the object's crash as a real one would.
 */
import { counterTask, SEED_QUERY } from "../../examples/counter-task.ts";
import { BACKGROUND_CONTEXT as BACKGROUND, createRegistry, defineExtension, defineTask, type Json } from "../../src/index.ts";
import { DurableObjectDatabase, HarnessObject, type DurableObjectState } from "../../src/cloudflare/index.ts";
import { SqliteStorage } from "../../src/storage/sqlite/storage.ts";
import { storageConformance } from "../../src/testing/storage-conformance.ts";

interface Env {
  PRINT: { fetch(url: string, init: RequestInit): Promise<Response> };
  [binding: string]: unknown;
}

interface Namespace {
  idFromName(name: string): unknown;
  get(id: unknown): { fetch(request: Request): Promise<Response> };
}

async function print(env: Env, ctx: DurableObjectState, line: string): Promise<void> {
  // An object woken by its alarm does not know its name (workerd gives it only with a request): the id then.
  await env.PRINT.fetch("http://print/", { method: "POST", body: `${ctx.id.name ?? ctx.id.toString()}: ${line}` });
}

function json(value: unknown, status = 200): Response {
  return new Response(JSON.stringify(value), { status, headers: { "content-type": "application/json" } });
}

function failure(error: unknown): Response {
  const e = error as Error;
  return json({ name: e?.name, message: e?.message ?? String(error) }, 500);
}

/** Storage checks straight on the facade, without a harness. */
export class ConformanceObject {
  readonly #ctx: DurableObjectState;
  constructor(ctx: DurableObjectState) {
    this.#ctx = ctx;
  }

  async fetch(request: Request): Promise<Response> {
    const url = new URL(request.url);
    const open = () => SqliteStorage.open(new DurableObjectDatabase(this.#ctx.storage), "durable-object");
    try {
      if (url.pathname === "/case") {
        const cases = storageConformance({ create: open, exportsImage: false });
        await cases[Number(url.searchParams.get("index"))]!.run();
        return json({ ok: true });
      }
      if (url.pathname === "/query") {
        const storage = await open();
        const { sql, params } = (await request.json()) as { sql: string; params?: Json[] };
        return json({ rows: await storage.query(sql, ...(params ?? [])) });
      }
      if (url.pathname === "/apply") {
        const storage = await open();
        await storage.apply((await request.json()) as never);
        return json({ ok: true });
      }
      if (url.pathname === "/database") {
        // Raw facade calls: [method, sql, ...params] in order; BLOBs travel as { bytes: number[] }.
        const db = new DurableObjectDatabase(this.#ctx.storage, { readOnly: url.searchParams.has("readOnly") });
        const results: unknown[] = [];
        for (const [method, sql, ...params] of (await request.json()) as Array<[string, string, ...unknown[]]>) {
          const values = params.map((p) => (p && typeof p === "object" && "bytes" in p ? new Uint8Array((p as { bytes: number[] }).bytes) : typeof p === "string" && p.endsWith("n") && /^-?\d+n$/.test(p) ? BigInt(p.slice(0, -1)) : p));
          try {
            const result = await (db as unknown as Record<string, (...args: unknown[]) => Promise<unknown>>)[method]!(sql, ...values);
            results.push({ ok: encode(result) });
          } catch (error) {
            results.push({ error: (error as Error).name, message: (error as Error).message });
          }
        }
        return json(results);
      }
      return json({ error: "no route" }, 404);
    } catch (error) {
      return failure(error);
    }
  }
}

function encode(value: unknown): unknown {
  if (value instanceof Uint8Array) return { bytes: [...value] };
  if (Array.isArray(value)) return value.map(encode);
  if (value && typeof value === "object") return Object.fromEntries(Object.entries(value).map(([k, v]) => [k, encode(v)]));
  return value;
}

/** The seed's Example 12 on an object; `/start?abortAfter=tick%202` aborts the object right after that line. */
export class CounterObject extends HarnessObject<Env> {
  readonly #plan: { abortAfter?: string };
  /** Which start of the object this instance is (a fresh one after every crash). */
  readonly instance = crypto.randomUUID();

  constructor(ctx: DurableObjectState, env: Env) {
    const plan: { abortAfter?: string } = {};
    super(ctx, env, () => ({
      registry: createRegistry().install(
        defineExtension({
          name: "example",
          tasks: [
            counterTask(async (line) => {
              await print(env, ctx, line);
              if (plan.abortAfter === line) ctx.abort(`test: the object crashes right after "${line}"`);
            }),
            sleeper(env, ctx),
          ],
        }),
      ),
      // Objects named "heartbeat…" beat fast, so a test sees the heartbeat revive one; the others rely on requests.
      heartbeatMs: ctx.id.name?.startsWith("heartbeat") ? 300 : 60_000,
    }));
    this.#plan = plan;
  }

  override async fetch(request: Request): Promise<Response> {
    const url = new URL(request.url);
    try {
      return await this.serve(async (harness) => {
        if (url.pathname === "/start") {
          this.#plan.abortAfter = url.searchParams.get("abortAfter") ?? undefined;
          const root = await harness.root(BACKGROUND);
          const id = await root.commit((tx) => tx.createTask(counterTask(() => {}), { to: Number(url.searchParams.get("to") ?? 5) }), BACKGROUND);
          return json({ id, instance: this.instance, object: this.ctx.id.toString() });
        }
        if (url.pathname === "/sleep") {
          const root = await harness.root(BACKGROUND);
          const id = await root.commit((tx) => tx.createTask(sleeper(this.env, this.ctx), { ms: Number(url.searchParams.get("ms")) }), BACKGROUND);
          return json({ id, instance: this.instance });
        }
        if (url.pathname === "/query") return json({ rows: await harness.storage.query(SEED_QUERY), instance: this.instance });
        if (url.pathname === "/task") return json({ task: await harness.getTask(Number(url.searchParams.get("id")), BACKGROUND), instance: this.instance });
        if (url.pathname === "/alarm") return json({ alarm: await this.ctx.storage.getAlarm(), id: this.ctx.id.toString(), instance: this.instance });
        return json({ error: "no route" }, 404);
      });
    } catch (error) {
      return failure(error);
    }
  }
}

/** A task whose every run crashes the object (S6: the restart limit ends it). */
export class CrasherObject extends HarnessObject<Env> {
  readonly instance = crypto.randomUUID();

  constructor(ctx: DurableObjectState, env: Env) {
    super(ctx, env, () => ({ registry: createRegistry().install(defineExtension({ name: "crash", tasks: [crasher(env, ctx)] })) }));
  }

  override async fetch(request: Request): Promise<Response> {
    const url = new URL(request.url);
    try {
      return await this.serve(async (harness) => {
        if (url.pathname === "/start") {
          const root = await harness.root(BACKGROUND);
          const id = await root.commit((tx) => tx.createTask(crasher(this.env, this.ctx), null), BACKGROUND);
          return json({ id, instance: this.instance });
        }
        if (url.pathname === "/task") return json({ task: await harness.getTask(Number(url.searchParams.get("id")), BACKGROUND), instance: this.instance });
        return json({ error: "no route" }, 404);
      });
    } catch (error) {
      return failure(error);
    }
  }
}

function crasher(env: Env, ctx: DurableObjectState) {
  return defineTask<null, { phase: "run" }, string>({
    name: "test.crasher",
    version: 1,
    initial: () => ({ phase: "run" }),
    phases: {
      run: async (task) => {
        await print(env, ctx, `run with restarts ${task.restarts ?? 0}`);
        ctx.abort("test: this task crashes its object on every run");
      },
    },
    abort: async (_task, runtime, context) => {
      await runtime.commit(() => ({ status: "terminal", outcome: { status: "aborted" } }), context);
    },
  });
}

/** Sleeps `ms` on the harness clock (a durable `sleepUntil`), then prints "awake". */
function sleeper(env: Env, ctx: DurableObjectState) {
  return defineTask<{ ms: number }, { phase: "sleep" | "wake" }, string>({
    name: "test.sleeper",
    version: 1,
    initial: () => ({ phase: "sleep" }),
    phases: {
      sleep: async (task, runtime, context) => {
        await runtime.sleepUntil(runtime.now() + task.input.ms, { phase: "wake" }, context);
      },
      wake: async (_task, runtime, context) => {
        await print(env, ctx, "awake");
        await runtime.commit(() => ({ status: "terminal", outcome: { status: "completed", result: "awake" } }), context);
      },
    },
    abort: async (_task, runtime, context) => {
      await runtime.commit(() => ({ status: "terminal", outcome: { status: "aborted" } }), context);
    },
  });
}

/** Placeholder until the agent scenarios land; keeps the binding valid. */
export class AgentObject extends HarnessObject<Env> {
  constructor(ctx: DurableObjectState, env: Env) {
    super(ctx, env, () => ({ registry: createRegistry() }));
  }
}

export default {
  async fetch(request: Request, env: Env): Promise<Response> {
    const url = new URL(request.url);
    const [, object, name, ...rest] = url.pathname.split("/");
    const namespace = env[object!.toUpperCase()] as Namespace | undefined;
    if (!namespace || !name) return json({ error: "use /<object>/<name>/<route>" }, 404);
    const inner = new URL(`/${rest.join("/")}${url.search}`, url);
    return namespace.get(namespace.idFromName(decodeURIComponent(name))).fetch(new Request(inner, request));
  },
};
