/**
 * The page's endpoint over a WebSocket that comes back (connectHarness(url), src/browser/socket.ts), against a
 * scripted socket: a closed socket drops what is sent on it without a word, as a browser's does.
 */
import { describe, expect, it } from "vitest";
import { type SocketLike, socketEndpoint } from "../src/browser/socket.ts";
import { ConnectionLost } from "../src/errors.ts";

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

/** Sockets that open or fail when the test says, and a timer the test fires: the backoff without a clock. */
function controlledHost() {
  const sockets: Array<{ fire(type: string, event?: unknown): void; sent: any[] }> = [];
  const timers: Array<{ ms: number; fire: () => void }> = [];
  const connect = (): SocketLike => {
    const listeners: Record<string, Array<(event?: any) => void>> = { open: [], message: [], close: [], error: [] };
    const socket = {
      sent: [] as any[],
      fire: (type: string, event?: unknown) => {
        for (const listener of listeners[type]!) listener(event);
      },
    };
    sockets.push(socket);
    return {
      send(data: string) {
        const message = JSON.parse(data);
        socket.sent.push(message);
        if (message.type === "subscribe" && message.method === "onStatus") {
          queueMicrotask(() => {
            socket.fire("message", { data: JSON.stringify({ type: "result", id: message.id, value: null }) });
            const status = { kind: "ready", database: "object", recovered: [], recovery: { stop: "none", tasks: [] }, openMs: 1 };
            socket.fire("message", { data: JSON.stringify({ type: "event", id: message.id, value: status }) });
          });
        } else if (message.type !== "unsubscribe") {
          queueMicrotask(() => socket.fire("message", { data: JSON.stringify({ type: "result", id: message.id, value: null }) }));
        }
      },
      close: () => socket.fire("close"),
      addEventListener: (type: string, listener: (event?: any) => void) => void listeners[type]!.push(listener),
    } as SocketLike;
  };
  const setTimer = (fire: () => void, ms: number) => void timers.push({ ms, fire });
  return { sockets, timers, connect, setTimer };
}

describe("connectHarness(url) reconnects with backoff, and says so in its status", () => {
  it("the delay doubles while attempts fail (at most maxRetryMs), drawn from its upper half, and starts over once the host answers", async () => {
    const host = controlledHost();
    const states: unknown[] = [];
    let draw = 1;
    const endpoint = socketEndpoint(host.connect, {
      retryMs: 500,
      maxRetryMs: 3000,
      setTimer: host.setTimer,
      random: () => draw,
      onState: (state) => states.push(state),
    });
    host.sockets[0]!.fire("open");
    await endpoint.call("status", []); // the host answered on the first connection
    for (let attempt = 0; attempt < 5; attempt++) {
      host.sockets.at(-1)!.fire("close"); // the answered one drops, then every attempt fails
      host.timers.at(-1)!.fire();
    }
    expect(host.timers.map((timer) => timer.ms)).toEqual([500, 1000, 2000, 3000, 3000]);
    draw = 0; // the lower end of the draw: half the ceiling
    host.sockets.at(-1)!.fire("close");
    expect(host.timers.at(-1)!.ms).toBe(1500);
    host.timers.at(-1)!.fire();
    draw = 1;
    host.sockets.at(-1)!.fire("open");
    host.sockets.at(-1)!.fire("close"); // opened and dropped before the host said anything: still failing
    expect(host.timers.at(-1)!.ms).toBe(3000);
    host.timers.at(-1)!.fire();
    host.sockets.at(-1)!.fire("open");
    await endpoint.call("status", []);
    host.sockets.at(-1)!.fire("close");
    expect(host.timers.at(-1)!.ms).toBe(500); // a connection the host answered on starts the backoff over
    expect(states.slice(0, 3)).toEqual([
      { state: "open" },
      { state: "reconnecting", attempt: 1, retryInMs: 500 },
      { state: "reconnecting", attempt: 2, retryInMs: 1000 },
    ]);
    endpoint.close();
  });

  it("close() while a reconnect waits: the retry opens no socket, and a call waiting for it rejects with ConnectionLost", async () => {
    const host = controlledHost();
    const endpoint = socketEndpoint(host.connect, { retryMs: 500, setTimer: host.setTimer, random: () => 1 });
    host.sockets[0]!.fire("open");
    host.sockets[0]!.fire("close");
    const waiting = endpoint.call("status", []);
    endpoint.close();
    await expect(waiting).rejects.toBeInstanceOf(ConnectionLost);
    host.timers.at(-1)!.fire(); // the retry comes due after the close
    expect(host.sockets).toHaveLength(1);
    expect(endpoint.connections).toBe(1);
  });

  it("client.status is reconnecting while the socket is down, and the host's ready again once it is back", async () => {
    const host = controlledHost();
    const { HarnessClient } = await import("../src/browser/client.ts");
    const seen: string[] = [];
    const client = new HarnessClient({ url: "ws://object.test/harness", connect: host.connect });
    client.onStatus((status) => seen.push(status.kind === "reconnecting" ? `reconnecting ${status.attempt}` : status.kind));
    host.sockets[0]!.fire("open");
    await client.ready();
    host.sockets[0]!.fire("close");
    expect(client.status.kind).toBe("reconnecting");
    // The client's own backoff timer (250–500 ms) makes the next socket: wait for it to exist, not for a time.
    for (let turn = 0; turn < 1000 && host.sockets.length < 2; turn++) await new Promise((resolve) => setTimeout(resolve, 10));
    host.sockets[1]!.fire("open");
    await client.ready();
    for (let turn = 0; turn < 20 && client.status.kind !== "ready"; turn++) await Promise.resolve();
    expect(client.status.kind).toBe("ready");
    expect(seen).toEqual(["starting", "ready", "reconnecting 1", "ready"]);
    client.terminate();
  });
  it("ready() on a client that is ready already resolves, and terminate() after it ends the client without throwing (before: ReferenceError)", async () => {
    const host = controlledHost();
    const { HarnessClient } = await import("../src/browser/client.ts");
    const client = new HarnessClient({ url: "ws://object.test/harness", connect: host.connect });
    host.sockets[0]!.fire("open");
    await client.ready();
    expect(client.status.kind).toBe("ready");
    await expect(client.ready()).resolves.toMatchObject({ stop: "none" });
    expect(() => client.terminate()).not.toThrow();
    expect(client.status.kind).toBe("failed");
  });
});
