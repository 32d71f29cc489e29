/**
 * The doors of a host that serves callers it does not trust outright (a Durable Object reached from the
 * internet, a worker serving other origins): each call is checked against its row in `PROTOCOL` before it
 * reaches the host — a known method with well-formed arguments, served here, of an exposure this host turns
 * on — then against the app's `authorize` hook, with the caller's identity the transport established (a
 * request's, or a socket's since it connected). A refused call is a typed error and runs nothing.
 */
import { safely } from "../base/safely.ts";
import { AuthorizeFailed, MethodNotServed, NotAuthorized } from "../errors.ts";
import { checkCall, type HostEndpoint } from "./endpoint.ts";
import { cancelPending, pendingSubscription } from "./pending-subscription.ts";
import { type Exposure, exposureOf, type MethodName, PROTOCOL } from "./protocol.ts";

/** One call as the `authorize` hook sees it (arguments already checked against the method's schema). */
export interface CallAtDoor {
  method: MethodName;
  kind: "call" | "subscribe";
  args: readonly unknown[];
  exposure: Exposure;
}

/**
 * Whether `caller` may make `call`; false refuses it with `NotAuthorized`, and so does a thrown `NotAuthorized` (answered
 * as thrown, its message and all). Any other throw (or rejection) — the library's own errors included, such as the
 * host's "not open" — is no answer: the call fails with `AuthorizeFailed`, retryable, without the hook's message
 * (decision 0117, its second review).
 */
export type Authorize<Caller> = (caller: Caller, call: CallAtDoor) => boolean | Promise<boolean>;

/** Where an `authorize` hook failed: its caller, what it asked (a method, or a follow link's action) and which door. */
export interface AuthorizeErrorAt<Caller> {
  caller: Caller;
  action: string;
  /** "host": the host's methods (a page's socket, `POST /rpc`, RPC, a tab of the origin); "follow": a follow link. */
  door: "host" | "follow";
}

/**
 * Told the hook's own error each time an `authorize` hook threw or rejected with anything but `NotAuthorized` — its
 * caller was answered `AuthorizeFailed`, with none of that error (decision 0117, later); on a follow link also where
 * the door answers nothing (a following tab's ack, the pusher's registration after a granted lease call: skipped, as
 * for a refusal; decision 0123) — never for a refusal: the app's place to log its bug or its permission store's outage.
 * A throw of this callback is its own: swallowed.
 */
export type OnAuthorizeError<Caller> = (error: unknown, at: AuthorizeErrorAt<Caller>) => void;

export interface Doors<Caller> {
  /**
   * The `power` methods this host serves (see `Exposure` in protocol.ts); `page` ones are always served.
   * Default: none.
   */
  powers?: readonly MethodName[];
  /** Asked for every call and subscription that passed the table. Default: every caller may. */
  authorize?: Authorize<Caller>;
  /** Told when `authorize` failed (threw anything but `NotAuthorized`). */
  onAuthorizeError?: OnAuthorizeError<Caller>;
  /** A host whose life its runtime owns: methods with `servedToPages: false` (`close`, …) are not served, and why. */
  notServed?: string;
}

/** `endpoint` as one caller reaches it through the doors. */
export function guardEndpoint<Caller>(endpoint: HostEndpoint, caller: Caller, doors: Doors<Caller>): HostEndpoint {
  const powers = new Set<string>(doors.powers ?? []);
  const admit = async (method: string, kind: "call" | "subscribe", args: unknown[]) => {
    checkCall(method, kind, args);
    if (doors.notServed !== undefined && !PROTOCOL[method].servedToPages) throw new MethodNotServed(method, doors.notServed);
    const exposure = exposureOf(method, args);
    if (exposure === "power" && !powers.has(method))
      throw new NotAuthorized(method, `it is a power this host does not turn on (add ${JSON.stringify(method)} to its powers).`);
    if (!doors.authorize) return;
    let allowed: boolean;
    try {
      allowed = await doors.authorize(caller, { method, kind, args, exposure });
    } catch (error) {
      // The hook refused on purpose (`NotAuthorized`): answered as it is (decision 0117 after review). Only that: any
      // other of the library's errors a hook lets through (its lookup found the host "not open") is no refusal
      // (0117's second review; for a while every non-retryable one was, ending a page's subscription for good).
      if (error instanceof NotAuthorized) throw error;
      // The app's bug, not a refusal of this caller: a page's subscriptions are not ended for good by it, and the
      // hook's message (its internals) stays here as the cause (decision 0117; before: NotAuthorized, message and all),
      // and the app is told it (0117, later).
      const told = doors.onAuthorizeError;
      if (told) safely(() => told(error, { caller, action: method, door: "host" }));
      throw new AuthorizeFailed(method, { cause: error });
    }
    if (allowed !== true) throw new NotAuthorized(method, "its authorize hook refused this caller.");
  };
  return {
    async call(method, args) {
      await admit(method, "call", args);
      return endpoint.call(method, args);
    },
    subscribe(method, args, emit, lost) {
      // Given up while the door decides or the host waits to answer (decision 0107): the host's side is given up too.
      let cancelled = false;
      let inner: Promise<number> | undefined;
      const answered = admit(method, "subscribe", args).then(() => {
        inner = endpoint.subscribe(method, args, emit, lost);
        if (cancelled) cancelPending(inner);
        return inner;
      });
      return pendingSubscription(answered, () => {
        cancelled = true;
        cancelPending(inner);
      });
    },
    unsubscribe: (id) => endpoint.unsubscribe(id),
  };
}
