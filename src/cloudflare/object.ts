/**
 * The harness inside a Durable Object: one object per conversation (or per user), its own SQLite, and an
 * eviction, `ctx.abort()`, a deploy or a CPU-limit reset as the crash.
 *
 * ```ts
 * export class Agent extends defineHarnessObject((env: Env) => ({ registry: createRegistry().install(myExtension) })) {}
 * ```
 *
 * - Every start of the object (its first event after an eviction or abort) opens the harness, which counts the
 *   restarts of the tasks a crash left running exactly as a tab reload does (S4); work resumes once that
 *   first event was handled, so a request arriving first sees the recovered state.
 * - One alarm wakes the object: at the earliest `until` of every sleeping task (sleeps and retry backoffs are
 *   durable `sleepUntil`s), and every `heartbeatMs` while tasks are running, so work goes on after an eviction
 *   with no client connected. While the object is in memory its own timers run the work; the alarm only
 *   revives it.
 * - It serves the same client API as the browser worker — the runtime-neutral host of src/host/ — over a
 *   WebSocket (the hibernation API: the object may sleep while pages stay connected) and over HTTP
 *   (`POST /rpc` with `{ method, args }`). Each socket's subscriptions are kept in its attachment, so when the
 *   object wakes from hibernation (a page's message, the alarm) they are subscribed again and the page goes on
 *   hearing without reconnecting; each sends its current value first (a status, a task graph, a view
 *   snapshot). Subscriptions too large for an attachment make that page reconnect instead (code 1012). A crash
 *   (`ctx.abort()`, an eviction with the sockets) drops the sockets, and `connectHarness(url)` reconnects.
 */
import { DurableObject } from "cloudflare:workers";
import { systemClock } from "../base/clock.ts";
import type { Json } from "../base/json.ts";
import { DurableError, InvalidRequest, NotAuthorized } from "../errors.ts";
import type { Harness, HarnessOptions } from "../harness.ts";
import { type Authorize, guardEndpoint } from "../host/doors.ts";
import { type HostEndpoint, hostEndpoint } from "../host/endpoint.ts";
import { type SerializedError, serializeError } from "../host/error-wire.ts";
import { createHost, type HostMethod } from "../host/host.ts";
import { type HeldSubscription, type MessageConnection, parseClientMessage, serveMessages } from "../host/messages.ts";
import type { HarnessService, MethodName } from "../host/protocol.ts";
import type { QueryLimits } from "../storage/sqlite/query-rules.ts";
import { SqliteStorage } from "../storage/sqlite/storage.ts";
import { ObjectAlarm } from "./alarm.ts";
import { DurableObjectDatabase } from "./database.ts";
import { type HarnessRpc, RPC_CALLER, RPC_METHODS, type RpcMethodName, rpcError } from "./rpc.ts";
import type { DurableObjectState, DurableObjectStorage, HibernatableWebSocket } from "./types.ts";

export interface HarnessObjectOptions extends Omit<HarnessOptions, "clock" | "now" | "timer" | "readOnly" | "resume" | "crashPoint"> {
  /** How often the alarm comes back while tasks are running or ready to run. Default 30 000 ms. */
  heartbeatMs?: number;
  /** Extra methods for `client.call(name, ...args)`. */
  methods?: Record<string, HostMethod>;
  /** Whether a client may arm crash points (test hooks). Default false on an object. */
  crashPoints?: boolean;
  /**
   * The storage the harness uses: default `ctx.storage`; a wrapper of it for tests that count or cut its
   * transactions. (Wrap the storage, not `ctx`: the runtime's `DurableObject` accepts only its own `ctx`.)
   */
  storage?: DurableObjectStorage;
  /**
   * Caps on one `storage.query()` (a page's `client.query()` once `powers` serve it): rows and bytes, stopped
   * between rows. Defaults 10,000 rows and 4 MiB (`DEFAULT_QUERY_LIMITS`); an object offers no step budget.
   */
  queryLimits?: Partial<QueryLimits>;
  /**
   * The power methods (exposure `power` in the protocol's table: `createTask`, `configure`, `query`,
   * `exportDatabase`, crash points, `call` for app methods, …) served to pages and `POST /rpc`. Default none:
   * a page may submit, read and subscribe; everything else is refused with `NotAuthorized`.
   */
  powers?: readonly MethodName[];
  /**
   * Who is calling, from the request that opens a socket or posts to `/rpc` (a header the Worker set after
   * checking a token, say): the caller's identity as JSON (kept with the socket through hibernation), or
   * undefined to refuse the request (401). Default: every request is the caller `null`.
   */
  authenticate?: (request: Request) => Json | undefined | Promise<Json | undefined>;
  /** Whether the caller may make this call (after the table allowed it); false refuses it with `NotAuthorized`. */
  authorize?: Authorize<Json>;
}

