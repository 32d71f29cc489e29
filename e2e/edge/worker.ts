/**
 * The Worker that e2e tests run in workerd next to the page (e2e/support/edge.ts): the demo's harness object
 * (worker/edge-object.ts's extensions, models and methods), except that the counter prints through the PRINT
 * service binding (a print is a side effect outside the object: the Node side records it, so it survives the
 * object's crash as a real one would), crash points are on, and `POST /<name>/abort` aborts the object
 * (`ctx.abort()`: the crash of an object, its committed writes kept). `GET /<name>/seed` answers the seed's query
 * (`SEED_QUERY`) over the object's own tasks table.
 */
import { counterTask, SEED_QUERY } from "../../examples/counter-task.ts";
import {
  ALL_POWERS,
  type DurableObjectState,
  type DurableObjectStorage,
  HarnessObject,
  type HarnessObjectOptions,
} from "../../src/cloudflare/index.ts";
import { createRegistry, defineExtension, defineTask, memoryEnvs } from "../../src/index.ts";
import { demoMethods } from "../../worker/methods.ts";
import { createDemoModels } from "../../worker/models.ts";
import { filesExtension, pageToolsExtension } from "../../worker/tools.ts";

interface Env {
  PRINT: { fetch(url: string, init: RequestInit): Promise<Response> };
  /** Told each time an object's instance starts (an eviction, an abort or a restart shows as a new start). */
  STARTED: { fetch(url: string, init: RequestInit): Promise<Response> };
}

/**
 * Where an object stops in a hand-over, armed by `POST /<name>/arm?point=…` (this instance only; e2e tests only):
 * - `drop-pushes`: every push and release that arrives is lost (the tab's rest and its release never arrive);
 * - `drop-release`: pushes arrive, releases are lost;
 * - `abort-at-release`: `ctx.abort()` as a release arrives, before it is handled;
 * - `abort-in-takeover`: `ctx.abort()` right after the takeover's lease record (holder: the object) is written,
 *   before the takeover's recovery transaction (decision 0031: two writes);
 * - `abort-first-step`: `ctx.abort()` instead of the object's first print after arming (the takeover done, the
 *   object's first step under way).
 * - `hold-snapshot-parts`: every `follow.snapshot` call for a part after the first is lost (a tab rebuilding stops
 *   in the middle of fetching the snapshot, decision 0053); each one lost is printed as `held snapshot part`, each
 *   call for a new take (part 0, passed on) as `snapshot take asked`.
 * `none` disarms.
 */
type StopPoint = "drop-pushes" | "drop-release" | "abort-at-release" | "abort-in-takeover" | "abort-first-step" | "hold-snapshot-parts";
const STOP_POINTS: readonly string[] = [
  "drop-pushes",
  "drop-release",
  "abort-at-release",
  "abort-in-takeover",
  "abort-first-step",
  "hold-snapshot-parts",
];

/** `ctx.storage` that, armed `abort-in-takeover`, refuses every write after the takeover's lease record and aborts. */
function stoppableStorage(state: DurableObjectState, plan: { point?: StopPoint; dead?: boolean }): DurableObjectStorage {
  const inner = state.storage;
  const refuse = () => {
    throw new Error("e2e: this instance was stopped in its takeover; nothing reaches its storage any more");
  };
  return {
    sql: {
      exec(query: string, ...bindings: unknown[]) {
        if (plan.dead && !/^\s*SELECT/i.test(query)) refuse();
        const cursor = inner.sql.exec(query, ...bindings);
        if (
          plan.point === "abort-in-takeover" &&
          query.includes("pi_follow_lease") &&
          String(bindings[0] ?? "").includes('"holder":"object"')
        ) {
          plan.dead = true;
          setTimeout(() => state.abort("e2e: the object was aborted in its takeover"), 50);
        }
        return cursor;
      },
      get databaseSize() {
        return inner.sql.databaseSize;
      },
    },
    transactionSync: (body) => (plan.dead ? refuse() : inner.transactionSync(body)),
    getAlarm: () => inner.getAlarm(),
    setAlarm: (at) => inner.setAlarm(at),
    deleteAlarm: () => inner.deleteAlarm(),
  };
}

/** How long a lease lasts on an object named `short-…`, and on every other one. */
const SHORT_TTL_MS = 3_000;
const LONG_TTL_MS = 600_000;

/**
 * The demo's `demo.stall` (worker/demo-tasks.ts, the same name, version and phase), printing through PRINT: a step
 * that never makes progress, so a takeover finds it `running` and counts its restart (S4), and each run prints its
 * number (`stall: run <restarts + 1>`).
 */
