/**
 * The host's endpoint over comlink (a worker and its page). Listeners travel as `Comlink.proxy` functions and
 * are released when unsubscribed; the database image is transferred, not copied; and errors are rebuilt as
 * the library's classes on the other side (`instanceof ReadOnlySession` holds on the page), with name,
 * message and fields kept. Both sides install the error handler by importing this module.
 */
import * as Comlink from "comlink";
import { InvalidRequest } from "../errors.ts";
import { CallerBounds, type CallerLimits } from "../host/caller-bounds.ts";
import { type Authorize, type Doors, guardEndpoint } from "../host/doors.ts";
import { type HostEndpoint, hostEndpoint, type ServedEndpoint, type SubscriptionLost } from "../host/endpoint.ts";
import { deserializeError, type SerializedError, serializeError } from "../host/error-wire.ts";
import { cancelPending, pendingSubscription } from "../host/pending-subscription.ts";
import { ALL_POWERS, type HarnessService } from "../host/protocol.ts";

/** Who calls a browser worker's host: the page that owns the worker, or another tab of the origin (a follower). */
export interface WorkerCaller {
  from: "page" | "tab";
}

/** A worker's doors: its `authorize` hook (or that hook alone), and who hears when it fails (decision 0117, later). */
export type WorkerDoors = Authorize<WorkerCaller> | Pick<Doors<WorkerCaller>, "authorize" | "onAuthorizeError">;

/**
 * `endpoint` as `caller` reaches it: every method (a worker serves its origin's own code), each call asked of
 * `authorize` when the app gave one.
 */
export function workerDoor(endpoint: HostEndpoint, caller: WorkerCaller, doors: WorkerDoors | undefined): HostEndpoint {
  const { authorize, onAuthorizeError } = typeof doors === "function" ? { authorize: doors, onAuthorizeError: undefined } : (doors ?? {});
  if (!authorize) return endpoint;
  return guardEndpoint(endpoint, caller, { powers: ALL_POWERS, authorize, ...(onAuthorizeError ? { onAuthorizeError } : {}) });
}

// comlink's own "throw" handler keeps name, message and stack of a thrown Error; this one keeps its class and
// fields too, and leaves whatever is not an Error to comlink.
const comlinkThrow = Comlink.transferHandlers.get("throw")!;
Comlink.transferHandlers.set("throw", {
  canHandle: comlinkThrow.canHandle,
  serialize(thrown) {
    const { value } = thrown as { value: unknown };
    if (value instanceof Error) return [{ library: serializeError(value) }, []];
    return comlinkThrow.serialize(thrown);
  },
  deserialize(serialized) {
    const { library } = serialized as { library?: SerializedError };
    if (library) throw deserializeError(library);
    return comlinkThrow.deserialize(serialized);
  },
});

/**
 * Serves `host` to the page on the other end of `endpoint` (the worker's own scope by default). That page is one caller:
 * `limits` bounds its subscriptions (held and waiting) and its calls in flight (decision 0148; `DEFAULT_CALLER_LIMITS`).
 */
