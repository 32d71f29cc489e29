/**
 * The host's endpoint over comlink (a worker and its page). Listeners travel as `Comlink.proxy` functions and
 * are released when unsubscribed; the database image is transferred, not copied; and errors are rebuilt as
 * the library's classes on the other side (`instanceof ReadOnlySession` holds on the page), with name,
 * message and fields kept. Both sides install the error handler by importing this module.
 */
import * as Comlink from "comlink";
import { type Authorize, guardEndpoint } from "../host/doors.ts";
import { type HostEndpoint, hostEndpoint, type ServedEndpoint } from "../host/endpoint.ts";
import { deserializeError, type SerializedError, serializeError } from "../host/error-wire.ts";
import { ALL_POWERS, type HarnessService } from "../host/protocol.ts";

/** Who calls a browser worker's host: the page that owns the worker, or another tab of the origin (a follower). */
export interface WorkerCaller {
  from: "page" | "tab";
}

/**
 * `endpoint` as `caller` reaches it: every method (a worker serves its origin's own code), each call asked of
 * `authorize` when the app gave one.
 */
export function workerDoor(endpoint: HostEndpoint, caller: WorkerCaller, authorize: Authorize<WorkerCaller> | undefined): HostEndpoint {
  return authorize ? guardEndpoint(endpoint, caller, { powers: ALL_POWERS, authorize }) : endpoint;
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

/** Serves `host` to the page on the other end of `endpoint` (the worker's own scope by default). */
export function exposeHost(host: HarnessService, endpoint?: Comlink.Endpoint, authorize?: Authorize<WorkerCaller>): ServedEndpoint {
  const served = hostEndpoint(host, {
    // The page's listener is a proxy holding a MessagePort; release it with the subscription.
    dropped: (emit) => (emit as Comlink.Remote<() => void>)[Comlink.releaseProxy]?.(),
  });
  const door = workerDoor(served, { from: "page" }, authorize);
  const exposed: HostEndpoint = {
    async call(method, args) {
      const value = await door.call(method, args);
      // The image is a copy made for this call: hand its buffer over instead of copying it again.
      return method === "exportDatabase" && value instanceof Uint8Array ? Comlink.transfer(value, [value.buffer as ArrayBuffer]) : value;
    },
    subscribe: (method, args, emit) => door.subscribe(method, args, emit),
    unsubscribe: (id) => served.unsubscribe(id),
  };
  Comlink.expose(exposed, endpoint);
  return served;
}

/** The page's side: an endpoint whose listeners are passed to the worker as proxies. */
export function wrapHost(worker: Comlink.Endpoint): HostEndpoint {
  const remote = Comlink.wrap<HostEndpoint>(worker);
  return {
    call: (method, args) => remote.call(method, args),
    subscribe: (method, args, emit) => remote.subscribe(method, args, Comlink.proxy(emit)),
    unsubscribe: (id) => remote.unsubscribe(id),
  };
}
