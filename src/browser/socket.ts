/**
 * The host's endpoint over a WebSocket that comes back: the page side of a Durable Object host
 * (`connectHarness(url)`). Calls wait for the connection; a connection that drops rejects the calls in flight
 * with `ConnectionLost`, reconnects after `retryMs`, and subscribes every live subscription again, so the
 * page's listeners keep hearing from the host (an object that restarted sends the current state anew).
 */
import { DurableError } from "../errors.ts";
import type { HostEndpoint } from "../host/endpoint.ts";
import { type HostMessage, type MessageEndpoint, messageEndpoint } from "../host/messages.ts";

/** The part of a WebSocket this endpoint uses (the browser's, or any look-alike). */
export interface SocketLike {
  send(data: string): void;
  close(code?: number, reason?: string): void;
  addEventListener(type: "open" | "close" | "error", listener: () => void): void;
  addEventListener(type: "message", listener: (event: { data: unknown }) => void): void;
}

/** The WebSocket to the host closed while a call was in flight; the call may or may not have run. */
export class ConnectionLost extends DurableError {
  override name = "ConnectionLost";
  constructor() {
    super(
      "The connection to the harness was lost while this call was in flight; it may or may not have run. It reconnects by itself: check, then retry.",
    );
  }
}

export interface ReconnectingEndpoint extends HostEndpoint {
  /** Stops reconnecting and closes the socket. */
  close(): void;
  /** How many times a connection was opened. */
  readonly connections: number;
}

interface Subscription {
  method: string;
  args: unknown[];
  emit: (value: unknown) => void;
  /** Its id on the current connection, once subscribed there. */
  remote?: number;
}

export function socketEndpoint(connect: () => SocketLike, options: { retryMs?: number } = {}): ReconnectingEndpoint {
  const retryMs = options.retryMs ?? 500;
  const subscriptions = new Map<number, Subscription>();
  let lastId = 0;
  let connections = 0;
  let closed = false;
  let socket: SocketLike | undefined;
  let current: Promise<MessageEndpoint>;

  const subscribeOn = async (link: MessageEndpoint, id: number, subscription: Subscription) => {
    const remote = await link.endpoint.subscribe(subscription.method, subscription.args, subscription.emit);
    if (subscriptions.get(id) === subscription) subscription.remote = remote;
    else link.endpoint.unsubscribe(remote); // unsubscribed meanwhile
  };

  const open = () => {
    current = new Promise<MessageEndpoint>((resolve) => {
      const ws = (socket = connect());
      const link = messageEndpoint((message) => ws.send(JSON.stringify(message)));
      ws.addEventListener("message", (event) => link.receive(JSON.parse(String(event.data)) as HostMessage));
      ws.addEventListener("open", () => {
        connections++;
        for (const [id, subscription] of subscriptions) {
          subscription.remote = undefined;
          void subscribeOn(link, id, subscription).catch(() => {});
        }
        resolve(link);
      });
      let lost = false;
      const drop = () => {
        if (lost) return;
        lost = true;
        link.fail(new ConnectionLost());
        if (!closed) setTimeout(open, retryMs);
      };
      ws.addEventListener("close", drop);
      ws.addEventListener("error", drop);
    });
  };
  open();

  return {
    async call(method, args) {
      return (await current).endpoint.call(method, args);
    },
    async subscribe(method, args, emit) {
      const id = ++lastId;
      const subscription: Subscription = { method, args, emit };
      subscriptions.set(id, subscription);
      await subscribeOn(await current, id, subscription);
      return id;
    },
    async unsubscribe(id) {
      const subscription = subscriptions.get(id);
      subscriptions.delete(id);
      if (subscription?.remote !== undefined) (await current).endpoint.unsubscribe(subscription.remote);
    },
    close() {
      closed = true;
      socket?.close(1000, "closed by the page");
    },
    get connections() {
      return connections;
    },
  };
}