/** What a page's socket carries through a hibernation: the subscriptions it holds on this object. */
interface Attachment {
  version: 1;
  /** Who connected (what `authenticate` returned for the upgrade request). */
  caller?: Json;
  subscriptions?: HeldSubscription[];
  /** They did not fit in an attachment: the page reconnects after a hibernation. */
  overflow?: true;
}

/** The WebSocket close code that tells a page the object started again and it should reconnect. */
export const RESTARTED = 1012;

/** Builds the harness options of one object from its environment (bindings, secrets) and state. */
export type HarnessObjectSetup<Env> = (env: Env, ctx: DurableObjectState) => HarnessObjectOptions;

const DEFAULT_HEARTBEAT_MS = 30_000;

/**
 * Why an object serves no page the methods its protocol row marks `servedToPages: false` (`close`,
 * `requestTakeover`): the object's life is the runtime's, not a page's.
 */
const NOT_SERVED =
  "a Durable Object's harness lives as long as the object and has one instance at a time; a page leaves with client.close().";

/** The endpoint of a socket whose caller is not known: it refuses everything. */
const refuseAll: HostEndpoint = {
  call: (method) => Promise.reject(new NotAuthorized(method, "this socket connected before the object checked callers; reconnect.")),
  subscribe: (method) => Promise.reject(new NotAuthorized(method, "this socket connected before the object checked callers; reconnect.")),
  unsubscribe: () => {},
};

/** A library error for a page: its class, message and details, not the object's stack (bundle paths). */
function pageError(error: unknown): SerializedError {
  const { stack: _stack, ...shape } = isSerialized(error) ? error : serializeError(error);
  return shape;
}

/** Sends a frame to a page; a page that is gone hears nothing (its subscriptions end with the close). */
function send(socket: HibernatableWebSocket, frame: object): void {
  try {
    socket.send(JSON.stringify(frame));
  } catch {
    // The socket is closed or closing.
  }
}

function isSerialized(error: unknown): error is SerializedError {
  return !(error instanceof Error) && typeof (error as SerializedError | undefined)?.name === "string";
}

/**
 * The Durable Object class of a harness. Export a subclass from your Worker (`defineHarnessObject` builds one)
 * and bind it in wrangler's `durable_objects` with a `new_sqlite_classes` migration.
 */
// The RPC methods are added to the class's prototype from RPC_METHODS (see the static block).
// biome-ignore lint/correctness/noUnusedVariables: a merged declaration repeats the class's type parameters
export interface HarnessObject<Env = unknown> extends HarnessRpc {}

// biome-ignore lint/suspicious/noUnsafeDeclarationMerging: the interface declares what the static block adds to the prototype
export class HarnessObject<Env = unknown> extends DurableObject<Env> {
  /** The harness, once the object's storage was opened and recovered. */
  readonly ready: Promise<Harness>;
  /** The client API (the same service the browser worker serves). */
  readonly service: HarnessService;
  /** How many listeners the host holds for subscriptions (pages that left hold none). */
  readonly listenerCount: () => number;
  readonly #endpoint: HostEndpoint;
  readonly #doors: Pick<HarnessObjectOptions, "powers" | "authenticate" | "authorize">;
  readonly #connections = new Map<HibernatableWebSocket, MessageConnection>();
  /** The one alarm (alarm.ts). */
  readonly #alarm: ObjectAlarm;
  #started = false;

