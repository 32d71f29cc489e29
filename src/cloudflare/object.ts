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
 *   with no client connected. While tasks run the harness's own timers run the work; once none is ready to run
 *   or running its timers are parked and the alarm comes for them (object-clock.ts, decision 0052): the object
 *   keeps no timer, so it is evicted while its tasks sleep or wait, and the alarm starts its next instance.
 * - It serves the same client API as the browser worker — the runtime-neutral host of src/host/ — over a
 *   WebSocket (the hibernation API, sockets.ts: pages stay subscribed while the object sleeps), over HTTP
 *   (`POST /rpc` with `{ method, args }`) and as RPC methods (rpc.ts), each call through the same doors. A crash
 *   (`ctx.abort()`, an eviction with the sockets) drops the sockets, and `connectHarness(url)` reconnects.
 *
 * Its parts: options.ts (what the app sets), object-doors.ts (who calls, and each call's doors), alarm.ts (the one
 * alarm), sockets.ts (the pages' sockets),
 * answers.ts (errors as JSON), rpc.ts (the Worker's calls), database.ts (the SQLite of `ctx.storage`), follow.ts,
 * following.ts and follow-copy.ts (follow mode: the lease's arbiter and its socket, the object's end of the links
 * and its expiry alarm, the copy served to pages while a tab holds the lease).
 */
import { DurableObject } from "cloudflare:workers";
import { systemClock } from "../base/clock.ts";
import type { Json } from "../base/json.ts";
import { InvalidRequest, NotAuthorized } from "../errors.ts";
import { copyWrites } from "../follow/copy-writes.ts";
import { WaitingWrites } from "../follow/waiting-writes.ts";
import type { Harness } from "../harness.ts";
import { settledCallerLimits } from "../host/caller-bounds.ts";
import { type HostEndpoint, hostEndpoint } from "../host/endpoint.ts";
import { createHost } from "../host/host.ts";
import type { HarnessService } from "../host/protocol.ts";
import { errorShape } from "../host/status-parts.ts";
import { deliver } from "../reports.ts";
import { SqliteStorage } from "../storage/sqlite/storage.ts";
import { ObjectAlarm } from "./alarm.ts";
import { errorAnswer, pageError } from "./answers.ts";
import { DurableObjectDatabase } from "./database.ts";
import { acceptFollow, claimedThroughFollow, FOLLOW_PATH, followCaller, objectLeaseBook, takeoverGate } from "./follow.ts";
import { objectCopy } from "./follow-copy.ts";
import { callerKey, ObjectFollowing } from "./following.ts";
import { leaseLapsed } from "./lease-lapse.ts";
import { ObjectClock } from "./object-clock.ts";
import { authenticateRequest, guardObjectEndpoint, type ObjectDoors, objectDoors } from "./object-doors.ts";
import { DEFAULT_HEARTBEAT_MS, type HarnessObjectSetup } from "./options.ts";
import { type HarnessRpc, RPC_CALLER, RPC_METHODS, type RpcMethodName, rpcError } from "./rpc.ts";
import { objectServerCalls } from "./server-call-store.ts";
import { answerClose, ObjectSockets } from "./sockets.ts";
import type { DurableObjectState, HibernatableWebSocket } from "./types.ts";

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
  readonly #doors: ObjectDoors;
  readonly #waiting = new WaitingWrites(); // each caller's writes waiting at the copy (decision 0097)
  /** The pages' sockets (sockets.ts). */
  readonly #sockets: ObjectSockets;
  /** The one alarm (alarm.ts). */
  readonly #alarm: ObjectAlarm;
  /** The harness clock: its timers are parked while nothing runs (object-clock.ts). */
  readonly #clock = new ObjectClock();
  /** Follow mode (following.ts): the object's end of the follow links, its expiry alarm. */
  readonly #following: ObjectFollowing | undefined;
  /** The harness once open (in follow mode: once this object took the lease). */
  #harness: Harness | undefined;
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
      onAuthorizeError,
      queryLimits,
      callerLimits,
      follow,
      storage = ctx.storage,
      ...harnessOptions
    } = setup(env, ctx);
    this.#doors = objectDoors({ powers, authenticate, authorize, onAuthorizeError });
    // The alarm's own failures (a refused `setAlarm`) go to the app's `onReport` as an error report (0147; not to pages).
    const alarmFailed = (error: unknown) => deliver(onReport, { kind: "error", error: errorShape(error) });
    this.#alarm = new ObjectAlarm(storage, heartbeatMs ?? DEFAULT_HEARTBEAT_MS, this.#clock, alarmFailed);
    // A bad bound fails the open as bad queryLimits do (decision 0148); the sockets keep the defaults meanwhile.
    const bounds = settledCallerLimits(callerLimits);
    this.#sockets = new ObjectSockets(ctx, (caller) => this.#endpointFor(caller), Boolean(authenticate), bounds.limits);
    const database = `durable-object:${ctx.id.name ?? ctx.id.toString()}`;
    const openStorage = () =>
      bounds.refused ? Promise.reject(bounds.refused) : SqliteStorage.open(new DurableObjectDatabase(storage), database, { queryLimits });
    // Follow mode: the copy is opened first (pushes are applied to it), and the harness opens on it only once
    // this object takes the lease (the gate), under the lease of its own book.
    const copy = follow ? openStorage() : undefined;
    const place = follow?.place ?? "object";
    // A new holder is told to the pages the copy serves at once, not at its next status (decision 0075).
    let holderChanged = () => {};
    const book = follow ? objectLeaseBook(storage, follow.ttlMs, () => queueMicrotask(() => holderChanged())) : undefined;
    const gate = follow ? takeoverGate() : undefined;
    const server = book ? objectServerCalls({ storage, book, registry: harnessOptions.registry, env: harnessOptions.env }) : undefined;
    const served = createHost({
      database,
      openStorage: copy ? () => copy : openStorage,
      ...(gate ? { ownership: gate.ownership } : {}),
      // Pages whose sockets outlived a hibernation keep the page tool calls they are running (decision 0028).
      harness: {
        ...harnessOptions,
        clock: this.#clock,
        // And pages that claimed through a follow socket still open (decision 0051).
        connectedPages: [...this.#sockets.connectedPages(), ...claimedThroughFollow(ctx)],
        ...(book && server ? { lease: { place, arbiter: book }, serverCalls: server.calls } : {}),
      },
      ...(methods ? { methods } : {}),
      crashPoints: crashPoints ?? false,
      now: systemClock.now,
    });
    // Follow mode: pages are served the copy, live, while the tab holds the lease (follow-copy.ts).
    const copied =
      copy && book
        ? objectCopy({
            database,
            storage: copy,
            harness: harnessOptions,
            ...(methods ? { methods } : {}),
            book,
            place,
            end: () => this.#following?.end,
            switching: () => this.#following?.switching ?? false,
          })
        : undefined;
    if (copied) holderChanged = () => copied.copy.holderChanged();
    this.service = copied?.copy.service ?? served.service;
    this.listenerCount = copied ? () => copied.listenerCount() + served.listenerCount() : served.listenerCount;
    this.#endpoint = hostEndpoint(this.service);
    if (onReport) void this.service.onReport(onReport);
    const held = async (harness: Harness) => {
      this.#sockets.restoreAll();
      await this.#alarm.attach(harness);
      this.#harness = harness;
      return harness;
    };
    if (follow && copy && book && gate && copied) {
      let taken!: (harness: Harness) => void;
      this.ready = new Promise<Harness>((resolve) => (taken = resolve));
      this.#following = new ObjectFollowing(ctx, follow, {
        place,
        storage,
        copy,
        book,
        apply: (batch) => copied.copy.follow(batch),
        open: async () => {
          gate.open();
          const harness = await held(await served.ready);
          await copied.copy.hold(served); // pages keep their subscriptions; the harness here answers from now on
          taken(harness);
          this.#start(harness);
          return harness;
        },
        ...(server ? { serverTools: server.handler } : {}),
        copyWrites: copyWrites(() => copied.copy.service, { waiting: this.#waiting }), // as a page on the object writes (decisions 0096, 0097)
        restorePages: () => this.#sockets.restoreAll(),
        holds: () => this.#harness !== undefined,
        lapsed: () => leaseLapsed(this.#harness?.lease?.epoch, book.record, place, systemClock.now()),
        switchMoved: () => copied.copy.switchMoved(), // pages see the switch and the lapse begin and end (decision 0145)
        ...(onAuthorizeError ? { onAuthorizeError } : {}),
      });
      return;
    }
    this.#following = undefined;
    // A failed open is kept, not thrown out of blockConcurrencyWhile (that would reset the object, and every
    // request would open and fail again): requests are answered with it, sockets get the `failed` status.
    const opened = ctx.blockConcurrencyWhile(async (): Promise<{ harness: Harness } | { error: unknown }> => {
      try {
        return { harness: await held(await served.ready) };
      } catch (error) {
        return { error };
      }
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
    if (this.#following && new URL(request.url).pathname === FOLLOW_PATH) return this.#acceptFollow(request);
    // Following (the tab holds the lease), the harness is not open: what needs it waits or is refused.
    const harness = this.#following ? this.#harness : await this.ready.catch(() => undefined);
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
    const caller = await authenticateRequest(this.#doors, request);
    if (caller === undefined) {
      const refused = new NotAuthorized(upgrade ? "connect" : "rpc", "the object's authenticate hook refused this request.");
      return Response.json({ error: pageError(refused) }, { status: 401 });
    }
    // Accepted also when the open failed: the page's status subscription then says `failed`, with the cause.
    if (upgrade) return this.#sockets.accept(caller);
    if (!this.#following) await this.ready; // a failed open answers every request with its error (following: the copy answers)
    const body = (await request.json().catch(() => undefined)) as { method?: unknown; args?: unknown } | undefined;
    if (typeof body?.method !== "string" || (body.args !== undefined && !Array.isArray(body.args))) {
      throw new InvalidRequest('POST /rpc takes JSON { "method": string, "args"?: [] }.');
    }
    const value = await this.#endpointFor(caller).call(body.method, (body.args as unknown[] | undefined) ?? []);
    return Response.json({ value: value ?? null });
  }

  /**
   * The answer to a request that failed with `error` (answers.ts): JSON `{ error: { name, message, details? } }`
   * (no stack), status 503 when the harness could not open, `authorize` failed or it is `NotReady` (its switch), 403
   * for a call the object's doors refused this caller, 400 for the library's other errors, 500 for anything else.
   * Subclasses' routes use it too.
   */
  protected async errorResponse(error: unknown): Promise<Response> {
    const failedOpen = await this.ready.then(
      () => false,
      (cause: unknown) => cause === error,
    );
    return errorAnswer(error, failedOpen);
  }

  /**
   * The host as this caller reaches it: every call through the doors of the protocol's table and `authorize`; in follow
   * mode a page's writes count in its caller's share with its following tabs' (decision 0097), an RPC call's do not.
   */
  #endpointFor(caller: Json, page = true): HostEndpoint {
    const counted = page && this.#following ? this.#waiting.bound(this.#endpoint, `caller:${callerKey(caller)}`) : this.#endpoint;
    return guardObjectEndpoint(counted, caller, this.#doors);
  }

  /**
   * A Worker's RPC call (see rpc.ts): through the same doors as a page's call, as the caller `RPC_CALLER` (the
   * powers the object turns on, then `authorize`); the work starts as after a request.
   */
  async #rpc(method: RpcMethodName, args: unknown[]): Promise<unknown> {
    const harness = this.#following ? this.#harness : await this.ready.catch(() => undefined);
    try {
      if (!harness && !this.#following) await this.ready; // the open's own error, not the host's "not open" (following: the copy answers)
      return await this.#endpointFor(RPC_CALLER, false).call(method, args);
    } catch (error) {
      throw rpcError(error);
    } finally {
      if (harness) this.#start(harness);
    }
  }

  /** A follow link's upgrade (follow.ts): the caller is authenticated here, each frame authorized as it comes. */
  async #acceptFollow(request: Request): Promise<Response> {
    const caller = await authenticateRequest(this.#doors, request);
    if (caller === undefined || request.headers.get("upgrade")?.toLowerCase() !== "websocket") {
      const refused = new NotAuthorized("follow", "connect a WebSocket that the object's authenticate hook accepts.");
      return Response.json({ error: pageError(refused) }, { status: caller === undefined ? 401 : 400 });
    }
    return acceptFollow(this.ctx, caller);
  }

  /** A page's message on its WebSocket (the object may have been asleep: hibernation). */
  async webSocketMessage(socket: HibernatableWebSocket, message: string | ArrayBuffer): Promise<void> {
    const follower = this.#following ? followCaller(socket) : undefined;
    if (follower) return this.#following!.message(socket, follower.caller, message);
    // Served also when the open failed: the host answers each call and the status with the open's error.
    const harness = this.#following ? this.#harness : await this.ready.catch(() => undefined);
    try {
      this.#sockets.receive(socket, message);
    } finally {
      if (harness) this.#start(harness);
    }
  }

  /**
   * The page went away: its subscriptions end. A tab's follow socket: the object's calls waiting on it are lost. The
   * peer's Close frame is answered (decision 0136): the Hibernation API sends none by itself, and before, a page's or
   * tab's socket closed by its side stayed `CLOSING` until its own timeout and ended 1006.
   */
  async webSocketClose(socket: HibernatableWebSocket, code?: number, reason?: string): Promise<void> {
    try {
      if (this.#following && followCaller(socket)) return await this.#following.closed(socket);
      this.#sockets.close(socket);
    } finally {
      answerClose(socket, code, reason);
    }
  }

  async webSocketError(socket: HibernatableWebSocket): Promise<void> {
    await this.webSocketClose(socket);
  }

  /**
   * The alarm: the object was woken for a sleeping task that is due, or by the heartbeat. Resumes the work and
   * stays until nothing is ready to run (or one heartbeat has passed; the next alarm carries on).
   */
  async alarm(): Promise<void> {
    // Following: the alarm is the lease's expiry, or the end of an instance that handed the lease back or whose
    // lease lapsed while it was idle (following.ts).
    if (this.#following && !(await this.#following.alarm())) return;
    const harness = await this.ready;
    this.#alarm.fired();
    if (harness.closed) return; // closed by the app: this instance runs nothing more (the next start does)
    this.#clock.fireDue(); // the parked timers the alarm came for (a sleeper's wake-up, a backoff)
    this.#start(harness);
    await this.#alarm.idle(harness);
    this.#alarm.arm(harness);
  }

  #start(harness: Harness): void {
    // Following: an idle holder let its lease lapse (object-clock.ts); this instance ends and its next one takes the
    // lease again under a new epoch, as after an eviction.
    if (this.#following?.ended()) return;
    this.#clock.fireDue(); // what came due while the timers were parked (a renewal while the lease still holds)
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
