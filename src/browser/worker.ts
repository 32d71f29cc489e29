/// <reference lib="webworker" />
/**
 * The worker side (`pi-durable-web/worker`): owns the database, runs the scheduler, answers the page.
 *
 *   import { serveHarness } from "pi-durable-web/worker";
 *   serveHarness({ extensions: [myExtension] });   // first statement of the worker module
 *
 * `serveHarness` exposes the host over comlink synchronously (before any await), so no early message from
 * the page is lost. It then waits for the database lock (one owner per database, across tabs), opens the
 * OPFS database, recovers (a reload is the crash), and resumes scheduling. It is a composition: the
 * runtime-neutral host (src/host/), OPFS storage, Web Locks ownership (./ownership.ts) and comlink (./comlink.ts).
 */

import { createRegistry } from "../agent/builtins.ts";
import type { LeaseHolder } from "../follow/wire.ts";
import type { Harness, HarnessOptions } from "../harness.ts";
import { type CallerLimits, settledCallerLimits } from "../host/caller-bounds.ts";
import type { Authorize, OnAuthorizeError } from "../host/doors.ts";
import { createHost, type HostMethod } from "../host/host.ts";
import { type HarnessService, TEST_HOOK } from "../host/protocol.ts";
import type { Settings } from "../settings.ts";
import { openSqliteStorage } from "../storage/sqlite/open-storage.ts";
import type { QueryLimits } from "../storage/sqlite/query-rules.ts";
import { DEFAULT_DATABASE_PATH } from "../storage/sqlite/wasm.ts";
import type { Extension, Registry } from "../tasks/registry.ts";
import { exposeHost, type WorkerCaller } from "./comlink.ts";
import { watchCommits } from "./commit-watch.ts";
import { devicePlace } from "./device-place.ts";
import { type FollowObjectOptions, followObject, type TabFollow } from "./follow.ts";
import type { LeavingTicket } from "./follow-options.ts";
import { writesThroughObject } from "./follow-writes.ts";
import { hearLeaving, LEAVING_TICKET } from "./leaving.ts";
import { webLocksOwnership } from "./ownership.ts";
import { serveTabs } from "./tabs/leader.ts";

// Files for tools in a browser worker: `serveHarness({ env: opfsEnvs(), … })` (one OPFS directory per conversation).
export { OpfsEnv, opfsEnvs } from "../env/opfs.ts";
export type { Authorize, AuthorizeErrorAt, CallAtDoor, OnAuthorizeError } from "../host/doors.ts";
export type { WorkerCaller } from "./comlink.ts";
export { devicePlace } from "./device-place.ts";
export type { FollowObjectOptions } from "./follow.ts";

