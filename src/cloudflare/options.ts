/** What an app tells its harness object: the harness's options, and the object's own (alarm, doors, storage). */

import type { Json } from "../base/json.ts";
import type { HarnessOptions } from "../harness.ts";
import type { CallerLimits } from "../host/caller-bounds.ts";
import type { Authorize, OnAuthorizeError } from "../host/doors.ts";
import type { HostMethod } from "../host/host.ts";
import type { MethodName } from "../host/protocol.ts";
import type { QueryLimits } from "../storage/sqlite/query-rules.ts";
import type { FollowOptions } from "./follow.ts";
import type { DurableObjectState, DurableObjectStorage } from "./types.ts";

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
  /**
   * Told the hook's own error when `authorize` or `follow.authorize` threw or rejected with anything but `NotAuthorized`
   * (the caller was answered `AuthorizeFailed`, retryable, with none of it): `(error, { caller, action, door })`, to log
   * (decision 0117, later). Default: nobody is told.
   */
  onAuthorizeError?: OnAuthorizeError<Json>;
  /**
   * What each page socket (one caller) may hold at once (decision 0148): `maxSubscriptions` (held and waiting, restored
   * ones after a hibernation included; default 1,024; past it `TooManySubscriptions`) and `maxCallsInFlight` (default
   * 1,024; past it `TooManyCallsInFlight`). Each a positive whole number: anything else fails the open (`InvalidSetting`).
   */
  callerLimits?: Partial<CallerLimits>;
  /**
   * Follow mode (docs/decisions/0031): the object is the lease's arbiter and the live copy of its tab's log,
   * over a follow link (`/follow`, a WebSocket); it opens its harness only when it takes the lease (the tab's
   * release, or the lease's expiry — watched by the alarm). Absent: the object runs its harness alone.
   */
  follow?: FollowOptions;
}

/** Builds the harness options of one object from its environment (bindings, secrets) and state. */
export type HarnessObjectSetup<Env> = (env: Env, ctx: DurableObjectState) => HarnessObjectOptions;

export const DEFAULT_HEARTBEAT_MS = 30_000;
