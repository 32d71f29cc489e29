import { afterEach, describe, expect, it } from "vitest";
import { followObject } from "../src/browser/follow.ts";
import type { SocketLike } from "../src/browser/socket.ts";
import { serveHarness } from "../src/browser/worker.ts";
import { FOLLOW_WIRE_VERSION } from "../src/follow/wire-version.ts";
import { createManualClock } from "../src/testing/clock.ts";
import { flush, settled } from "./support.ts";

// Decision 0133 (issue 27): the browser worker's follow link outlived its host's `close()`. `serveHarness` never
// closed it (its socket stayed open, its reconnects went on), and `TabFollow.close()` itself left timers behind: a
// reconnect's wait, the link's resend (which sent the calls still waiting again every 2 s over a socket whose close
// event had not come) and each call's 15 s bound.

/** A fake socket: every frame it is given is kept (after its close too); the object's hello is answered. */
function fakeSockets() {
  const sockets: Array<{ sent: string[]; closed: boolean; fire(type: string, data?: unknown): void }> = [];
  const connect = () => {
    const listeners: Record<string, Array<(event?: { data: unknown }) => void>> = {};
    const state = {
      sent: [] as string[],
      closed: false,
      fire(type: string, data?: unknown) {
        for (const listener of listeners[type] ?? []) listener(data === undefined ? undefined : { data });
      },
    };
    sockets.push(state);
    return {
      send(frame: string) {
        state.sent.push(frame);
        const message = JSON.parse(frame) as { type: string; id: string; topic?: string; method?: string };
        if (message.type === "call" && message.topic === "wire" && message.method === "hello")
          queueMicrotask(() =>
            state.fire("message", JSON.stringify({ type: "answer", id: message.id, value: { version: FOLLOW_WIRE_VERSION } })),
          );
      },
      close() {
        state.closed = true; // its close event comes later (or, here, when the test fires it)
      },
      addEventListener(type: string, listener: (event?: { data: unknown }) => void) {
        (listeners[type] ??= []).push(listener);
      },
    } as unknown as SocketLike;
  };
  const sent = () => sockets.reduce((n, socket) => n + socket.sent.length, 0);
  return { sockets, connect, sent };
}

describe("nothing of the worker's follow link outlives its close (decision 0133)", () => {
  it("S4: closed with the link up and a call waiting: the call rejects HarnessClosed, no timer is left, no frame is sent and nothing reconnects after", async () => {
    const clock = createManualClock(1_000);
    const fake = fakeSockets();
    const follow = followObject({ url: "ws://object/follow", connect: fake.connect, place: "tab" }, clock);
    fake.sockets[0]!.fire("open");
    await flush(2);
    const asked = settled(follow.lease.arbiter.acquire("tab", 0), "ok"); // the object stays silent
    await flush(2);
    expect(fake.sent()).toBe(2); // the hello, the call
    follow.close();
    await flush(2);
    expect(asked.outcome).toBe("HarnessClosed"); // before: pending until its 15 s bound
    expect(fake.sockets[0]!.closed).toBe(true);
    expect(clock.pending).toBe(0); // before: the link's resend and the call's bound
    const sentAtClose = fake.sent();
    for (let i = 0; i < 30; i++) clock.advance(1_000);
    fake.sockets[0]!.fire("close"); // the socket's close event, late
    for (let i = 0; i < 30; i++) clock.advance(1_000);
    await flush(2);
    expect(fake.sent()).toBe(sentAtClose); // before: the call sent again every 2 s
    expect(fake.sockets).toHaveLength(1);
    expect(clock.pending).toBe(0);
    await expect(follow.lease.arbiter.acquire("tab", 0)).rejects.toMatchObject({ name: "HarnessClosed" });
  });

  it("S4: closed while it waits to reconnect: the wait's timer is cleared and no socket opens again", async () => {
    const clock = createManualClock(1_000);
    const fake = fakeSockets();
    const follow = followObject({ url: "ws://object/follow", connect: fake.connect, place: "tab" }, clock);
    fake.sockets[0]!.fire("open");
    await flush(2);
    fake.sockets[0]!.fire("close"); // dropped: a reconnect waits
    expect(clock.pending).toBe(1);
    follow.close();
    expect(clock.pending).toBe(0); // before: the reconnect's timer stayed
    for (let i = 0; i < 60; i++) clock.advance(1_000);
    expect(fake.sockets).toHaveLength(1);
  });
});

describe("serveHarness's close ends its follow link (decision 0133)", () => {
  const scope = globalThis as Record<string, unknown>;
  const restore: Array<() => void> = [];
  afterEach(() => {
    for (const undo of restore.splice(0)) undo();
  });

  it("S4: the worker's service.close() closes the follow socket, and its close event opens none again", async () => {
    // The worker's scope stood in by one end of a MessageChannel (as test/serve-harness-doors.test.ts; no OPFS here).
    const channel = new MessageChannel();
    for (const name of ["addEventListener", "removeEventListener", "postMessage"] as const) {
      const had = Object.hasOwn(scope, name);
      const before = scope[name];
      scope[name] = (channel.port1[name] as (...args: never[]) => unknown).bind(channel.port1);
      restore.push(() => (had ? (scope[name] = before) : delete scope[name]));
    }
    channel.port1.start();
    restore.push(() => {
      channel.port1.close();
      channel.port2.close();
    });
    const fake = fakeSockets();
    const served = serveHarness({ crashPoints: false, follow: { url: "ws://object/follow", connect: fake.connect, place: "tab" } });
    restore.push(() => void served.service.close().catch(() => {}));
    fake.sockets[0]!.fire("open");
    await flush(2);
    await served.service.close();
    expect(fake.sockets[0]!.closed).toBe(true); // before: open for as long as the worker lived
    const sentAtClose = fake.sent();
    fake.sockets[0]!.fire("close");
    await new Promise((resolve) => setTimeout(resolve, 600)); // past the first reconnect's wait (250 ms)
    expect(fake.sockets).toHaveLength(1); // before: a new socket 250 ms after the drop, and on
    expect(fake.sent()).toBe(sentAtClose);
  });
});
