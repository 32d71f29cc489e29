/**
 * The object of the edge abort sweep (test/edge/abort-sweep.edge.test.ts). Its name says the world:
 * `<scenario>/<k>/<before|after>/<run>` — the seed's counter (S12) or an agent turn with an unsafe tool (S8) —
 * and the first instance, the one `/start?arm=1` reached, crashes itself with `ctx.abort()` right before or
 * right after its k-th transaction since that request. `k = 0` is the world without a crash; every later
 * instance runs to the end.
 *
 * What a crash at that instant is: from then on this instance reaches nothing outside it — no transaction
 * (refused), no print but the one that says where it crashed — and the test ends it with `ctx.abort()` on a
 * request (`/abort?after=ms`), a moment later: an abort at once now and then left the next instance an empty
 * database in this local workerd (decision 0010).
 */
import { createModels, fauxAssistantMessage, fauxProvider, fauxText, fauxToolCall } from "@earendil-works/pi-ai";
import { counterTask } from "../../examples/counter-task.ts";
import {
  type DurableObjectState,
  type DurableObjectStorage,
  HarnessObject,
  type HarnessObjectOptions,
} from "../../src/cloudflare/index.ts";
import { BACKGROUND_CONTEXT as BACKGROUND, createRegistry, defineExtension, defineTool, memoryEnvs } from "../../src/index.ts";

interface Env {
  PRINT: { fetch(url: string, init: RequestInit): Promise<Response> };
}

interface Crash {
  armed: boolean;
  at: number;
  side: string;
  transactions: number;
  /** The crash instant has passed: this instance reaches nothing outside it any more. */
  dead: boolean;
}

/** `ctx.storage` with its transactions counted, crashing the object at the planned one. */
function crashingStorage(ctx: DurableObjectState, crash: Crash, die: (where: string) => void): DurableObjectStorage {
  const inner = ctx.storage;
  const storage: DurableObjectStorage = {
    get sql() {
      return inner.sql;
    },
    transactionSync<T>(body: () => T): T {
      if (crash.dead) throw new Error("sweep: this instance crashed; nothing reaches its storage any more");
      if (!crash.armed) return inner.transactionSync(body);
      const k = ++crash.transactions;
      if (k === crash.at && crash.side === "before") {
        die(`before transaction ${k}`);
        throw new Error(`sweep: crashed before transaction ${k}`);
      }
      const result = inner.transactionSync(body);
      if (k === crash.at && crash.side === "after") die(`after transaction ${k}`);
      return result;
    },
    getAlarm: () => inner.getAlarm(),
    setAlarm: (at) => inner.setAlarm(at),
    deleteAlarm: () => inner.deleteAlarm(),
  };
  return storage;
}

/** The agent turn's objects: a tool with replay "unsafe" (its print is the effect that must not happen twice). */
function agentOptions(say: (line: string) => Promise<void>): HarnessObjectOptions {
  const append = defineTool<{ text: string }>({
    name: "append",
    description: "Append text to notes.txt",
    parameters: { type: "object", properties: { text: { type: "string" } }, required: ["text"] },
    replay: "unsafe",
    async execute({ text }, api) {
      await say(`append ${JSON.stringify(text)}`);
      api.output("working\n");
      return "appended";
    },
  });
  const faux = fauxProvider({ api: "faux", provider: "faux" });
  const catalog = createModels();
  catalog.setProvider(faux.provider);
  const models = new Proxy(catalog, {
    get(target, key, receiver) {
      if (key === "streamSimple") {
        return (...args: Parameters<typeof target.streamSimple>) => {
          const toolResult = args[1].messages.some((message) => message.role === "toolResult");
          faux.setResponses([
            toolResult
              ? fauxAssistantMessage(fauxText("noted"))
              : fauxAssistantMessage([fauxToolCall("append", { text: "hello\n" }, { id: "call_1" })], { stopReason: "toolUse" }),
          ]);
          return target.streamSimple(...args);
        };
      }
      const value = Reflect.get(target, key, receiver);
      return typeof value === "function" ? value.bind(target) : value;
    },
  });
  return {
    registry: createRegistry().install(defineExtension({ name: "sweep", tools: [append] })),
    models,
    settings: { progress: { persistWithinMs: 0 }, retry: { baseDelayMs: 100 } },
    env: (conversationId) => memoryEnvs()(conversationId),
  };
}

