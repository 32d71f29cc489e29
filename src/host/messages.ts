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

import type { HostEndpoint } from "./endpoint.ts";
import { deserializeError, type SerializedError, serializeError } from "./error-wire.ts";

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
}

/** Serves one connection's messages from `endpoint` (its subscriptions end with `close()`). */
export function serveMessages(endpoint: HostEndpoint, send: (message: HostMessage) => void): MessageConnection {
  /** The page's subscription ids to the endpoint's (a promise while subscribing). */
  const subscriptions = new Map<number, Promise<number | undefined>>();
  const fail = (id: number) => (error: unknown) => send({ type: "error", id, error: serializeError(error) });
  const unsubscribe = (id: number) => {
    const subscribed = subscriptions.get(id);
    subscriptions.delete(id);
    void subscribed?.then((own) => own !== undefined && endpoint.unsubscribe(own));
  };
  return {
    receive(message) {
      const { id } = message;
      if (message.type === "call") {
        endpoint.call(message.method, message.args).then((value) => send({ type: "result", id, value }), fail(id));
      } else if (message.type === "subscribe") {
        const emit = (value: unknown) => send({ type: "event", id, value });
        const subscribed = endpoint.subscribe(message.method, message.args, emit).then(
          (own) => {
            send({ type: "result", id, value: null });
            return own;
          },
          (error: unknown) => {
            subscriptions.delete(id);
            fail(id)(error);
            return undefined;
          },
        );
        subscriptions.set(id, subscribed);
      } else {
        unsubscribe(id);
      }
    },
    close() {
      for (const id of [...subscriptions.keys()]) unsubscribe(id);
    },
  };
}

export interface MessageEndpoint {
  endpoint: HostEndpoint;
  /** Handles one message from the host. */
  receive(message: HostMessage): void;
  /** The connection is gone: every pending request rejects with `error`. */
  fail(error: unknown): void;
}

/** The page side: an endpoint whose requests are sent as messages. */
export function messageEndpoint(send: (message: ClientMessage) => void): MessageEndpoint {
  const pending = new Map<number, { resolve: (value: unknown) => void; reject: (error: unknown) => void }>();
  const listeners = new Map<number, (value: unknown) => void>();
  let lastId = 0;
  const request = (message: ClientMessage) =>
    new Promise<unknown>((resolve, reject) => {
      pending.set(message.id, { resolve, reject });
      send(message);
    });
  return {
    endpoint: {
      call: (method, args) => request({ type: "call", id: ++lastId, method, args }),
      async subscribe(method, args, emit) {
        const id = ++lastId;
        listeners.set(id, emit); // before the answer: the host may push the first value right after it
        try {
          await request({ type: "subscribe", id, method, args });
        } catch (error) {
          listeners.delete(id);
          throw error;
        }
        return id;
      },
      unsubscribe(id) {
        listeners.delete(id);
        send({ type: "unsubscribe", id });
      },
    },
    receive(message) {
      if (message.type === "event") {
        listeners.get(message.id)?.(message.value);
        return;
      }
      const waiting = pending.get(message.id);
      pending.delete(message.id);
      if (message.type === "result") waiting?.resolve(message.value);
      else waiting?.reject(deserializeError(message.error));
    },
    fail(error) {
      for (const { reject } of pending.values()) reject(error);
      pending.clear();
      listeners.clear();
    },
  };
}
