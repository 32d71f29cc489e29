/**
 * An endpoint over any message transport (a WebSocket, a MessagePort, HTTP batches): requests and answers
 * are plain objects, errors travel as `SerializedError` and are rebuilt as the library's classes.
 *
 *   // host side (for example a Durable Object's WebSocket)
 *   const connection = serveMessages(hostEndpoint(served.host), (message) => socket.send(JSON.stringify(message)));
 *   socket.onmessage = (event) => connection.receive(JSON.parse(event.data));
 *   socket.onclose = () => connection.close();
 *
 *   // page side
 *   const { endpoint, receive } = messageEndpoint((message) => socket.send(JSON.stringify(message)));
 *   socket.onmessage = (event) => receive(JSON.parse(event.data));
 *   const host = remoteHost(endpoint);
 *
 * Values travel as the transport encodes them: over JSON, `exportDatabase()`'s bytes need an encoding of their
 * own (or an HTTP download), and `undefined` arrives as a missing field (read as undefined again).
 */

import { InvalidRequest } from "../errors.ts";
import { isRetryable } from "../retryable.ts";
import { CallerBounds, type CallerLimits } from "./caller-bounds.ts";
import type { HostEndpoint, SubscriptionLost } from "./endpoint.ts";
import { deserializeError, type SerializedError, serializeError } from "./error-wire.ts";
import { cancelPending, isPending, pendingSubscription } from "./pending-subscription.ts";

/** Page to host. `id` pairs a request with its answer; a subscription is named by the id of its request. */
export type ClientMessage =
  | { type: "call"; id: number; method: string; args: unknown[] }
  | { type: "subscribe"; id: number; method: string; args: unknown[] }
  | { type: "unsubscribe"; id: number };

/** Host to page. A subscribe is answered (value null) once the host holds the listener. */
export type HostMessage =
  | { type: "result"; id: number; value: unknown }
  | { type: "error"; id: number; error: SerializedError }
  | { type: "event"; id: number; value: unknown };

export interface MessageConnection {
  /** Handles one message from the page. */
  receive(message: ClientMessage): void;
  /** The page is gone: drops every listener it subscribed. */
  close(): void;
  /**
   * Subscribes again, under the page's own ids, what an earlier instance of the host held for this connection
   * (a Durable Object woken from hibernation while the page stayed connected). No answers go out for those the
   * earlier instance answered: the page has them; the first values of each subscription (a status, a snapshot) do.
   * One still `waiting` there (a watch of a conversation not come yet) is answered by this instance (decision 0111).
   * One this instance refuses is answered with an error frame under its id: the page's subscription has ended, and
   * `messageEndpoint` tells its owner (`lost`, decision 0114). One it cannot serve now (a retryable error: its hook
   * threw) is answered so too, and stays held: the page's socket asks again after its backoff (unsubscribing the old id), a later wake again.
   */
  restore(subscriptions: readonly HeldSubscription[]): void;
}

/** A subscription a connection holds, as the page asked for it. */
export interface HeldSubscription {
  id: number;
  method: string;
  args: unknown[];
  /** Not answered yet (a watch waiting for its conversation): a restore answers it (decision 0111). */
  waiting?: true;
}

export interface ServeMessagesOptions {
  /** Called with every subscription the connection holds whenever that set changes (to keep it elsewhere). */
  onSubscriptions?: (held: HeldSubscription[]) => void;
  /**
   * What this connection's peer (one caller) may hold at once: its subscriptions, waiting ones included, and its calls
   * in flight (decision 0148). Default `DEFAULT_CALLER_LIMITS` (1,024 each). A subscribe given up before its answer
   * keeps its place until the endpoint answers it (0148's review: a door's hook that waits goes on after the give-up).
   */
  limits?: CallerLimits;
}

