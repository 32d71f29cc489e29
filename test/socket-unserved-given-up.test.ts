import { describe, expect, it } from "vitest";
import { HarnessClient } from "../src/browser/client.ts";
import { type SocketState, socketEndpoint } from "../src/browser/socket.ts";
import { AuthorizeFailed, NotAuthorized } from "../src/errors.ts";
import type { HostEndpoint } from "../src/host/endpoint.ts";
import { manualTimer, scriptedSockets, settle } from "./socket-support.ts";

function fakeHost() {
  const mode = { watchFailing: false, endAfterAnswer: false };
  let next = 0;
  const statusEmit: Array<(v: unknown) => void> = [];
  const unsubscribed: number[] = [];
  const endpoint: HostEndpoint = {
    call: async () => "done",
    subscribe: async (method, _args, emit, lost) => {
      if (method === "onStatus") {
        statusEmit.push(emit);
        emit({ kind: "ready", recovery: {} });
        return ++next;
      }
      if (mode.watchFailing) throw new AuthorizeFailed("watchConversation");
      const id = ++next;
      if (mode.endAfterAnswer) setTimeout(() => lost?.(new AuthorizeFailed("watchConversation")), 1);
      return id;
    },
    unsubscribe: (id) => void unsubscribed.push(id),
  };
  return { mode, endpoint, statusEmit, unsubscribed };
}

describe("a subscription the open socket cannot serve now, given up or waited out (decision 0117 third review)", () => {
  it("0117 third review (R1): cancel() on an answered subscription while it waits ends its wait: onState open again, its timer cleared, its old id released (before: unserved for good, the timer kept, the old id held)", async () => {
    const { mode, endpoint, unsubscribed } = fakeHost();
    const sockets = scriptedSockets(endpoint);
    const timer = manualTimer();
    const states: SocketState[] = [];
    const socket = socketEndpoint(sockets.connect, {
      retryMs: 100,
      random: () => 1,
      setTimer: (f, ms) => timer.setTimer(f, ms),
      clearTimer: (h) => timer.clearTimer(h),
      onState: (s) => states.push(s),
    });
    await settle();
    const sub = socket.subscribe(
      "watchConversation",
      ["A"],
      () => {},
      () => {},
    );
    await sub;
    mode.watchFailing = true;
    sockets.drop();
    await settle();
    await timer.fire(); // reconnect; the watch is unserved
    expect(states.at(-1)).toMatchObject({ state: "unserved" });
    (sub as unknown as { cancel(): void }).cancel(); // the app gives the watch up (remoteHost/HostClient.watchConversationUpdates(...).cancel())
    await settle();
    expect(states.at(-1)).toEqual({ state: "open" });
    expect(timer.pending).toBe(0);
    expect(unsubscribed).toEqual([1]);
    socket.close();
  });

  it("0117 third review (R2): HarnessClient stays reconnecting while a subscription is unserved though the host reports its status meanwhile (before: ready)", async () => {
    const { mode, endpoint, statusEmit } = fakeHost();
    const sockets = scriptedSockets(endpoint);
    const client = new HarnessClient({ url: "ws://x.test/h", connect: () => sockets.connect() });
    await client.ready();
    await settle();
    const watch = client.watchConversationUpdates(1, () => {});
    await watch;
    mode.watchFailing = true;
    sockets.drop();
    await expect.poll(() => statusEmit.length, { timeout: 5000 }).toBe(2);
    await expect.poll(() => client.status.kind, { timeout: 5000 }).toBe("reconnecting");
    // the watch is still unserved (the hook keeps failing); the host's status changes meanwhile
    statusEmit.at(-1)!({ kind: "ready", recovery: {} });
    await settle();
    expect(client.status.kind).toBe("reconnecting");
    client.terminate();
  });

  it("0117 third review (R3): a clearTimer that accepts only its own handles: the first wait clears none, and the subscription is asked again and served (before: clearTimer(undefined) threw, never asked again)", async () => {
    const { mode, endpoint } = fakeHost();
    const sockets = scriptedSockets(endpoint);
    const timer = manualTimer();
    const states: SocketState[] = [];
    const socket = socketEndpoint(sockets.connect, {
      retryMs: 100,
      random: () => 1,
      setTimer: (f, ms) => timer.setTimer(f, ms),
      clearTimer: (h) => {
        if (h === undefined) throw new TypeError("not a timer of mine");
        timer.clearTimer(h);
      },
      onState: (s) => states.push(s),
    });
    await settle();
    await socket.subscribe(
      "watchConversation",
      ["A"],
      () => {},
      () => {},
    );
    mode.watchFailing = true;
    sockets.drop();
    await settle();
    await timer.fire(); // reconnect; the watch is unserved and waits
    expect(states.at(-1)).toMatchObject({ state: "unserved" });
    expect(timer.pending).toBe(1);
    mode.watchFailing = false;
    await timer.fire(); // asked again: served
    expect(states.at(-1)).toEqual({ state: "open" });
    expect(timer.cleared).not.toContain(undefined);
    socket.close();
  });

  it("0117 third review (R5): the status subscription refused while a watch waits: failed stays once the watch is served, not told twice in a row (before: the stale ready came back)", async () => {
    const mode = { status: "ok" as "ok" | "retry" | "refuse", watchFailing: false, watchAsked: 0, refused: 0 };
    let next = 0;
    const endpoint: HostEndpoint = {
      call: async () => "done",
      subscribe: async (method, _args, emit) => {
        if (method === "onStatus") {
          if (mode.status === "retry") throw new AuthorizeFailed("onStatus");
          if (mode.status === "refuse" && ++mode.refused) throw new NotAuthorized("onStatus", "this page may no longer see the status.");
          emit({ kind: "ready", recovery: {} });
          return ++next;
        }
        mode.watchAsked++;
        if (mode.watchFailing) throw new AuthorizeFailed("watchConversation");
        return ++next;
      },
      unsubscribe: () => {},
    };
    const sockets = scriptedSockets(endpoint);
    const client = new HarnessClient({ url: "ws://x.test/h", connect: () => sockets.connect() });
    await client.ready();
    await client.watchConversationUpdates(1, () => {});
    const told: string[] = [];
    client.onStatus((status) => told.push(JSON.stringify(status)));
    mode.status = "retry";
    mode.watchFailing = true;
    sockets.drop();
    await expect.poll(() => client.status.kind, { timeout: 5000 }).toBe("reconnecting");
    await expect.poll(() => mode.watchAsked, { timeout: 5000 }).toBe(2);
    mode.status = "refuse";
    // Refused on its next ask (the page hears no status any more); the watch still waits meanwhile.
    await expect.poll(() => mode.refused, { timeout: 5000 }).toBe(1);
    const asked = mode.watchAsked;
    mode.watchFailing = false;
    await expect.poll(() => mode.watchAsked, { timeout: 5000 }).toBeGreaterThan(asked);
    await settle();
    expect(client.status.kind).toBe("failed");
    expect(told.some((status) => status.includes('"failed"'))).toBe(true);
    // The refusal's failed, then the same failed again once the watch is served: told once.
    expect(told.filter((status, at) => status.includes('"failed"') && told[at - 1] === status)).toEqual([]);
    client.terminate();
  });
});
