/**
 * Decision 0148 and the transports that subscribe again by themselves: a page's reconnecting socket
 * (`connectHarness(url)`, src/browser/socket.ts) asks every subscription again on its new connection, in the order they
 * were made. The bound is the new connection's, so it cannot be passed there either; and since the page's answered
 * subscriptions come first, a page at its bound keeps all of them: only a subscribe made beyond it is refused
 * (`TooManySubscriptions` to its caller), and nobody is told `lost`.
 */
import { describe, expect, it } from "vitest";
import { socketEndpoint } from "../src/browser/socket.ts";
import { hostEndpoint } from "../src/host/endpoint.ts";
import { createHost } from "../src/host/host.ts";
import { createRegistry, MemoryStorage, TooManySubscriptions } from "../src/index.ts";
import { scriptedSockets, settle } from "./socket-support.ts";

describe("a reconnect asks again within the bound and loses nothing (decision 0148)", () => {
  it("0148: a page at its bound reconnects: its held subscriptions are asked and served again, none told lost; the one it made while disconnected, past the bound, is refused to its caller", async () => {
    const served = createHost({
      database: "reconnect-bounds",
      openStorage: async () => new MemoryStorage(),
      harness: { registry: createRegistry() },
      now: () => 0,
    });
    await served.ready;
    const sockets = scriptedSockets(hostEndpoint(served.service), { limits: { maxSubscriptions: 3, maxCallsInFlight: 8 } });
    const endpoint = socketEndpoint(sockets.connect, { retryMs: 0 });
    const lost: unknown[] = [];
    const subscribe = (method: string) =>
      endpoint.subscribe(
        method,
        [],
        () => {},
        (error) => lost.push(error),
      );
    const listeners = served.listenerCount();
    await Promise.all([subscribe("onStatus"), subscribe("onReport"), subscribe("watchTasks")]);
    expect(await subscribe("watchTasks").catch((error: unknown) => error)).toBeInstanceOf(TooManySubscriptions);
    expect(served.listenerCount()).toBe(listeners + 3);
    sockets.drop();
    // Made while the socket reconnects: it waits for the next connection, where it comes after the three held ones.
    const beyond = subscribe("onReport").catch((error: unknown) => error);
    await settle();
    expect(await beyond).toBeInstanceOf(TooManySubscriptions);
    expect(lost).toEqual([]);
    expect(served.listenerCount()).toBe(listeners + 3); // the three again, on the new connection; the old one's released
    sockets.drop();
    await settle();
    expect(lost).toEqual([]);
    expect(served.listenerCount()).toBe(listeners + 3);
    endpoint.close();
    await settle();
    expect(served.listenerCount()).toBe(listeners);
  });
});