/** Serves one connection's messages from `endpoint` (its subscriptions end with `close()`). */
export function serveMessages(
  endpoint: HostEndpoint,
  send: (message: HostMessage) => void,
  options: ServeMessagesOptions = {},
): MessageConnection {
  /** The page's subscription ids to the endpoint's (a promise while subscribing). */
  const subscriptions = new Map<number, Promise<number | undefined>>();
  const held = new Map<number, HeldSubscription>();
  let closed = false;
  const bounds = new CallerBounds(options.limits);
  const changed = () => options.onSubscriptions?.([...held.values()]);
  const fail = (id: number) => (error: unknown) => send({ type: "error", id, error: serializeError(error) });
  /** The endpoint's own promises, while they are not answered: given up when the page unsubscribes or leaves first. */
  const unanswered = new Map<number, Promise<number>>();
  /**
   * Subscribes given up before the endpoint answered them: each keeps its place until it settles (decision 0148 after
   * review, as comlink does). Cancelling does not stop a door's `authorize` hook that waits, nor a watch's wait for a
   * reopen; before, the place was freed at once and a caller looping subscribe/unsubscribe started work without end.
   */
  const givingUp = new Set<Promise<number>>();
  const unsubscribe = (id: number) => {
    const subscribed = subscriptions.get(id);
    subscriptions.delete(id);
    if (held.delete(id)) changed();
    // A subscription the host has not answered yet (a watch waiting for its conversation) holds nothing once given
    // up (decision 0107); before, it stayed registered at the host until it was answered.
    const unansweredOwn = unanswered.get(id);
    if (unansweredOwn) givingUp.add(unansweredOwn);
    cancelPending(unansweredOwn);
    unanswered.delete(id);
    void subscribed?.then((own) => own !== undefined && endpoint.unsubscribe(own));
  };
  const subscribe = (subscription: HeldSubscription, answer: boolean) => {
    const { id, method, args } = subscription;
    try {
      // Past the caller's bound (held and waiting, decision 0148), refused before anything is held. A restored one (a
      // bound lowered by a deploy) is refused so too: its page is told (the error frame ends it) and it is kept no more.
      bounds.admitSubscription(method, subscriptions.size + givingUp.size);
    } catch (error) {
      if (held.delete(id)) changed();
      fail(id)(error);
      return;
    }
    const emit = (value: unknown) => send({ type: "event", id, value });
    let subscribed: Promise<number | undefined> | undefined;
    // The host ended it after its answer (decision 0117: a watch it moved to a harness it opened again that lacks the
    // conversation): the page hears the error frame under its id, which ends it there (`lost`, decision 0114), and it
    // is held no more (before: held, silent for good — a page on an object's socket never asks again).
    const lost = (error: Error) => {
      if (subscribed === undefined || subscriptions.get(id) !== subscribed) return; // unsubscribed, or its id used anew
      subscriptions.delete(id);
      if (held.delete(id)) changed();
      if (!closed) fail(id)(error);
    };
    const own = endpoint.subscribe(method, args, emit, lost);
    subscribed = own.then(
      (ownId) => {
        givingUp.delete(own);
        if (unanswered.get(id) === own) unanswered.delete(id);
        if (answer && !closed) send({ type: "result", id, value: null });
        if (subscriptions.get(id) !== subscribed) return ownId; // unsubscribed meanwhile: that ends it once it resolves
        const was = held.get(id);
        held.set(id, { id, method, args });
        if (!was || was.waiting) changed(); // a restored one is held as it was: nothing to write again
        return ownId;
      },
      (error: unknown) => {
        givingUp.delete(own);
        if (unanswered.get(id) === own) unanswered.delete(id);
        if (subscriptions.get(id) === subscribed) {
          subscriptions.delete(id);
          // Restored, and not served now only for a while (its hook threw: AuthorizeFailed): still held, so that the
          // next wake asks again; the page hears the error frame, and its socket asks again (decision 0117
          // after review; before, it was dropped from the attachment for good).
          if ((answer || !isRetryable(error)) && held.delete(id)) changed();
        }
        if (!closed) fail(id)(error);
        return undefined;
      },
    );
    subscriptions.set(id, subscribed);
    unanswered.set(id, own);
    // One the host answers later is held from now on, marked, so that a restore answers it (decision 0111); before, a
    // page's watch waiting when its Durable Object was evicted was never answered by the instance that woke.
    if (answer && isPending(own)) {
      held.set(id, { id, method, args, waiting: true });
      changed();
    } else if (!answer) {
      // Restored, answered by an earlier instance: held from now on, unmarked, while this instance subscribes it again
      // (through the object's doors that waits for `authorize`). Before, an attachment written in that window left it
      // out, and a second eviction lost it. It came from the attachment, so nothing new is written for it.
      held.set(id, { id, method, args });
    }
  };
  return {
    receive(message) {
      if (closed) return; // the page is gone: nothing it sent late may hold a listener
      const { id } = message;
      if (message.type === "call") {
        // At the caller's bound of calls in flight it is refused, not run (decision 0148).
        const { method, args } = message;
        bounds.call(method, () => endpoint.call(method, args)).then((value) => send({ type: "result", id, value }), fail(id));
      } else if (message.type === "subscribe") {
        // One listener per id: a second subscribe under a live id would leave the first one held for good.
        if (subscriptions.has(id)) fail(id)(new InvalidRequest(`Subscription id ${id} is in use; unsubscribe it first, or use a new id.`));
        else subscribe({ id, method: message.method, args: message.args }, true);
      } else {
        unsubscribe(id);
      }
    },
    close() {
      closed = true;
      for (const id of [...subscriptions.keys()]) unsubscribe(id);
    },
    restore(earlier) {
      if (closed) return;
      const restoring = earlier.filter(({ id }) => !subscriptions.has(id));
      // All held as the attachment had them before any is subscribed again: a waiting one's write carries the others
      // (before, it wrote the set without the answered ones after it, and a second eviction lost them).
      for (const { id, method, args, waiting } of restoring) held.set(id, { id, method, args, ...(waiting ? { waiting } : {}) });
      for (const { id, method, args, waiting } of restoring) subscribe({ id, method, args }, waiting === true);
    },
  };
}

