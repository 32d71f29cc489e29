/**
 * Decision 0123 (issue 27's seams): the page's status subscription answered with what passes by itself at its very first
 * ask (`AuthorizeFailed`: the host's authorize hook threw) waits and is asked again on the same connection, with the
 * backoff a carried subscribe uses, the page `reconnecting` meanwhile (before: `failed` until the next connection, which
 * nothing brought); a refusal at the first ask is still `failed`. And each change of state is told once: a socket's
 * `unserved` never goes down within one stretch, and the page never hears the same `reconnecting` twice, nor a lower
 * attempt, within one wait.
 */
import { describe, expect, it } from "vitest";
import { HarnessClient } from "../src/browser/client.ts";
import { type SocketState, socketEndpoint } from "../src/browser/socket.ts";
import { AuthorizeFailed, NotAuthorized } from "../src/errors.ts";
import type { HostEndpoint, SubscriptionLost } from "../src/host/endpoint.ts";
import type { HarnessStatus } from "../src/host/protocol.ts";
import { answeringHost, manualTimer, scriptedSockets, settle } from "./socket-support.ts";

function page(endpoint: HostEndpoint) {
  const sockets = scriptedSockets(endpoint);
  const timer = manualTimer();
  const states: SocketState[] = [];
  const socket = socketEndpoint(sockets.connect, {
    retryMs: 100,
    maxRetryMs: 800,
    random: () => 1,
    now: () => 0,
    setTimer: (fire, ms) => timer.setTimer(fire, ms),
    clearTimer: (handle) => timer.clearTimer(handle),
    onState: (state) => states.push(state),
  });
  return { sockets, timer, states, socket };
}

/** Why an unserved subscription waits (decision 0123's review, L3): the host's answer, its hook threw. */
const failedAsk = expect.objectContaining({ name: "AuthorizeFailed" });

describe("the status subscription at its first ask (decision 0123)", () => {
  it("0123 (1): socket: onStatus answered AuthorizeFailed at its first ask waits, unserved, and is asked again on the same connection (before: its caller rejected)", async () => {
    const host = answeringHost({ onStatus: "retry" }, "no.");
    const { timer, states, socket } = page(host.endpoint);
    let settled: string | undefined;
    socket
      .subscribe("onStatus", [], () => {})
      .then(
        () => (settled = "answered"),
        (error: Error) => (settled = error.name),
      );
    await settle();
    expect(settled).toBeUndefined();
    expect(states).toEqual([{ state: "open" }, { state: "unserved", attempt: 1, retryInMs: 100, error: failedAsk }]);
    await timer.fire(); // asked again: AuthorizeFailed again, the backoff doubles
    expect(states.at(-1)).toEqual({ state: "unserved", attempt: 2, retryInMs: 200, error: failedAsk });
    host.answer.onStatus = "ok";
    await timer.fire();
    expect(settled).toBe("answered");
    expect(states.at(-1)).toEqual({ state: "open" });
    expect(host.asked.onStatus).toBe(3);
    expect(socket.connections).toBe(1);
    expect(timer.pending).toBe(0);
    socket.close();
  });

  it("0123 (1): socket: any other subscribe answered AuthorizeFailed at its first ask still rejects (its caller may ask again); onStatus refused at its first ask rejects too", async () => {
    const host = answeringHost({ onStatus: "refuse", watchConversation: "retry" }, "no.");
    const { timer, socket } = page(host.endpoint);
    await expect(socket.subscribe("watchConversation", [1], () => {})).rejects.toBeInstanceOf(AuthorizeFailed);
    await expect(socket.subscribe("onStatus", [], () => {})).rejects.toBeInstanceOf(NotAuthorized);
    await settle();
    expect(timer.pending).toBe(0);
    socket.close();
  });

  it("0123 (1): HarnessClient whose status subscription is answered AuthorizeFailed at its first ask shows reconnecting, then ready on the same connection; ready() resolves (before: failed until a next connection)", async () => {
    const host = answeringHost({ onStatus: "retry" }, "no.");
    const sockets = scriptedSockets(host.endpoint);
    const client = new HarnessClient({ url: "ws://x.test/h", connect: () => sockets.connect() });
    const told: HarnessStatus[] = [];
    client.onStatus((status) => told.push(status));
    let ready: string | undefined;
    client.ready().then(
      () => (ready = "ready"),
      (error: Error) => (ready = error.name),
    );
    await expect.poll(() => client.status.kind, { timeout: 5000 }).toBe("reconnecting");
    expect(client.status).toMatchObject({ kind: "reconnecting", attempt: 1, error: { name: "AuthorizeFailed" } }); // why it waits (0123's review, L3)
    host.answer.onStatus = "ok";
    await expect.poll(() => client.status.kind, { timeout: 5000 }).toBe("ready");
    await settle();
    expect(ready).toBe("ready");
    expect(told.map((status) => status.kind)).toEqual(["starting", "reconnecting", "ready"]);
    expect(host.asked.onStatus).toBeGreaterThanOrEqual(2);
    client.terminate();
  });

  it("0123 (1): HarnessClient whose status subscription is refused at its first ask (NotAuthorized): failed with that error, asked once", async () => {
    const host = answeringHost({ onStatus: "refuse" }, "not yours.");
    const sockets = scriptedSockets(host.endpoint);
    const client = new HarnessClient({ url: "ws://x.test/h", connect: () => sockets.connect() });
    await expect(client.ready()).rejects.toBeInstanceOf(NotAuthorized);
    expect(client.status).toMatchObject({ kind: "failed", error: { name: "NotAuthorized" } });
    await settle();
    expect(host.asked.onStatus).toBe(1);
    client.terminate();
  });
});

