/**
 * The Worker the edge tests run in workerd. `/<object>/<name>/<route>` goes to the Durable Object `name` of
 * that class. Objects print through the PRINT service binding, which the Node side of the test records: a
 * print is a side effect outside the object, so it survives the object's crash as a real one would.
 */
import {
  type Api,
  type AssistantMessageEventStream,
  createModels,
  fauxAssistantMessage,
  fauxProvider,
  fauxText,
  fauxToolCall,
  type Model,
  type Context as ModelContext,
} from "@earendil-works/pi-ai";
import { counterTask } from "../../examples/counter-task.ts";
import { routeSigned, type SignedEnv } from "../../examples/signed-callers.ts";
import { DurableObjectDatabase, type DurableObjectState, HarnessObject } from "../../src/cloudflare/index.ts";
import { answerClose } from "../../src/cloudflare/sockets.ts";
import type { HibernatableWebSocket } from "../../src/cloudflare/types.ts";
import {
  BACKGROUND_CONTEXT as BACKGROUND,
  type Conversation,
  type ConversationViewState as ConversationView,
  createRegistry,
  defineExtension,
  defineTask,
  defineTool,
  type Json,
  memoryEnvs,
} from "../../src/index.ts";
import { SqliteStorage } from "../../src/storage/sqlite/storage.ts";
import { storageConformance } from "../../src/testing/storage-conformance.ts";
import { partialAnswer } from "../partial-answer.ts";

interface Env {
  PRINT: { fetch(url: string, init: RequestInit): Promise<Response> };
  [binding: string]: unknown;
}

interface Namespace {
  idFromName(name: string): unknown;
  get(id: unknown): { fetch(request: Request): Promise<Response> };
}

