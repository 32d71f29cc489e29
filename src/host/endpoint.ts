/**
 * The transport seam. A transport carries three operations, each with plain data (method names, argument
 * lists, subscription ids): `call`, `subscribe` (values come back through `emit` until `unsubscribe`) and
 * `unsubscribe`. `hostEndpoint` serves them from a host; `remoteHost` turns an endpoint on the other side
 * back into the typed host. Comlink carries an endpoint directly (src/browser/comlink.ts); a message-based
 * transport (a WebSocket) carries it with `serveMessages`/`messageEndpoint` (./messages.ts).
 */

import { safely } from "../base/safely.ts";
import { DurableError, InvalidArguments, UnknownMethod } from "../errors.ts";
import { isRetryable } from "../retryable.ts";
import { describeValue } from "../shape.ts";
import { cancelPending, keepCancel, pendingSubscription } from "./pending-subscription.ts";
import {
  type HarnessService,
  isMethod,
  type MethodName,
  PROTOCOL,
  type RemoteHost,
  type SubscriptionLost,
  type Unsubscribe,
} from "./protocol.ts";

export interface HostEndpoint {
  call(method: string, args: unknown[]): Promise<unknown>;
  /**
   * Resolves with the subscription's id once the host holds the listener. One the host answers later may be a
   * `PendingSubscription` (decision 0107): `cancelPending` gives it up when its caller goes away first. `lost` is told
   * once, with the host's error, when a transport that subscribes again by itself (a reconnecting socket, the tabs'
   * endpoint when the database moves) was refused: the subscription has ended and is asked nowhere again (decision
   * 0114). An endpoint that never subscribes again ignores it.
   */
  subscribe(method: string, args: unknown[], emit: (value: unknown) => void, lost?: SubscriptionLost): Promise<number>;
  unsubscribe(id: number): void | Promise<void>;
}

/** The served side of an endpoint, with the subscriptions it holds. */
export interface ServedEndpoint extends HostEndpoint {
  /** Subscriptions not yet unsubscribed. */
  readonly subscriptions: number;
  /** Ends every subscription (the connection is gone). */
  close(): void;
}

type AnyMethod = (...args: unknown[]) => unknown;

export type { SubscriptionLost } from "./protocol.ts";

/**
 * What a transport's own subscribe again that failed tells its owner's `lost` (decision 0114): the host's error, or
 * undefined when it is no refusal — an error that passes by itself (`isRetryable`: a link that died, a busy store) or
 * the host's harness closing under it (`HarnessClosed`: an object handing over, a database moving); then the
 * subscription is kept and asked again at the next connection or move.
 */
export function refusalOf(error: unknown): Error | undefined {
  if (isRetryable(error) || (error as { name?: unknown } | undefined)?.name === "HarnessClosed") return undefined;
  return error instanceof Error ? error : new DurableError("The host refused the subscription.");
}

/**
 * Serves `host`'s methods as an endpoint. `dropped` is told each subscription's listener and `lost` once the host no
 * longer holds them (unsubscribed, refused, or ended by the host), to release what carries them (comlink's proxies).
 */