function stallTask(print: (line: string) => Promise<void>) {
  return defineTask<{ label?: string }, { phase: "stall" }, string>({
    name: "demo.stall",
    version: 1,
    initial: () => ({ phase: "stall" }),
    phases: {
      stall: async (task, runtime) => {
        await print(`stall: run ${(task.restarts ?? 0) + 1}`);
        await new Promise((resolve) => runtime.signal.addEventListener("abort", resolve));
        throw new Error("stopped");
      },
    },
    abort: async (_task, runtime, context) => runtime.commit(() => ({ status: "terminal", outcome: { status: "aborted" } }), context),
  });
}

class E2eObject extends HarnessObject<Env> {
  readonly #state: DurableObjectState;
  readonly #plan: { point?: StopPoint; dead?: boolean };

  readonly #env: Env;
  /** Hand-over frames this instance heard (decision 0101's e2e): the workers' releases, the pages' leavings. */
  readonly #heard = { release: 0, leaving: 0 };

  constructor(
    state: DurableObjectState,
    env: Env,
    ttlMs?: number,
    keepLog?: number,
    doors?: Pick<HarnessObjectOptions, "authorize" | "onAuthorizeError">,
  ) {
    const models = createDemoModels();
    const envs = memoryEnvs();
    const plan: { point?: StopPoint; dead?: boolean } = {};
    // Which instance printed a line or started: e2e/support/edge.ts keeps them (`instances`), to see an eviction.
    const instance = crypto.randomUUID();
    const print = async (line: string) => {
      if (plan.point === "abort-first-step") {
        plan.point = undefined;
        state.abort("e2e: the object was aborted in its first step");
        return;
      }
      await env.PRINT.fetch("http://print/", { method: "POST", body: line, headers: { "x-instance": instance } });
    };
    super(state, env, () => ({
      registry: createRegistry()
        .install(defineExtension({ name: "demo", tasks: [counterTask(print), stallTask(print)] }))
        .install(filesExtension("unsafe"))
        .install(pageToolsExtension),
      models: models.models,
      env: envs,
      powers: ALL_POWERS,
      methods: demoMethods(models, envs),
      crashPoints: true,
      storage: stoppableStorage(state, plan),
      ...doors,
      ...(ttlMs === undefined ? {} : { follow: { authorize: () => true, ttlMs, ...(keepLog === undefined ? {} : { keepLog }) } }),
    }));
    this.#env = env;
    this.#state = state;
    this.#plan = plan;
    void env.STARTED.fetch("http://started/", { method: "POST", body: "started", headers: { "x-instance": instance } }).catch(() => {});
  }