async function print(env: Env, ctx: DurableObjectState, line: string): Promise<void> {
  // An object woken by its alarm does not know its name (workerd gives it with requests only): the id then.
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
      if (url.pathname === "/door") {
        // Each statement through storage.query(), with the object's settings and every row read after each.
        const { sqls, queryLimits } = (await request.json()) as { sqls: string[]; queryLimits?: Record<string, number> };
        const storage = await SqliteStorage.open(new DurableObjectDatabase(this.#ctx.storage), "durable-object", { queryLimits });
        const before = objectState(this.#ctx);
        const answers: unknown[] = [];
        for (const sql of sqls) {
          let answer: unknown;
          try {
            answer = { rows: await storage.query(sql) };
          } catch (error) {
            answer = { error: (error as Error).name, message: (error as Error).message };
          }
          answers.push({ answer, state: objectState(this.#ctx) });
        }
        return json({ before, answers });
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
          const values = params.map((p) =>
            p && typeof p === "object" && "bytes" in p
              ? new Uint8Array((p as { bytes: number[] }).bytes)
              : typeof p === "string" && p.endsWith("n") && /^-?\d+n$/.test(p)
                ? BigInt(p.slice(0, -1))
                : p,
          );
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

/** The settings of the object's connection a page could change, LIKE's case rule, unordered order, and every row. */
function objectState(ctx: DurableObjectState): string {
  const sql = ctx.storage.sql;
  const settings: Record<string, unknown> = {};
  for (const name of [
    "foreign_keys",
    "defer_foreign_keys",
    "recursive_triggers",
    "ignore_check_constraints",
    "legacy_alter_table",
    "reverse_unordered_selects",
  ]) {
    settings[name] = Object.values(sql.exec(`PRAGMA ${name}`).toArray()[0] ?? {})[0];
  }
  settings.like = sql.exec("SELECT 'a' LIKE 'A' AS x").toArray()[0]!.x;
  settings.order = sql
    .exec("SELECT key FROM pi_durable_meta")
    .toArray()
    .map((row) => row.key)
    .join();
  const tables = sql.exec("SELECT type, name, sql FROM sqlite_schema ORDER BY name").toArray();
  const rows = tables
    .filter((table) => table.type === "table" && !/^(_cf_|sqlite_)/.test(String(table.name)))
    .map((table) => [table.name, sql.exec(`SELECT * FROM "${table.name}" ORDER BY 1`).toArray()]);
  return JSON.stringify({ settings, tables, rows });
}

function encode(value: unknown): unknown {
  if (value instanceof Uint8Array) return { bytes: [...value] };
  if (Array.isArray(value)) return value.map(encode);
  if (value && typeof value === "object") return Object.fromEntries(Object.entries(value).map(([k, v]) => [k, encode(v)]));
  return value;
}

export { CounterObject } from "../../examples/counter-object.ts";
export { UserAgent } from "../../examples/signed-callers.ts";
export { DemoObject } from "../../worker/edge-object.ts";
export { ApprovalObject } from "./approval-object.ts";
export { FollowObject } from "./follow-object.ts";
export { SharedObject } from "./shared-object.ts";
export { SweepObject } from "./sweep-object.ts";

/**
 * A task whose row grows past what a Durable Object's row holds while each value stays within the limits: it
 * memoizes its input's `pad`, then commits a checkpoint that carries it too (issue 22 item 1, the whole row).
 */
const grower = defineTask<{ pad: string }, { phase: "grow" | "done"; pad?: string }, string>({
  name: "limit.grower",
  version: 1,
  initial: () => ({ phase: "grow" }),
  phases: {
    grow: async (task, runtime, context) => {
      await runtime.memo("pad", task.input.pad, context);
      await runtime.commit(() => ({ status: "running", checkpoint: { phase: "done", pad: task.input.pad } }), context);
    },
    done: async (_task, runtime, context) =>
      runtime.commit(() => ({ status: "terminal", outcome: { status: "completed", result: "grown" } }), context),
  },
  abort: async () => {},
});

/**
 * An object whose pages may query, with small caps (issue 22 item 7: `queryLimits` of `HarnessObjectOptions`),
 * and create `limit.grower` tasks; each page socket holds at most 3 subscriptions (decision 0148: `callerLimits`).
 */
export class LimitedObject extends HarnessObject<Env> {
  constructor(ctx: DurableObjectState, env: Env) {
    super(ctx, env, () => ({
      registry: createRegistry().install(defineExtension({ name: "limit", tasks: [grower] })),
      powers: ["query", "createTask"],
      queryLimits: { maxRows: 5, maxBytes: 2000 },
      callerLimits: { maxSubscriptions: 3 },
    }));
  }
}

/**
 * An object whose `authorize` fails for `listConversations` (its permission store "down") and refuses `inspect`; its
 * `onAuthorizeError` prints what it is told (decision 0117, later): `<name>: authorize failed <action> <door> <caller>
 * <message>`.
 */
export class DoorFailObject extends HarnessObject<Env> {
  constructor(ctx: DurableObjectState, env: Env) {
    super(ctx, env, () => ({
      registry: createRegistry(),
      authorize: (_caller, call) => {
        if (call.method === "listConversations") throw new Error("the permission store at db.internal is down");
        return call.method !== "inspect";
      },
      onAuthorizeError: (error, at) =>
        void print(env, ctx, `authorize failed ${at.action} ${at.door} ${JSON.stringify(at.caller)} ${(error as Error).message}`),
    }));
  }
}

/** The HMAC secret of the signed-token recipe's Worker in these tests. */
const TOKEN_SECRET = "edge-test-secret";

/**
 * The hibernation test's object: its client API names the instance serving it (`client.call("instance")`), and it
 * runs the counter, printing as `<name>: tick n`.
 */
export class HibernatingObject extends HarnessObject<Env> {
  constructor(ctx: DurableObjectState, env: Env) {
    const instance = crypto.randomUUID();
    const name = ctx.id.name ?? ctx.id.toString();
    const print = (line: string) => env.PRINT.fetch("http://print/", { method: "POST", body: `${name}: ${line}` }).then(() => {});
    super(ctx, env, () => ({
      registry: createRegistry().install(defineExtension({ name: "example", tasks: [counterTask(print)] })),
      methods: { instance: () => instance },
      powers: ["call", "createTask"],
    }));
  }

  /** `/listeners`: how many listeners the host holds (a test route; everything else is the client API). */
  override async fetch(request: Request): Promise<Response> {
    if (new URL(request.url).pathname === "/listeners") return json({ listeners: this.listenerCount() });
    return super.fetch(request);
  }
}

/**
 * Sleeping tasks: `/sleep?ms=` creates one that sleeps that long (a durable `sleepUntil`), then prints "awake";
 * `/blocked` creates a task of a kind the object does not install. With the binding WITHOUT_SLEEPER the sleeper's
 * kind is not installed either (a deploy that removed it). Each alarm prints "alarm".
 */
export class SleeperObject extends HarnessObject<Env> {
  readonly instance = crypto.randomUUID();

  constructor(ctx: DurableObjectState, env: Env) {
    const tasks = env.WITHOUT_SLEEPER ? [] : [sleeper(env, ctx)];
    super(ctx, env, () => ({ registry: createRegistry().install(defineExtension({ name: "sleep", tasks })) }));
  }

  override async alarm(): Promise<void> {
    await print(this.env, this.ctx, "alarm");
    await super.alarm();
  }

  override async fetch(request: Request): Promise<Response> {
    const url = new URL(request.url);
    try {
      return await this.serve(async (harness) => {
        if (url.pathname === "/sleep") {
          const root = await harness.root(BACKGROUND);
          const id = await root.commit(
            (tx) => tx.createTask(sleeper(this.env, this.ctx), { ms: Number(url.searchParams.get("ms")) }),
            BACKGROUND,
          );
          return json({ id, instance: this.instance });
        }
        if (url.pathname === "/task")
          return json({ task: await harness.getTask(Number(url.searchParams.get("id")), BACKGROUND), instance: this.instance });
        if (url.pathname === "/alarm") return json({ alarm: await this.ctx.storage.getAlarm(), id: this.ctx.id.toString() });
        if (url.pathname === "/blocked") {
          const root = await harness.root(BACKGROUND);
          const id = await root.commit((tx) => tx.createTask(uninstalled, null), BACKGROUND);
          return json({ id, inspection: await harness.inspect(BACKGROUND) });
        }
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
        if (url.pathname === "/task")
          return json({ task: await harness.getTask(Number(url.searchParams.get("id")), BACKGROUND), instance: this.instance });
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
/** A kind no object of this Worker installs: its tasks stay pending, blocked. */
const uninstalled = defineTask<null, { phase: "run" }, string>({
  name: "test.uninstalled",
  version: 1,
  initial: () => ({ phase: "run" }),
  phases: { run: async () => {} },
  abort: async () => {},
});

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

/**
 * The seed's agent probes on an object: the tool probe (objects named `safe-…` declare the tool replay-safe) and
 * a generation cut mid-stream (objects named `gen-…`). The first instance, the one that took `/submit`,
 * aborts the object at the cut; every later instance runs to the end.
 */
export class AgentObject extends HarnessObject<Env> {
  readonly #plan: { cut: boolean };
  readonly instance = crypto.randomUUID();

  constructor(ctx: DurableObjectState, env: Env) {
    const plan = { cut: false };
    const say = (line: string) => print(env, ctx, line);
    let root: Conversation | undefined;
    /** Waits, inside the object, until `ready()` holds on the conversation's view (what was persisted). */
    const persisted = async (ready: (view: ConversationView) => boolean) => {
      for (let i = 0; i < 500; i++) {
        if (root && ready(await root.view(BACKGROUND))) return;
        await new Promise((resolve) => setTimeout(resolve, 10));
      }
      throw new Error("the partial was never persisted");
    };
    const cut = async (what: string) => {
      await say(`cut ${what}`);
      ctx.abort(`test: the object crashes ${what}`);
    };
    const replay = ctx.id.name?.startsWith("safe-") ? "safe" : "unsafe";
    const generationProbe = ctx.id.name?.startsWith("gen-") ?? false;
    const append = defineTool<{ text: string }>({
      name: "append",
      description: "Append text to notes.txt",
      parameters: { type: "object", properties: { text: { type: "string" } }, required: ["text"] },
      replay,
      async execute({ text }, api) {
        await say(`append ${JSON.stringify(text)}`);
        api.output("working\n");
        if (plan.cut) {
          await persisted((view) => view.live.tools?.[0]?.output === "working\n");
          await cut("during the tool");
        }
        return "appended";
      },
    });
    const faux = fauxProvider({ api: "faux", provider: "faux" });
    const catalog = createModels();
    catalog.setProvider(faux.provider);
    const models = new Proxy(catalog, {
      get(target, key, receiver) {
        if (key === "streamSimple") {
          return (model: Model<Api>, context: ModelContext, options?: { signal?: AbortSignal }) => {
            const toolResult = context.messages.find((m) => m.role === "toolResult");
            void say(
              `request${toolResult ? ` with ${JSON.stringify((toolResult.content as Array<{ text?: string }>).map((c) => c.text))}` : ""}`,
            );
            if (generationProbe) {
              if (plan.cut)
                return hang(model, "Hel", () =>
                  persisted((view) => textOf(view.live.generation?.message) === "Hel").then(() => cut("mid-stream")),
                );
              faux.setResponses([fauxAssistantMessage(fauxText("Hello!"))]);
            } else if (toolResult) faux.setResponses([fauxAssistantMessage(fauxText("noted"))]);
            else
              faux.setResponses([
                fauxAssistantMessage([fauxToolCall("append", { text: "hello\n" }, { id: "call_1" })], { stopReason: "toolUse" }),
              ]);
            return target.streamSimple(model, context, options);
          };
        }
        const value = Reflect.get(target, key, receiver);
        return typeof value === "function" ? value.bind(target) : value;
      },
    });
    super(ctx, env, () => ({
      registry: createRegistry().install(defineExtension({ name: "probe", tools: [append] })),
      models,
      settings: { progress: { persistWithinMs: 0 }, retry: { baseDelayMs: 300 } },
      env: (conversationId) => memoryEnvs()(conversationId),
      onReport: (report) =>
        void say(
          `report ${report.kind}${"taskKind" in report ? ` ${report.taskKind}` : ""}${"reason" in report ? ` ${report.reason}` : ""}`,
        ),
    }));
    this.#plan = plan;
    void this.ready.then(async (harness) => {
      root = await harness.root(BACKGROUND);
    });
  }

  override async fetch(request: Request): Promise<Response> {
    const url = new URL(request.url);
    try {
      return await this.serve(async (harness) => {
        const root = await harness.root(BACKGROUND, { agent: { model: "faux/faux-1" } });
        if (url.pathname === "/submit") {
          this.#plan.cut = true;
          const submission = await root.submit({ type: "input", content: url.searchParams.get("text") ?? "hi" }, BACKGROUND);
          return json({ submissionId: submission.id, instance: this.instance });
        }
        if (url.pathname === "/state") {
          const submission = await harness.storage.getSubmission(Number(url.searchParams.get("submission")));
          const tasks = await harness.storage.listTasks();
          const rows = await harness.storage.query(PROBE_QUERY);
          return json({ submission, entries: await root.entries(BACKGROUND), tasks, rows, instance: this.instance });
        }
        return json({ error: "no route" }, 404);
      });
    } catch (error) {
      return failure(error);
    }
  }
}

/** The seed's query over the tool probe (S8, S11). */
const PROBE_QUERY = `SELECT id, kind, status, record ->> '$.restarts' AS restarts,
       record ->> '$.state.checkpoint.phase' AS phase, record ->> '$.state.checkpoint.replay' AS replay
FROM tasks ORDER BY id;`;

function textOf(message: { content?: unknown } | undefined): string {
  return ((message?.content as Array<{ type: string; text?: string }> | undefined) ?? []).map((c) => c.text ?? "").join("");
}

/** A model request that streams `text` and then stays in flight; `onStreamed` runs once the text was pushed. */
function hang(model: Model<Api>, text: string, onStreamed: () => void): AssistantMessageEventStream {
  return partialAnswer(model, text, () => onStreamed());
}

export default {
  async fetch(request: Request, env: Env): Promise<Response> {
    const url = new URL(request.url);
    if (url.pathname.startsWith("/stub/")) return viaStub(request, env);
    if (url.pathname.startsWith("/answer-close/")) return answerPeerClose(request);
    const [, object, name, ...rest] = url.pathname.split("/");
    // `/signed/<any>/<route>`: the signed-token recipe's Worker (examples/signed-callers.ts) routes by the token.
    if (object === "signed") {
      const inner = new URL(`/${rest.join("/")}${url.search}`, url);
      return routeSigned(new Request(inner, request), { USERS: env.USERS as SignedEnv["USERS"], TOKEN_SECRET });
    }
    const namespace = env[object!.toUpperCase()] as Namespace | undefined;
    if (!namespace || !name) return json({ error: "use /<object>/<name>/<route>" }, 404);
    const inner = new URL(`/${rest.join("/")}${url.search}`, url);
    return namespace.get(namespace.idFromName(decodeURIComponent(name))).fetch(new Request(inner, request));
  },
};

/**
 * `POST /answer-close/<any>` with `{ code?, reasonBytes? }`: `answerClose` on one end of a socket pair, as if that end's peer
 * had closed with `code` and a reason that decodes from `reasonBytes` (invalid UTF-8 becomes U+FFFD). Answers whether
 * it threw, whether it closed the socket (a send after it fails), and the close the other end saw.
 */
async function answerPeerClose(request: Request): Promise<Response> {
  const { code, reasonBytes } = (await request.json()) as { code?: number; reasonBytes?: number[] };
  const reason = reasonBytes === undefined ? undefined : new TextDecoder().decode(new Uint8Array(reasonBytes));
  type End = HibernatableWebSocket & {
    accept(): void;
    addEventListener(type: "close", listener: (event: { code: number; reason: string }) => void): void;
  };
  const pair = new (globalThis as unknown as { WebSocketPair: new () => Record<0 | 1, End> }).WebSocketPair();
  const [peer, socket] = [pair[0], pair[1]];
  peer.accept();
  socket.accept();
  const seen = new Promise<{ code: number; reason: string }>((resolve) =>
    peer.addEventListener("close", (event) => resolve({ code: event.code, reason: event.reason })),
  );
  let threw = false;
  try {
    answerClose(socket, code, reason);
  } catch {
    threw = true;
  }
  let closed = false;
  try {
    socket.send("after the answer");
  } catch {
    closed = true;
  }
  return json({ threw, closed, seen: closed ? await seen : null, reason: reason ?? null });
}

/**
 * `POST /stub/<object>/<name>` with `{ method, args }`: the Worker calls the object's RPC method through its
 * stub (no HTTP to the object); answers `{ value }` or `{ error: { name, message } }` as the Worker saw it.
 */
async function viaStub(request: Request, env: Env): Promise<Response> {
  const [, , object, name] = new URL(request.url).pathname.split("/");
  const namespace = env[object!.toUpperCase()] as Namespace;
  const stub = namespace.get(namespace.idFromName(decodeURIComponent(name!))) as unknown as Record<
    string,
    (...args: unknown[]) => Promise<unknown>
  >;
  const { method, args } = (await request.json()) as { method: string; args?: unknown[] };
  try {
    return json({ value: (await stub[method]!(...(args ?? []))) ?? null });
  } catch (error) {
    const e = error as Error;
    return json({ error: { name: e?.name, message: e?.message ?? String(error) } });
  }
}