export function hostEndpoint(
  host: HarnessService,
  options: { dropped?: (emit: (value: unknown) => void, lost: SubscriptionLost | undefined) => void } = {},
): ServedEndpoint {
  const subscriptions = new Map<number, Unsubscribe>();
  let lastId = 0;
  const method = (name: string, kind: "call" | "subscribe", args: unknown) => {
    checkCall(name, kind, args);
    return (host[name as MethodName] as AnyMethod).bind(host);
  };
  return {
    async call(name, args) {
      return method(name, "call", args)(...args);
    },
    subscribe(name, args, emit, lost) {
      const dropped = () => options.dropped?.(emit, lost);
      let id: number | undefined;
      /** Ended by the host before this endpoint numbered it: the subscribe is refused with it instead. */
      let endedEarly: Error | undefined;
      // The host ends a subscription itself (decision 0117: a watch it moved to a harness it opened again that lacks
      // the conversation): it is no longer held here, and its owner is told once — a throw of theirs stays theirs.
      const ended: SubscriptionLost = (error) => {
        if (id === undefined) {
          endedEarly ??= error;
          return;
        }
        const unsubscribe = subscriptions.get(id);
        if (!subscriptions.delete(id)) return; // unsubscribed first: nothing to tell
        safely(() => lost?.(error));
        unsubscribe?.();
      };
      let started: Unsubscribe | Promise<Unsubscribe>;
      try {
        started = method(name, "subscribe", args)(...args, emit, ended) as Unsubscribe | Promise<Unsubscribe>;
      } catch (error) {
        return Promise.reject(error);
      }
      // A subscription may be answered later (a watch that waits for its conversation, decision 0103) or refused then;
      // its caller may give it up meanwhile (`cancel`, decision 0107).
      const answered = Promise.resolve(started).then(
        (unsubscribe) => {
          const stop = () => {
            unsubscribe();
            dropped();
          };
          if (endedEarly) {
            stop();
            throw endedEarly;
          }
          id = ++lastId;
          subscriptions.set(id, stop);
          return id;
        },
        (error: unknown) => {
          dropped(); // refused, or given up before its answer: the listener is not held
          throw error;
        },
      );
      return started instanceof Promise ? pendingSubscription(answered, () => cancelPending(started)) : answered;
    },
    unsubscribe(id) {
      const unsubscribe = subscriptions.get(id);
      subscriptions.delete(id);
      unsubscribe?.();
    },
    get subscriptions() {
      return subscriptions.size;
    },
    close() {
      for (const id of [...subscriptions.keys()]) this.unsubscribe(id);
    },
  };
}

/**
 * Refuses a call before anything runs: a name that is not a method of this kind (own rows of `PROTOCOL` only,
 * never `constructor` or `__proto__`) is `UnknownMethod`, arguments its schema refuses are `InvalidArguments`.
 */
export function checkCall(name: unknown, kind: "call" | "subscribe", args: unknown): asserts name is MethodName {
  // A name that is not text is described, never turned into text (`{ toString: null }` would throw a TypeError).
  if (typeof name !== "string" || !isMethod(name) || PROTOCOL[name].kind !== kind)
    throw new UnknownMethod(typeof name === "string" ? name : describeValue(name));
  const problem = PROTOCOL[name].args(args as readonly unknown[]);
  if (problem) throw new InvalidArguments(name, problem);
}

/** The typed host behind an endpoint: one forwarding function per protocol method, derived from `PROTOCOL`. */
export function remoteHost(endpoint: HostEndpoint): RemoteHost {
  const remote: Record<string, (...args: unknown[]) => Promise<unknown>> = {};
  for (const [name, { kind }] of Object.entries(PROTOCOL)) {
    remote[name] =
      kind === "call"
        ? (...args) => endpoint.call(name, withoutTrailingUndefined(args))
        : (...args) => {
            // The listener, and after it the optional `lost` (no protocol argument before the listener is a function) —
            // also when given as `undefined` (`watchTasks(listener, undefined)`): then the listener is still the one before.
            const last = args.at(-1);
            const lost =
              (typeof last === "function" || last === undefined) && typeof args.at(-2) === "function"
                ? (args.pop() as SubscriptionLost | undefined)
                : undefined;
            const listener = args.pop() as (value: unknown) => void;
            let subscribed = true;
            // A value the host sent before it heard of the unsubscribe is not delivered.
            const subscribing = endpoint.subscribe(
              name,
              withoutTrailingUndefined(args),
              (value) => subscribed && listener(value),
              lost &&
                ((error) => {
                  if (!subscribed) return; // unsubscribed by its owner first: nothing to tell
                  subscribed = false;
                  safely(() => lost(error)); // the owner's throw is theirs: it never reaches the transport's frame handler
                }),
            );
            const unsubscribe = (id: number) => () => {
              if (!subscribed) return;
              subscribed = false;
              // Sent now, so a call made after it is answered after it; a host that is gone holds no listener anyway.
              try {
                void Promise.resolve(endpoint.unsubscribe(id)).catch(() => {});
              } catch {
                // the transport is closed
              }
            };
            // One the host answers later can be given up meanwhile (`cancel`, decision 0107).
            return keepCancel(subscribing, subscribing.then(unsubscribe));
          };
  }
  return remote as unknown as RemoteHost;
}

/** An optional argument left undefined is sent as absent (over JSON it would arrive as null, which is a value). */
function withoutTrailingUndefined(args: unknown[]): unknown[] {
  let end = args.length;
  while (end > 0 && args[end - 1] === undefined) end--;
  return end === args.length ? args : args.slice(0, end);
}
