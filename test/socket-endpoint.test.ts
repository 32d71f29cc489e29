/**
 * The page's endpoint over a WebSocket that comes back (connectHarness(url), src/browser/socket.ts), against a
 * scripted socket: a closed socket drops what is sent on it without a word, as a browser's does.
 */
import { describe, expect, it } from "vitest";
import { ConnectionLost, type SocketLike, socketEndpoint } from "../src/browser/socket.ts";

interface Scripted {
  closed: boolean;
  sent: Array<{ type: string; id: number; method?: string }>;
  fire(type: string, event?: unknown): void;
}

/** A host that answers every call with the number of the connection it came on, and every subscribe at once. */
function scriptedHost() {
  const sockets: Scripted[] = [];
  const connect = (): SocketLike => {
    const listeners: Record<string, Array<(event?: any) => void>> = { open: [], message: [], close: [], error: [] };
    const socket: Scripted = {
      closed: false,
      sent: [],
      fire: (type, event) => {
        for (const listener of listeners[type]!) listener(event);
      },
    };
    const number = sockets.push(socket);
    queueMicrotask(() => socket.fire("open"));
    return {
      send(data: string) {
        if (socket.closed) return;
        const message = JSON.parse(data);
        socket.sent.push(message);
        if (message.type === "unsubscribe") return;
        const value = message.type === "call" ? number : null;
        queueMicrotask(() => !socket.closed && socket.fire("message", { data: JSON.stringify({ type: "result", id: message.id, value }) }));
      },
      close() {
        socket.closed = true;
        socket.fire("close");
      },
      addEventListener: (type: string, listener: (event?: any) => void) => void listeners[type]!.push(listener),
    } as SocketLike;
  };
  const drop = (index: number) => {
    sockets[index]!.closed = true;
    sockets[index]!.fire("close");
  };
  return { sockets, connect, drop };
}

describe("connectHarness(url)'s socket endpoint across a dropped connection", () => {
  it("a call made after the drop and before the reconnect waits for the next connection and is answered there", async () => {
    const host = scriptedHost();
    const endpoint = socketEndpoint(host.connect, { retryMs: 0 });
    expect(await endpoint.call("status", [])).toBe(1);
    host.drop(0);
    expect(await endpoint.call("status", [])).toBe(2); // before the fix it went to the dead socket and never settled
    endpoint.close();
  });

  it("a call in flight at the drop rejects with ConnectionLost (it may or may not have run)", async () => {
    const host = scriptedHost();
    const endpoint = socketEndpoint(host.connect, { retryMs: 0 });
    await endpoint.call("status", []);
    const first = host.sockets[0]!;
    const fire = first.fire;
    first.fire = (type, event) => type !== "message" && fire(type, event); // the host stops answering
    const inFlight = endpoint.call("status", []);
    while (!first.sent.some((message, index) => index > 0 && message.type === "call")) await Promise.resolve();
    host.drop(0);
    await expect(inFlight).rejects.toBeInstanceOf(ConnectionLost);
    expect(await endpoint.call("status", [])).toBe(2);
    endpoint.close();
  });

  it("a call made in the same turn as the drop, not yet sent, goes to the next connection", async () => {
    const host = scriptedHost();
    const endpoint = socketEndpoint(host.connect, { retryMs: 0 });
    await endpoint.call("status", []);
    const call = endpoint.call("status", []); // waits a turn for the link
    host.drop(0);
    expect(await call).toBe(2);
    endpoint.close();
  });

  it("a subscription made while reconnecting is held once on the next connection, not twice", async () => {
    const host = scriptedHost();
    const endpoint = socketEndpoint(host.connect, { retryMs: 0 });
    await endpoint.subscribe("onStatus", [], () => {});
    host.drop(0);
    await endpoint.subscribe("watchTasks", [], () => {});
    await endpoint.call("status", []); // the next connection is up and has heard everything sent so far
    const subscribes = host.sockets[1]!.sent.filter((message) => message.type === "subscribe").map((message) => message.method);
    expect(subscribes.sort()).toEqual(["onStatus", "watchTasks"]);
    endpoint.close();
  });

  it("after close(), calls reject with ConnectionLost instead of waiting for a connection that never comes", async () => {
    const host = scriptedHost();
    const endpoint = socketEndpoint(host.connect, { retryMs: 0 });
    await endpoint.call("status", []);
    endpoint.close();
    await expect(endpoint.call("status", [])).rejects.toBeInstanceOf(ConnectionLost);
    expect(host.sockets).toHaveLength(1);
  });
});