export class SweepObject extends HarnessObject<Env> {
  readonly instance = crypto.randomUUID();
  readonly #crash: Crash;
  readonly #scenario: string;

  constructor(ctx: DurableObjectState, env: Env) {
    const name = ctx.id.name ?? ctx.id.toString();
    const [scenario = "", at = "0", side = ""] = name.split("/");
    const crash: Crash = { armed: false, at: Number(at), side, transactions: 0, dead: false };
    const print = (line: string) => env.PRINT.fetch("http://print/", { method: "POST", body: `${name}: ${line}` }).then(() => {});
    const say = async (line: string) => {
      if (!crash.dead) await print(line);
    };
    const die = (where: string) => {
      crash.dead = true;
      void print(`crash ${where}`);
    };
    // The storage is wrapped, not ctx: the runtime's DurableObject takes only its own ctx.
    const storage = crashingStorage(ctx, crash, die);
    super(ctx, env, () =>
      scenario === "counter"
        ? { registry: createRegistry().install(defineExtension({ name: "sweep", tasks: [counterTask(say)] })), storage }
        : { ...agentOptions(say), storage },
    );
    this.#crash = crash;
    this.#scenario = scenario;
  }

  override async fetch(request: Request): Promise<Response> {
    const url = new URL(request.url);
    try {
      return await this.serve(async (harness) => {
        if (url.pathname === "/raw") {
          // The tables and rows as the object's SQLite has them, without the harness (for a failing world's message).
          const sql = this.ctx.storage.sql;
          const tables = sql
            .exec("SELECT name FROM sqlite_master WHERE type = 'table'")
            .toArray()
            .map((r) => r.name);
          const tasks = tables.includes("tasks") ? sql.exec("SELECT id, status FROM tasks").toArray() : "no table";
          const conversations = tables.includes("conversations") ? sql.exec("SELECT id FROM conversations").toArray() : "no table";
          return Response.json({ instance: this.instance, tables, tasks, conversations });
        }
        if (url.pathname === "/abort") {
          if (this.#crash.dead) {
            await new Promise((resolve) => setTimeout(resolve, Number(url.searchParams.get("after") ?? 0)));
            this.ctx.abort("sweep: the crash");
          }
          return Response.json({ instance: this.instance, dead: this.#crash.dead });
        }
        if (url.pathname === "/start") {
          if (url.searchParams.has("arm")) this.#crash.armed = true;
          const root = await harness.root(BACKGROUND, { agent: { model: "faux/faux-1" } });
          // Keyed, so a start the crash cut off can be asked again: it returns what the first one made.
          const id =
            this.#scenario === "counter"
              ? await this.service.createTask("example.counter", { to: 5 }, { key: "sweep" })
              : (await root.submit({ type: "input", content: "append hello", requestId: "sweep" }, BACKGROUND)).id;
          return Response.json({ id, instance: this.instance });
        }
        if (url.pathname === "/state") {
          const id = Number(url.searchParams.get("id"));
          const root = await harness.root(BACKGROUND);
          return Response.json({
            instance: this.instance,
            transactions: this.#crash.transactions,
            task: this.#scenario === "counter" ? await harness.getTask(id, BACKGROUND) : undefined,
            submission: this.#scenario === "counter" ? undefined : await harness.storage.getSubmission(id),
            entries: await root.entries(BACKGROUND),
          });
        }
        return Response.json({ error: "no route" }, { status: 404 });
      });
    } catch (error) {
      return Response.json({ name: (error as Error).name, message: (error as Error).message }, { status: 500 });
    }
  }
}