  static {
    for (const name of RPC_METHODS) {
      Object.defineProperty(HarnessObject.prototype, name, {
        value(this: HarnessObject, ...args: unknown[]) {
          return this.#rpc(name, args);
        },
        writable: true,
        configurable: true,
      });
    }
  }

  constructor(ctx: DurableObjectState, env: Env, setup: HarnessObjectSetup<Env>) {
    super(ctx, env);
    const {
      heartbeatMs,
      methods,
      crashPoints,
      onReport,
      powers,
      authenticate,
      authorize,
      queryLimits,
      storage = ctx.storage,
      ...harnessOptions
    } = setup(env, ctx);
    this.#doors = { ...(powers ? { powers } : {}), ...(authenticate ? { authenticate } : {}), ...(authorize ? { authorize } : {}) };
    this.#alarm = new ObjectAlarm(storage, heartbeatMs ?? DEFAULT_HEARTBEAT_MS);
    const database = `durable-object:${ctx.id.name ?? ctx.id.toString()}`;
    const served = createHost({
      database,
      openStorage: () => SqliteStorage.open(new DurableObjectDatabase(storage), database, { queryLimits }),
      harness: { ...harnessOptions, clock: systemClock },
      ...(methods ? { methods } : {}),
      crashPoints: crashPoints ?? false,
      now: systemClock.now,
    });
    this.service = served.service;
    this.listenerCount = served.listenerCount;
    this.#endpoint = hostEndpoint(served.service);
    if (onReport) void served.service.onReport(onReport);
    // A failed open is kept, not thrown out of blockConcurrencyWhile (that would reset the object, and every
    // request would open and fail again): requests are answered with it, sockets get the `failed` status.
    const opened = ctx.blockConcurrencyWhile(async (): Promise<{ harness: Harness } | { error: unknown }> => {
      let harness: Harness;
      try {
        harness = await served.ready;
      } catch (error) {
        return { error };
      }
      // Pages still connected from an earlier instance (the object hibernated while they stayed): their
      // subscriptions come back from each socket's attachment, so they go on hearing without reconnecting.
      for (const socket of ctx.getWebSockets?.() ?? []) this.#restore(socket);
      await this.#alarm.attach(harness);
      return { harness };
    });
    this.ready = opened.then((outcome) => ("error" in outcome ? Promise.reject(outcome.error) : outcome.harness));
    this.ready.catch(() => {});
  }

  /**
   * Runs `handle` on the open harness, then starts the work (on the first event of this start) and puts the
   * alarm where the work needs it. Subclasses serve their own routes through it.
   */
  protected async serve<T>(handle: (harness: Harness) => Promise<T> | T): Promise<T> {
    const harness = await this.ready;
    try {
      return await handle(harness);
    } finally {
      this.#start(harness);
    }
  }

  /**
   * The client API: a WebSocket upgrade (any path), or `POST /rpc` with `{ method, args }` answered by
   * `{ value }` or `{ error }` (a serialized library error). Subclasses may serve their own routes and call
   * `super.fetch(request)` for these.
   */
  async fetch(request: Request): Promise<Response> {
    const harness = await this.ready.catch(() => undefined);
    try {
      return await this.#serveClient(request);
    } catch (error) {
      return this.errorResponse(error);
    } finally {
      if (harness) this.#start(harness);
    }
  }