export interface ServeHarnessOptions {
  /** Extensions to install (task definitions, tools, hooks). */
  extensions?: Extension[];
  /** Or a registry of your own; `extensions` are installed into it. */
  registry?: Registry;
  /** The database's name in the OPFS pool. Default "/pi-durable.sqlite3". */
  path?: string;
  /** The OPFS directory of the pool (separate apps on one origin keep apart). */
  poolDirectory?: string;
  /**
   * Caps on one `client.query()` (rows, bytes, SQLite steps); unset ones keep their defaults (10,000 rows,
   * 4 MiB, 10 M steps: `DEFAULT_QUERY_LIMITS`). Past one, the query rejects with `QueryLimitExceeded`.
   */
  queryLimits?: Partial<QueryLimits>;
  settings?: Settings;
  models?: HarnessOptions["models"];
  env?: HarnessOptions["env"];
  /** Start scheduling as soon as the database is open (default true: a reload carries on by itself). */
  autoResume?: boolean;
  /** Extra methods the page can call with `client.call(name, ...args)`; they get the open harness. */
  methods?: Record<string, HostMethod>;
  /** Called once the harness is open (for example to start app work). */
  onReady?: (harness: Harness) => void | Promise<void>;
  /**
   * The test hook, default true: `client.armCrashPoint(name)` may stop the worker at a named crash point, and
   * the helpers of pi-durable-web/testing find the host inside the worker (`globalThis[TEST_HOOK]`). False
   * turns both off (`armCrashPoint` then rejects with `CrashPointsOff`).
   */
  crashPoints?: boolean;
  /**
   * Whether a caller may make a call: the page that owns this worker (`{ from: "page" }`) or, while this worker
   * has the database open, another tab of the origin (`{ from: "tab" }`). It sees each call's method, checked
   * arguments and exposure; false refuses it with `NotAuthorized`. Default: every call (a worker serves every
   * method to its origin's own code).
   */
  authorize?: Authorize<WorkerCaller>;
  /**
   * Told the hook's own error when `authorize` threw or rejected with anything but `NotAuthorized` (the caller was
   * answered `AuthorizeFailed`, retryable, with none of it): `(error, { caller, action, door })`, to log (decision 0117,
   * later). Default: nobody is told.
   */
  onAuthorizeError?: OnAuthorizeError<WorkerCaller>;
  /**
   * What one caller may hold at once (decision 0148): this worker's page, and each other tab while this worker leads,
   * each alone. `maxSubscriptions` (held and waiting; default 1,024; past it `TooManySubscriptions`) and
   * `maxCallsInFlight` (default 1,024; past it `TooManyCallsInFlight`). Each a positive whole number: anything else
   * fails the open with `InvalidSetting` (the page's status says why).
   */
  callerLimits?: Partial<CallerLimits>;
  /**
   * Runs the harness under its Durable Object's lease (decisions 0031, 0035): the worker opens a follow link to
   * `url` (the object's `/follow` socket), opens read-only while the object (or another device) holds the lease,
   * pushes every stored transaction live while this tab holds it, and hands it over when the page leaves
   * (`pagehide`). Absent: the tab alone holds its database, as before.
   */
  follow?: FollowObjectOptions;
}

/** The handle a worker keeps; mostly for the worker's own code and tests. */
export interface ServedHarness {
  /** Resolves with the harness once the database is open (rejects if opening failed). */
  ready: Promise<Harness>;
  /** The service the page talks to, for the worker's own code (for example `service.onStatus(...)`). */
  service: HarnessService;
  /** How many listeners the host holds for subscriptions (a page that unsubscribes leaves none). */
  listenerCount(): number;
}