  override async fetch(request: Request): Promise<Response> {
    const url = new URL(request.url);
    if (url.pathname === "/heard") return Response.json(this.#heard);
    if (url.pathname === "/seed") return Response.json(this.#state.storage.sql.exec(SEED_QUERY).toArray());
    // The lease's record as the object stored it (`holder` names the place), readable from the demo's origin: a
    // test's busy worker asks it synchronously to stay busy until the object took the lease.
    if (url.pathname === "/lease")
      return Response.json(leaseRecord(this.#state.storage), { headers: { "access-control-allow-origin": "*" } });
    if (request.method === "POST" && url.pathname === "/abort") {
      this.#state.abort("e2e: the object was aborted");
    }
    if (request.method === "POST" && url.pathname === "/arm") {
      const point = url.searchParams.get("point") ?? "";
      if (point === "none") {
        this.#plan.point = undefined;
        return new Response("disarmed");
      }
      if (!STOP_POINTS.includes(point)) return new Response(`no stop point ${point}`, { status: 400 });
      this.#plan.point = point as StopPoint;
      return new Response("armed");
    }
    return super.fetch(request);
  }

  override async webSocketMessage(socket: Parameters<HarnessObject["webSocketMessage"]>[0], message: string | ArrayBuffer) {
    if (typeof message === "string") {
      const type = frameType(message);
      if (type === "release") this.#heard.release++;
      else if (type === "call" && message.includes('"method":"leaving"')) this.#heard.leaving++;
    }
    const point = this.#plan.point;
    if (point && typeof message === "string") {
      const type = frameType(message);
      if (point === "drop-pushes" && (type === "push" || type === "release")) return;
      if (point === "drop-release" && type === "release") return;
      if (point === "hold-snapshot-parts" && snapshotPartAsked(message)) {
        void this.#env.PRINT.fetch("http://print/", { method: "POST", body: "held snapshot part" }).catch(() => {});
        return;
      }
      if (point === "hold-snapshot-parts" && snapshotPartAsked(message, 0))
        void this.#env.PRINT.fetch("http://print/", { method: "POST", body: "snapshot take asked" }).catch(() => {});
      if (point === "abort-at-release" && type === "release") {
        this.#plan.point = undefined;
        this.#state.abort("e2e: the object was aborted as the release arrived");
        return;
      }
    }
    return super.webSocketMessage(socket, message);
  }
}

/** The follow lease's stored record (`pi_follow_lease`, src/cloudflare/follow.ts), `{}` before there is one. */
function leaseRecord(storage: DurableObjectStorage): unknown {
  try {
    const row = storage.sql.exec("SELECT record FROM pi_follow_lease WHERE key = 'lease'").toArray()[0];
    return row ? JSON.parse(String(row.record)) : {};
  } catch {
    return {};
  }
}

/** Whether `frame` is a `follow.snapshot` call for a part after the first (with `first`: for a new take, part 0). */
function snapshotPartAsked(frame: string, first?: 0): boolean {
  try {
    const call = JSON.parse(frame) as { type?: unknown; topic?: unknown; method?: unknown; args?: unknown[] };
    return (
      call.type === "call" &&
      call.topic === "follow" &&
      call.method === "snapshot" &&
      (first === 0 ? call.args?.[1] === undefined && call.args?.[2] === undefined : typeof call.args?.[2] === "number" && call.args[2] > 0)
    );
  } catch {
    return false;
  }
}

function frameType(frame: string): unknown {
  try {
    return (JSON.parse(frame) as { type?: unknown }).type;
  } catch {
    return undefined;
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

/** A pinned lease (decision 0032): the tab keeps it however long it is away; the object only mirrors. */
export class PinnedLeaseObject extends E2eObject {
  constructor(state: DurableObjectState, env: Env) {
    super(state, env, Number.POSITIVE_INFINITY);
  }
}

export class ShortLeaseObject extends E2eObject {
  constructor(state: DurableObjectState, env: Env) {
    super(state, env, SHORT_TTL_MS);
  }
}

/** The log keeps its last few transactions (decision 0047): a new device or a forked tab rebuilds from the snapshot. */
const TRIM_KEEP_LOG = 4;

export class TrimObject extends E2eObject {
  constructor(state: DurableObjectState, env: Env) {
    super(state, env, LONG_TTL_MS, TRIM_KEEP_LOG);
  }
}

export class TrimShortObject extends E2eObject {
  constructor(state: DurableObjectState, env: Env) {
    super(state, env, SHORT_TTL_MS, TRIM_KEEP_LOG);
  }
}

/** What a `DoorsObject`'s `onAuthorizeError` was told: the hook's own error, the caller, action and door. */
interface ToldAtObject {
  name: string;
  message: string;
  caller: string;
  action: string;
  door: string;
}

/**
 * An object whose authorize hook answers the pages' status subscriptions as `POST /hook?answer=allow|refuse|throw` last
 * said (every other call is let through; default allow), and whose `onAuthorizeError` keeps what it is told, read at
 * `GET /authorize-errors` (e2e/authorize-error-object.e2e.ts).
 */
export class DoorsObject extends E2eObject {
  readonly #hook: { answer: string; told: ToldAtObject[] };

  constructor(state: DurableObjectState, env: Env) {
    const hook = { answer: "allow", told: [] as ToldAtObject[] };
    super(state, env, undefined, undefined, {
      authorize: (_caller, call) => {
        if (call.method !== "onStatus") return true;
        if (hook.answer === "throw") throw new Error("the e2e permission store is down");
        return hook.answer === "allow";
      },
      onAuthorizeError: (error, at) => {
        const { name, message } = error as Error;
        hook.told.push({ name, message, caller: JSON.stringify(at.caller), action: at.action, door: at.door });
      },
    });
    this.#hook = hook;
  }

  override async fetch(request: Request): Promise<Response> {
    const url = new URL(request.url);
    if (request.method === "POST" && url.pathname === "/hook") {
      this.#hook.answer = url.searchParams.get("answer") ?? "allow";
      return new Response("set");
    }
    if (url.pathname === "/authorize-errors") return Response.json(this.#hook.told);
    return super.fetch(request);
  }
}

interface Namespace {
  idFromName(name: string): unknown;
  get(id: unknown): { fetch(request: Request): Promise<Response> };
}

/** `/<name>/<rest>` goes to the object `name` as `/<rest>` (its host socket on `/`, `/follow`, `/abort`). */
export default {
  fetch(
    request: Request,
    env: {
      PLAIN: Namespace;
      LONG: Namespace;
      SHORT: Namespace;
      PINNED: Namespace;
      TRIM: Namespace;
      TRIMSHORT: Namespace;
      DOORS: Namespace;
    },
  ) {
    const url = new URL(request.url);
    const [, encoded = "e2e", ...rest] = url.pathname.split("/");
    const name = decodeURIComponent(encoded);
    url.pathname = `/${rest.join("/")}`;
    const namespace = name.startsWith("doors-")
      ? env.DOORS
      : name.startsWith("trim-")
        ? env.TRIM
        : name.startsWith("trimshort-")
          ? env.TRIMSHORT
          : name.startsWith("short-")
            ? env.SHORT
            : name.startsWith("follow-")
              ? env.LONG
              : name.startsWith("pinned-")
                ? env.PINNED
                : env.PLAIN;
    return namespace.get(namespace.idFromName(name)).fetch(new Request(url, request));
  },
};