  async #serveClient(request: Request): Promise<Response> {
    const upgrade = request.headers.get("upgrade")?.toLowerCase() === "websocket";
    const rpc = request.method === "POST" && new URL(request.url).pathname === "/rpc";
    if (!upgrade && !rpc) {
      return Response.json(
        { error: pageError(new InvalidRequest("Not found: connect a WebSocket, or POST /rpc { method, args }.")) },
        { status: 404 },
      );
    }
    const caller = await this.#authenticate(request);
    if (caller === undefined) {
      const refused = new NotAuthorized(upgrade ? "connect" : "rpc", "the object's authenticate hook refused this request.");
      return Response.json({ error: pageError(refused) }, { status: 401 });
    }
    // Accepted also when the open failed: the page's status subscription then says `failed`, with the cause.
    if (upgrade) return this.#accept(caller);
    await this.ready; // a failed open answers every request with its error
    const body = (await request.json().catch(() => undefined)) as { method?: unknown; args?: unknown } | undefined;
    if (typeof body?.method !== "string" || (body.args !== undefined && !Array.isArray(body.args))) {
      throw new InvalidRequest('POST /rpc takes JSON { "method": string, "args"?: [] }.');
    }
    const value = await this.#endpointFor(caller).call(body.method, (body.args as unknown[] | undefined) ?? []);
    return Response.json({ value: value ?? null });
  }

  /**
   * The answer to a request that failed with `error`: JSON `{ error: { name, message, details? } }` (no stack),
   * status 503 when the harness could not open (the object serves nothing until that is fixed), 403 for a call
   * the object's doors refused this caller, 400 for the library's other errors (a bad argument, a conflict), 500
   * for anything else. Subclasses' routes use it too.
   */
  protected async errorResponse(error: unknown): Promise<Response> {
    const failedOpen = await this.ready.then(
      () => false,
      (cause: unknown) => cause === error,
    );
    const status = failedOpen ? 503 : error instanceof NotAuthorized ? 403 : error instanceof DurableError ? 400 : 500;
    return Response.json({ error: pageError(error) }, { status });
  }

  /** Who sent `request` (`authenticate`), or undefined when it is refused; `null` when the object checks no one. */
  async #authenticate(request: Request): Promise<Json | undefined> {
    const { authenticate } = this.#doors;
    if (!authenticate) return null;
    try {
      return await authenticate(request);
    } catch {
      return undefined;
    }
  }

  /** The host as this caller reaches it: every call through the doors of the protocol's table and `authorize`. */
  #endpointFor(caller: Json): HostEndpoint {
    return guardEndpoint(this.#endpoint, caller, { ...this.#doors, notServed: NOT_SERVED });
  }

  #accept(caller: Json): Response {
    const Pair = (globalThis as unknown as { WebSocketPair?: new () => Record<0 | 1, HibernatableWebSocket> }).WebSocketPair;
    if (!Pair || !this.ctx.acceptWebSocket) return new Response("WebSockets need the Workers runtime.", { status: 501 });
    const { 0: page, 1: object } = new Pair();
    try {
      object.serializeAttachment({ version: 1, caller } satisfies Attachment);
    } catch {
      return Response.json(
        { error: pageError(new InvalidRequest("The caller that authenticate returned does not fit in a socket's attachment (2 KB).")) },
        { status: 400 },
      );
    }
    this.ctx.acceptWebSocket(object);
    return new Response(null, { status: 101, webSocket: page } as ResponseInit);
  }

  /**
   * A Worker's RPC call (see rpc.ts): through the same doors as a page's call, as the caller `RPC_CALLER` (the
   * powers the object turns on, then `authorize`); the work starts as after a request.
   */
  async #rpc(method: RpcMethodName, args: unknown[]): Promise<unknown> {
    const harness = await this.ready.catch(() => undefined);
    try {
      if (!harness) await this.ready; // the open's own error, not the host's "not open"
      return await this.#endpointFor(RPC_CALLER).call(method, args);
    } catch (error) {
      throw rpcError(error);
    } finally {
      if (harness) this.#start(harness);
    }
  }

  /** A page's message on its WebSocket (the object may have been asleep: hibernation). */
  async webSocketMessage(socket: HibernatableWebSocket, message: string | ArrayBuffer): Promise<void> {
    // Served also when the open failed: the host answers each call and the status with the open's error.
    const harness = await this.ready.catch(() => undefined);
    try {
      const connection = this.#connections.get(socket) ?? this.#connect(socket);
      const parsed = parseClientMessage(typeof message === "string" ? message : new TextDecoder().decode(message));
      if ("message" in parsed) connection.receive(parsed.message);
      else send(socket, { type: "error", id: parsed.id, error: pageError(parsed.error) });
    } finally {
      if (harness) this.#start(harness);
    }
  }

  /** Serves a page's socket; the subscriptions it holds are kept in the socket's attachment. */
  #connect(socket: HibernatableWebSocket): MessageConnection {
    const caller = this.#attachment(socket)?.caller;
    const connection = serveMessages(
      // A socket without a caller was accepted before the object checked callers: it may call only when none are.
      caller !== undefined || !this.#doors.authenticate ? this.#endpointFor(caller ?? null) : refuseAll,
      (reply) => send(socket, reply.type === "error" ? { ...reply, error: pageError(reply.error) } : reply),
      {
        onSubscriptions: (held) => {
          if (!this.#connections.has(socket)) return; // the page left: nothing to keep
          try {
            socket.serializeAttachment({
              version: 1,
              ...(caller !== undefined ? { caller } : {}),
              subscriptions: held,
            } satisfies Attachment);
          } catch {
            // Larger than an attachment may be (2 KB): after a hibernation this page reconnects instead.
            try {
              socket.serializeAttachment({ version: 1, ...(caller !== undefined ? { caller } : {}), overflow: true } satisfies Attachment);
            } catch {
              // The socket is closing.
            }
          }
        },
      },
    );
    this.#connections.set(socket, connection);
    return connection;
  }

  /** A socket that outlived the instance it subscribed on: subscribe again what it held, or have it reconnect. */
  #restore(socket: HibernatableWebSocket): void {
    const attachment = this.#attachment(socket);
    if (attachment?.subscriptions && !attachment.overflow) {
      this.#connect(socket).restore(attachment.subscriptions);
    } else if (attachment?.overflow) {
      socket.close(RESTARTED, "The object started again: reconnect to subscribe again.");
    }
    // No subscriptions: the page never subscribed; its next message is served as it comes.
  }

  #attachment(socket: HibernatableWebSocket): Attachment | undefined {
    try {
      const attachment = socket.deserializeAttachment() as Attachment | undefined;
      return attachment?.version === 1 ? attachment : undefined;
    } catch {
      return undefined;
    }
  }

  /** The page went away: its subscriptions end. */
  async webSocketClose(socket: HibernatableWebSocket): Promise<void> {
    const connection = this.#connections.get(socket);
    this.#connections.delete(socket);
    connection?.close();
  }

  async webSocketError(socket: HibernatableWebSocket): Promise<void> {
    await this.webSocketClose(socket);
  }

  /**
   * The alarm: the object was woken for a sleeping task that is due, or by the heartbeat. Resumes the work and
   * stays until nothing is ready to run (or one heartbeat has passed; the next alarm carries on).
   */
  async alarm(): Promise<void> {
    const harness = await this.ready;
    this.#alarm.fired();
    if (harness.closed) return; // closed by the app: this instance runs nothing more (the next start does)
    this.#start(harness);
    await this.#alarm.idle(harness);
    this.#alarm.arm(harness);
  }

  #start(harness: Harness): void {
    if (!this.#started && !harness.closed) {
      this.#started = true;
      harness.resume();
    }
    this.#alarm.arm(harness);
  }
}

/** A `HarnessObject` class for `setup`; export it (or a subclass of it) from the Worker. */
export function defineHarnessObject<Env>(setup: HarnessObjectSetup<Env>): new (ctx: DurableObjectState, env: Env) => HarnessObject<Env> {
  return class extends HarnessObject<Env> {
    constructor(ctx: DurableObjectState, env: Env) {
      super(ctx, env, setup);
    }
  };
}