export function serveHarness(options: ServeHarnessOptions = {}): ServedHarness {
  const path = options.path ?? DEFAULT_DATABASE_PATH;
  const database = `${options.poolDirectory ?? "default pool"}:${path}`;
  const registry = options.registry ?? createRegistry();
  for (const extension of options.extensions ?? []) registry.install(extension);
  // A tab follows under this browser's own place unless the app names one (decision 0046).
  // A bad follow option (`InvalidSetting`) fails the open, as a bad setting does: the page's status says why.
  let follow: TabFollow | undefined;
  // A bad bound fails the open as a bad setting does; the page is served with the defaults meanwhile.
  const { limits, refused: badLimits } = settledCallerLimits(options.callerLimits);
  let refused: unknown = badLimits;
  try {
    follow = options.follow ? followObject({ ...options.follow, place: options.follow.place ?? devicePlace() }) : undefined;
  } catch (error) {
    refused ??= error;
  }
  const {
    service: host,
    ready,
    listenerCount,
  } = createHost({
    database,
    openStorage: async () => {
      if (refused) throw refused;
      await follow?.ready;
      const storage = await openSqliteStorage({
        vfs: "opfs-sahpool",
        path,
        poolDirectory: options.poolDirectory,
        ...(options.queryLimits ? { queryLimits: options.queryLimits } : {}),
      });
      // The commit watch is a test hook like the crash points (crashEveryCommit freezes the storage at a commit).
      return options.crashPoints === false ? storage : watchCommits(storage);
    },
    // A reload carries on by itself: tasks the crash left running are taken again directly.
    harness: {
      registry,
      settings: options.settings,
      models: options.models,
      env: options.env,
      resume: options.autoResume !== false,
      ...(follow ? { lease: follow.lease, serverCalls: follow.serverCalls } : {}),
    },
    ownership: webLocksOwnership(database),
    methods: options.methods,
    onReady: (harness) => {
      follow?.attach(harness);
      return options.onReady?.(harness);
    },
    ...(follow
      ? {
          leave: (handedOver: () => void) => follow.leave(handedOver),
          takeBack: () => follow.takeBack(),
          ...(follow.rebuild ? { rebuild: follow.rebuild } : {}),
          onFork: (listener: () => void) => void follow.onFork(listener),
          onHolder: (listener: (holder: LeaseHolder | undefined) => void) => void follow.onHolder(listener),
          pageCallsElsewhere: () => follow.pageCalls,
          beforeStorageClose: () => follow.drain(),
        }
      : {}),
    crashPoints: options.crashPoints,
    now: () => performance.now(),
    nextTurn: () => new Promise((resolve) => setTimeout(resolve, 0)),
    // A page paints at most once per animation frame; a worker has no frames of its own.
    liveFrames: { frameMs: 16, setTimer: (ms, callback) => void setTimeout(callback, ms) },
  });
  // A following tab's writes go through its object to the holder (decisions 0096, 0097). Its close ends the follow link
  // too, once the harness closed (decision 0133): before, the link's socket, reconnects and timers outlived it. Only
  // this close: after a takeover the host opens again and follows on.
  const service = follow ? { ...writesThroughObject(host, follow), close: () => host.close().finally(() => follow.close()) } : host;
  // Expose first, synchronously: messages the page sends while the database opens are queued, not lost.
  const doors = {
    ...(options.authorize ? { authorize: options.authorize } : {}),
    ...(options.onAuthorizeError ? { onAuthorizeError: options.onAuthorizeError } : {}),
  };
  exposeHost(service, undefined, doors, limits);
  // Where the object stands, told to this worker's own page (a dedicated worker's `postMessage` reaches it alone): the
  // page says it is leaving on a socket of its own at `pagehide`, in case this worker never gets its task (decision 0101).
  if (follow) follow.onLeavingTicket((ticket) => tellPage(ticket));
  // The page said it on that socket (decision 0113): this worker writes nothing from a grace after, whenever it hears it.
  if (follow) listenForLeaving(follow);
  // Taking the lease back by itself (decision 0044): each time the tab follows its object with the link up.
  if (follow && options.follow?.returnWhenOnline) follow.onFollowing(() => void service.runHere().catch(() => {}));
  // While this worker has the database open, the other tabs of the origin reach it too (./tabs/).
  serveTabs(service, database, doors, limits);
  if (options.crashPoints !== false) (globalThis as { [TEST_HOOK]?: HarnessService })[TEST_HOOK] = service;
  return { ready, service, listenerCount };
}

/** Hears the page's `LEAVING_SAID` (comlink's own listener passes over a message without its fields). */
function listenForLeaving(follow: TabFollow): void {
  const scope = globalThis as { addEventListener?: (type: "message", listener: (event: MessageEvent) => void) => void; document?: unknown };
  if (scope.document !== undefined || typeof scope.addEventListener !== "function") return; // not a dedicated worker
  // Both clocks are this machine's wall clock: how long ago the page sent it, whatever this worker's task queue held.
  scope.addEventListener("message", hearLeaving(follow));
}

/** Posts the leaving ticket to the page (not a comlink message: comlink passes over data without an `id`). */
function tellPage(ticket: LeavingTicket | undefined): void {
  const scope = globalThis as { postMessage?: (message: unknown) => void; document?: unknown };
  if (scope.document !== undefined || typeof scope.postMessage !== "function") return; // not a dedicated worker
  scope.postMessage({ [LEAVING_TICKET]: ticket ?? null });
}