export function exposeHost(host: HarnessService, endpoint?: Comlink.Endpoint, doors?: WorkerDoors, limits?: CallerLimits): ServedEndpoint {
  /** Each subscription's release of the page's proxies (its listener and its `lost`), by its listener; once each. */
  const releases = new WeakMap<object, () => void>();
  const bounds = new CallerBounds(limits);
  /** The page's subscriptions held or waiting here, one place each: it leaves at its release (decision 0148). */
  const placed = new Set<object>();
  const served = hostEndpoint(host, {
    // The page's listener and its `lost` are proxies holding a MessagePort each; release them with the subscription.
    dropped: (emit) => releases.get(emit)?.(),
  });
  const door = workerDoor(served, { from: "page" }, doors);
  /** Subscriptions not answered yet, by the page's ticket: the page may give one up meanwhile (decision 0107). */
  const unanswered = new Map<string, Promise<number>>();
  const exposed: HostEndpoint & { cancelSubscribe(ticket: unknown): void } = {
    async call(method, args) {
      // Past the page's bound of calls in flight: refused, not run (decision 0148).
      const value = await bounds.call(method, () => door.call(method, args));
      // The image is a copy made for this call: hand its buffer over instead of copying it again.
      return method === "exportDatabase" && value instanceof Uint8Array ? Comlink.transfer(value, [value.buffer as ArrayBuffer]) : value;
    },
    subscribe(method, args, emit, ticket?: unknown, lost?: unknown) {
      let released = false;
      const place = {};
      const release = () => {
        if (released) return;
        released = true;
        placed.delete(place);
        for (const proxy of [emit, lost]) (proxy as Comlink.Remote<() => void> | undefined)?.[Comlink.releaseProxy]?.();
      };
      releases.set(emit, release);
      // The page's `lost` (a proxy): told when the host ends the subscription itself (decision 0117). Its argument is
      // structured-cloned, which keeps no class: it travels as the wire's SerializedError, rebuilt on the page.
      const told: SubscriptionLost | undefined =
        typeof lost === "function" ? (error) => void (lost as (wire: SerializedError) => unknown)(serializeError(error)) : undefined;
      // A ticket names one subscribe until it is answered: a second under it would leave the first one's unreachable.
      if (typeof ticket === "string" && unanswered.has(ticket)) {
        release();
        return Promise.reject(new InvalidRequest(`Ticket ${JSON.stringify(ticket)} names a subscribe not answered yet; use a new one.`));
      }
      // Past the page's bound (held and waiting): refused before anything is held (decision 0148).
      try {
        bounds.admitSubscription(method, placed.size);
      } catch (error) {
        release();
        return Promise.reject(error);
      }
      placed.add(place);
      const subscribing = door.subscribe(method, args, emit, told);
      // Refused before the host held it (the door, its hook): nothing else releases the proxies (before: leaked).
      subscribing.catch(release);
      if (typeof ticket !== "string") return subscribing;
      unanswered.set(ticket, subscribing);
      // Forgotten once answered, only if it is still this subscribe's (decision 0111).
      const settled = () => void (unanswered.get(ticket) === subscribing && unanswered.delete(ticket));
      subscribing.then(settled, settled);
      return subscribing;
    },
    unsubscribe: (id) => served.unsubscribe(id),
    cancelSubscribe(ticket) {
      if (typeof ticket === "string") cancelPending(unanswered.get(ticket));
    },
  };
  Comlink.expose(exposed, endpoint);
  return served;
}

/** The page's side: an endpoint whose listeners are passed to the worker as proxies. */
export function wrapHost(worker: Comlink.Endpoint): HostEndpoint {
  const remote = Comlink.wrap<
    HostEndpoint & {
      subscribe(
        method: string,
        args: unknown[],
        emit: (value: unknown) => void,
        ticket: string,
        lost: ((wire: SerializedError) => void) | undefined,
      ): Promise<number>;
      cancelSubscribe(ticket: string): Promise<void>;
    }
  >(worker);
  // Tickets unique to this wrap: another wrap of the same port (two clients of one worker, two copies of this library
  // in one page) numbers its own from 1 too, and a cancel must give up only its own wait (decision 0111).
  const wrap = [...crypto.getRandomValues(new Uint32Array(2))].map((word) => word.toString(36)).join("");
  let tickets = 0;
  return {
    call: (method, args) => remote.call(method, args),
    subscribe(method, args, emit, lost) {
      // A ticket names the subscribe until it is answered, so the page can give it up meanwhile (decision 0107).
      const ticket = `subscribe-${wrap}-${++tickets}`;
      // `lost` hears the worker's error as the wire's SerializedError and is told the library's class (NotFound stays NotFound).
      const told = lost && Comlink.proxy((wire: SerializedError) => lost(deserializeError(wire)));
      const subscribing = remote.subscribe(method, args, Comlink.proxy(emit), ticket, told);
      let answered: number | undefined;
      let cancelled = false;
      // Given up once answered (or answered after it was given up: the worker had settled it already), the
      // subscription is unsubscribed by its id; the worker forgets a ticket once it answered it.
      const drop = (id: number) => void remote.unsubscribe(id).catch(() => {});
      subscribing.then(
        (id) => (cancelled ? drop(id) : (answered = id)),
        () => {},
      );
      return pendingSubscription(subscribing, () => {
        if (cancelled) return;
        cancelled = true;
        // A worker that is gone holds nothing any more.
        if (answered === undefined) remote.cancelSubscribe(ticket).catch(() => {});
        else drop(answered);
      });
    },
    unsubscribe: (id) => remote.unsubscribe(id),
  };
}