/** A host that answers every subscribe of a watch not in `failing`, and keeps each one's `lost` by its conversation. */
function endingHost() {
  const failing = new Set<number>();
  const ends = new Map<number, SubscriptionLost>();
  let next = 0;
  const endpoint: HostEndpoint = {
    call: async () => "done",
    subscribe: async (_method, args, _emit, lost) => {
      const conversation = args[0] as number;
      if (failing.has(conversation)) throw new AuthorizeFailed("watchConversation");
      if (lost) ends.set(conversation, lost);
      return ++next;
    },
    unsubscribe: () => {},
  };
  return { failing, ends, endpoint };
}

describe("each change of state told once (decision 0123)", () => {
  it("0123 (3): socket: the highest waiter served while a lower one fails again: unserved stays at its attempt (before: 3, then 2)", async () => {
    const host = endingHost();
    const { timer, states, socket } = page(host.endpoint);
    await settle();
    await socket.subscribe(
      "watchConversation",
      [1],
      () => {},
      () => {},
    );
    await socket.subscribe(
      "watchConversation",
      [2],
      () => {},
      () => {},
    );
    host.failing.add(1);
    host.ends.get(1)!(new AuthorizeFailed("watchConversation")); // 1 waits: attempt 1
    await settle();
    await timer.fire(); // 1 fails again: attempt 2
    await timer.fire(); // attempt 3
    host.failing.add(2);
    host.ends.get(2)!(new AuthorizeFailed("watchConversation")); // 2 waits: attempt 1
    await settle();
    host.failing.delete(1);
    await timer.fire(); // 1 served
    await timer.fire(); // 2 fails again: attempt 2
    host.failing.delete(2);
    await timer.fire(); // 2 served
    expect(states.map((state) => (state.state === "open" ? "open" : `${state.state} ${state.attempt}`))).toEqual([
      "open",
      "unserved 1",
      "unserved 2",
      "unserved 3",
      "open",
    ]);
    socket.close();
  });

  it("0123 (3): HarnessClient: a drop's reconnecting 1, then the carried status subscription's unserved 1: reconnecting told once (before: twice in a row)", async () => {
    const host = answeringHost({ onStatus: "ok" }, "no.");
    const sockets = scriptedSockets(host.endpoint);
    const client = new HarnessClient({ url: "ws://x.test/h", connect: () => sockets.connect() });
    await client.ready();
    await settle();
    const told: string[] = [];
    client.onStatus((status) => told.push(status.kind === "reconnecting" ? `reconnecting ${status.attempt}` : status.kind));
    host.answer.onStatus = "retry"; // the reconnect's ask: AuthorizeFailed, it waits (unserved 1)
    sockets.drop();
    await expect.poll(() => host.asked.onStatus, { timeout: 5000 }).toBe(2);
    await settle();
    host.answer.onStatus = "ok";
    await expect.poll(() => client.status.kind, { timeout: 5000 }).toBe("ready");
    expect(told).toEqual(["ready", "reconnecting 1", "ready"]);
    client.terminate();
  });
});