export interface MessageEndpoint {
  endpoint: HostEndpoint;
  /** Handles one message from the host. */
  receive(message: HostMessage): void;
  /** The connection is gone: every pending request, and every later one, rejects with `error`. */
  fail(error: unknown): void;
}

/** The page side: an endpoint whose requests are sent as messages. */
export function messageEndpoint(send: (message: ClientMessage) => void): MessageEndpoint {
  const pending = new Map<number, { resolve: (value: unknown) => void; reject: (error: unknown) => void }>();
  const listeners = new Map<number, (value: unknown) => void>();
  /** Told when the host ends an answered subscription with an error frame (a woken object refused it: decision 0114). */
  const losers = new Map<number, SubscriptionLost>();
  let lastId = 0;
  /** Set once the connection is gone: later requests reject with it instead of waiting for an answer. */
  let failure: { error: unknown } | undefined;
  const request = (message: ClientMessage) =>
    new Promise<unknown>((resolve, reject) => {
      if (failure) return reject(failure.error);
      pending.set(message.id, { resolve, reject });
      send(message);
    });
  return {
    endpoint: {
      call: (method, args) => request({ type: "call", id: ++lastId, method, args }),
      subscribe(method, args, emit, lost) {
        const id = ++lastId;
        listeners.set(id, emit); // before the answer: the host may push the first value right after it
        if (lost) losers.set(id, lost);
        const answered = request({ type: "subscribe", id, method, args }).then(
          () => id,
          (error: unknown) => {
            listeners.delete(id);
            losers.delete(id);
            throw error;
          },
        );
        // Given up before its answer (decision 0107): the host hears the unsubscribe, releases what the subscription
        // held, and answers the subscribe with its refusal.
        return pendingSubscription(answered, () => {
          losers.delete(id);
          if (!listeners.delete(id) || failure) return;
          send({ type: "unsubscribe", id });
        });
      },
      unsubscribe(id) {
        listeners.delete(id);
        losers.delete(id);
        send({ type: "unsubscribe", id });
      },
    },
    receive(message) {
      // A frame that is not an object (`null`, a number: a stranger's text) is no answer to anything (decision 0114).
      if (typeof message !== "object" || message === null) return;
      if (message.type === "event") {
        listeners.get(message.id)?.(message.value);
        return;
      }
      const waiting = pending.get(message.id);
      pending.delete(message.id);
      if (message.type === "result") waiting?.resolve(message.value);
      else if (waiting) waiting.reject(deserializeError(message.error));
      else if (listeners.delete(message.id)) {
        // An answered subscription the host ended: a Durable Object that woke refused it again (`restore`, decision 0114).
        const lost = losers.get(message.id);
        losers.delete(message.id);
        lost?.(deserializeError(message.error));
      }
    },
    fail(error) {
      failure = { error };
      for (const { reject } of pending.values()) reject(error);
      pending.clear();
      listeners.clear();
      losers.clear();
    },
  };
}

/**
 * A page's frame as a `ClientMessage`, or an `InvalidRequest` saying what is wrong with it (not JSON, not an
 * object, an unknown type, an id that is not a positive integer, a method that is not a string, args that are
 * not an array). For a transport that receives text from anyone: a malformed frame is answered, never thrown.
 * `id` is the frame's own id when it had one, so the page's request gets its answer.
 */
export function parseClientMessage(frame: string): ParsedClientMessage {
  let value: unknown;
  try {
    value = JSON.parse(frame);
  } catch {
    return { id: null, error: new InvalidRequest("A frame was not JSON: send { type, id, method, args } as JSON text.") };
  }
  return clientMessageOf(value);
}

export type ParsedClientMessage = { message: ClientMessage } | { id: number | null; error: InvalidRequest };

/**
 * A value a page or a tab sent (parsed JSON, or a structured clone over a BroadcastChannel) as a `ClientMessage`, or an
 * `InvalidRequest` saying what is wrong with it, as `parseClientMessage` (the tabs' leader reads its followers' frames so:
 * decision 0123; before, a `null` frame threw out of its channel's listener).
 */
export function clientMessageOf(value: unknown): ParsedClientMessage {
  const record = typeof value === "object" && value !== null && !Array.isArray(value) ? (value as Record<string, unknown>) : undefined;
  const id = typeof record?.id === "number" && Number.isSafeInteger(record.id) && record.id > 0 ? record.id : null;
  const refuse = (what: string) => ({ id, error: new InvalidRequest(`A frame ${what}: send { type, id, method, args }.`) });
  if (!record) return refuse("was not a JSON object");
  if (id === null) return refuse("has no id (a positive integer)");
  if (record.type === "unsubscribe") return { message: { type: "unsubscribe", id } };
  if (record.type !== "call" && record.type !== "subscribe") return refuse('has a type other than "call", "subscribe" or "unsubscribe"');
  if (typeof record.method !== "string") return refuse("names no method (a string)");
  if (record.args !== undefined && !Array.isArray(record.args)) return refuse("has args that are not an array");
  return { message: { type: record.type, id, method: record.method, args: (record.args as unknown[] | undefined) ?? [] } };
}
