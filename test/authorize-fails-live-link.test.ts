/**
 * Decision 0117, after review (H2): `AuthorizeFailed` is retryable, so a page keeps a subscription its host answered so
 * at a reconnect or a wake — but the link is open and healthy, and the host no longer holds the subscription: nothing
 * asked again, and the page sat silent with status "ready". After that review the page's socket closed such a link to
 * reconnect; its second review (H-a) found that this failed every call on a healthy link, forever while one
 * subscription stayed unservable. Now the page asks that subscription again on the same link after its own backoff
 * (`retryMs`, doubling to `maxRetryMs`, one timer per subscription); calls are unaffected; its status says reconnecting
 * while one waits, and the host's own once each is served. A Durable Object that woke keeps such a subscription held
 * (the next wake asks again).
 */
import { describe, expect, it } from "vitest";
import type { ConversationViewState } from "../src/agent/view/view.ts";
import { HarnessClient } from "../src/browser/client.ts";
import { exposeHost, wrapHost } from "../src/browser/comlink.ts";
import { type SocketLike, type SocketState, socketEndpoint } from "../src/browser/socket.ts";
import { tabsEndpoint } from "../src/browser/tabs/follower.ts";
import { AuthorizeFailed } from "../src/errors.ts";
import { HostClient } from "../src/host/client.ts";
import { guardEndpoint } from "../src/host/doors.ts";
import { type HostEndpoint, hostEndpoint } from "../src/host/endpoint.ts";
import { createHost } from "../src/host/host.ts";
import { type HeldSubscription, type HostMessage, type MessageConnection, serveMessages } from "../src/host/messages.ts";
import type { HarnessStatus } from "../src/host/protocol.ts";
import { createRegistry, MemoryStorage } from "../src/index.ts";
import { rebuildingHost } from "./rebuilding-host-support.ts";
import { manualTimer, scriptedSockets, settle } from "./socket-support.ts";

async function guardedHost() {
  const host = createHost({
    database: "db",
    openStorage: async () => new MemoryStorage(),
    harness: { registry: createRegistry(), resume: true },
    now: () => 0,
  });
  await host.ready;
  const hook = { failing: false, asked: 0 };
  const door = (): HostEndpoint =>
    guardEndpoint(hostEndpoint(host.service), "ann", {
      authorize: (_caller, call) => {
        hook.asked++;
        // The permission store is down for subscriptions (one conversation's, say): calls still pass.
        if (hook.failing && call.kind === "subscribe") throw new Error("the permission store is down");
        return true;
      },
    });
  return { host, hook, door };
}

/** Why an unserved subscription waits (decision 0123's review, L3): the host's answer, its hook threw. */
const failedAsk = expect.objectContaining({ name: "AuthorizeFailed" });

describe("decision 0117 after review: a subscription the host cannot serve now, on a link still open", () => {
  it("H2, H-a (S8): a hook that throws when a reconnect asks again: the page asks each subscription again on the same link after its own backoff (doubling, one timer each), calls go through meanwhile, and it is served again once the hook answers — nobody is told lost", async () => {
    const { host, hook, door } = await guardedHost();
    const a = await host.service.createConversation();
    const sockets = scriptedSockets(door());
    const timer = manualTimer();
    const states: SocketState[] = [];
    const socket = socketEndpoint(sockets.connect, {
      retryMs: 100,
      maxRetryMs: 10_000,
      random: () => 1,
      setTimer: (fire, ms) => timer.setTimer(fire, ms),
      clearTimer: (handle) => timer.clearTimer(handle),
      onState: (state) => states.push(state),
    });
    const client = new HostClient(socket, "page-1");
    await client.ready();
    const view = await client.openConversation(a);
    const lost: Error[] = [];
    view.onLost((error) => lost.push(error));
    hook.failing = true;
    sockets.drop();
    await settle();
    expect(timer.delays).toEqual([100]);
    await timer.fire(); // the reconnect: its two subscriptions (status, watch) are not served, each waits 100 ms
    expect(timer.delays).toEqual([100, 100, 100]);
    expect(states.at(-1)).toEqual({ state: "unserved", attempt: 1, retryInMs: 100, error: failedAsk });
    for (let i = 0; i < 4; i++) await timer.fire(); // asked again twice each: 200, then 400
    expect(timer.delays).toEqual([100, 100, 100, 200, 200, 400, 400]);
    expect(timer.pending).toBe(2); // one wait per subscription, never more
    expect(socket.connections).toBe(2); // the link was kept
    expect(states.at(-1)).toEqual({ state: "unserved", attempt: 3, retryInMs: 400, error: failedAsk });
    // A call meanwhile is answered on the same link.
    expect(await client.listConversations()).toHaveLength(1);
    expect(lost).toEqual([]);
    hook.failing = false;
    await timer.fire();
    await timer.fire();
    expect(timer.pending).toBe(0);
    expect(states.at(-1)).toEqual({ state: "open" });
    const seen: ConversationViewState[] = [];
    view.subscribe((state) => seen.push(state));
    await host.service.submit(a, { type: "input", content: "served again" });
    await settle();
    expect(seen.at(-1)?.entries.length ?? 0).toBeGreaterThan(0);
    expect(lost).toEqual([]);
    expect(client.status.kind).toBe("ready");
    // A drop while they wait ends their waits: the reconnect asks everything again, from the start of its backoff.
    hook.failing = true;
    sockets.drop();
    await settle();
    await timer.fire();
    expect(timer.pending).toBe(2);
    sockets.drop();
    await settle();
    expect(timer.pending).toBe(1); // only the reconnect
    expect(timer.delays.at(-1)).toBe(100);
    socket.close();
    await host.service.close();
  });

  it("H-a (S8): a submit made while a subscription waits to be asked again is answered, on the same link (before: ConnectionLost, though the host ran it)", async () => {
    const mode = { watchFailing: false };
    let ran = 0;
    let next = 0;
    const endpoint: HostEndpoint = {
      call: async () => {
        ran++;
        await new Promise((resolve) => setTimeout(resolve, 5)); // a submit takes a moment
        return "done";
      },
      subscribe: async () => {
        if (mode.watchFailing) throw new AuthorizeFailed("watchConversation");
        return ++next;
      },
      unsubscribe: () => {},
    };
    const sockets = scriptedSockets(endpoint);
    const timer = manualTimer();
    const socket = socketEndpoint(sockets.connect, {
      retryMs: 100,
      random: () => 1,
      setTimer: (fire, ms) => timer.setTimer(fire, ms),
      clearTimer: (handle) => timer.clearTimer(handle),
    });
    await settle();
    const lost: Error[] = [];
    const id = await socket.subscribe(
      "watchConversation",
      ["A"],
      () => {},
      (error) => lost.push(error),
    );
    mode.watchFailing = true; // the hook fails for this watch only; calls are allowed
    sockets.drop();
    await settle();
    const call = socket.call("submit", [1, "hello"]).then(
      (value) => ({ value }),
      (error: Error) => ({ error: (error as Error).name }),
    );
    await timer.fire(); // reconnect: the queued call and the re-subscribe go out together; the re-subscribe fails
    expect(timer.pending).toBe(1); // the watch's wait
    const later = socket.call("submit", [1, "again"]);
    expect(await call).toEqual({ value: "done" });
    expect(await later).toBe("done");
    expect(ran).toBe(2);
    expect(socket.connections).toBe(2);
    // Given up while it waits: the wait ends, nothing more is asked.
    await socket.unsubscribe(id);
    expect(timer.pending).toBe(0);
    expect(lost).toEqual([]);
    socket.close();
  });

  it("H2, H-a: a page's HarnessClient over an object's socket does not say ready while its host cannot serve what it holds, answers calls meanwhile, and is ready again on the same connection once served", async () => {
    const { host, hook, door } = await guardedHost();
    const sockets = scriptedSockets(door());
    let connects = 0;
    const client = new HarnessClient({
      url: "ws://object.test/harness",
      connect: () => {
        connects++;
        return sockets.connect();
      },
    });
    await client.ready();
    await settle(); // its status subscription answered
    hook.failing = true;
    sockets.drop(); // reconnects after the default backoff (250–500 ms): waited for by what happens, not for a time
    await expect.poll(() => connects, { timeout: 5_000 }).toBe(2);
    const asked = hook.asked;
    await expect.poll(() => hook.asked, { timeout: 5_000 }).toBeGreaterThan(asked);
    await settle();
    // The host could not serve the page's status subscription on that connection: not ready, reconnecting.
    expect(client.status.kind).toBe("reconnecting");
    // Calls go through on that connection meanwhile.
    expect(await client.listConversations()).toEqual([]);
    hook.failing = false;
    // Asked again on the same connection after its backoff (250–500 ms), and served: ready, no new connection.
    await expect.poll(() => client.status.kind, { timeout: 10_000 }).toBe("ready");
    expect(connects).toBe(2);
    client.terminate();
    await host.service.close();
  });

  it("H2, H-a: a Durable Object wakes and its hook throws while it restores what the page held: the page hears it, asks again on the same socket after its backoff and is served; the woken instance still holds the subscription for a later wake", async () => {
    const { host, hook, door } = await guardedHost();
    const a = await host.service.createConversation();
    let held: HeldSubscription[] = [];
    let connection!: MessageConnection;
    let opened = 0;
    /** A socket as a Durable Object's: its close ends the connection (the object sees it), a new one is a new connection. */
    const connect = (): SocketLike => {
      const listeners: Record<string, Array<(event?: any) => void>> = { open: [], message: [], close: [], error: [] };
      let open = true;
      const send = (message: HostMessage) => {
        const data = JSON.stringify(message);
        queueMicrotask(() => {
          if (open) for (const listener of listeners.message!) listener({ data });
        });
      };
      /** One instance of the object on this socket: its attachment is written while the socket is open. */
      const instance = () => {
        const alive = { now: true };
        const served = serveMessages(door(), (message) => alive.now && send(message), {
          onSubscriptions: (now) => void (alive.now && open && (held = now)),
        });
        const evict = () => {
          alive.now = false;
          served.close();
        };
        return { served, evict };
      };
      let mine = instance();
      connection = mine.served;
      opened++;
      queueMicrotask(() => {
        for (const listener of listeners.open!) listener();
      });
      return {
        send: (data: string) => open && connection.receive(JSON.parse(data)),
        close: () => {
          if (!open) return;
          open = false;
          mine.served.close();
          for (const listener of listeners.close!) listener();
        },
        addEventListener: (type: string, listener: (event?: any) => void) => void listeners[type]!.push(listener),
        // Hibernation: a new instance on the same socket, restoring what the attachment held.
        wake: () => {
          // The evicted instance is gone: it neither writes nor sends any more.
          mine.evict();
          mine = instance();
          connection = mine.served;
          return connection;
        },
      } as SocketLike & { wake(): MessageConnection };
    };
    const sockets: Array<SocketLike & { wake(): MessageConnection }> = [];
    const timer = manualTimer();
    const socket = socketEndpoint(
      () => {
        const made = connect() as SocketLike & { wake(): MessageConnection };
        sockets.push(made);
        return made;
      },
      {
        retryMs: 100,
        random: () => 1,
        setTimer: (fire, ms) => timer.setTimer(fire, ms),
        clearTimer: (handle) => timer.clearTimer(handle),
      },
    );
    const client = new HostClient(socket, "page-1");
    await client.ready();
    const view = await client.openConversation(a);
    const lost: Error[] = [];
    view.onLost((error) => lost.push(error));
    await settle();
    const attachment = held;
    expect(attachment.map((h) => h.method).sort()).toEqual(["onStatus", "watchConversation"]);
    hook.failing = true;
    const woken = sockets.at(-1)!.wake();
    woken.restore(attachment);
    await settle();
    // The woken instance could not serve them now: still held, for a later wake.
    expect(held.map((h) => h.method).sort()).toEqual(["onStatus", "watchConversation"]);
    // The page heard it: each subscription waits its backoff, on the same socket.
    expect(timer.pending).toBe(2);
    expect(lost).toEqual([]);
    hook.failing = false;
    await timer.fire();
    await timer.fire();
    expect(opened).toBe(1);
    expect(held.map((h) => h.method).sort()).toEqual(["onStatus", "watchConversation"]);
    const seen: ConversationViewState[] = [];
    view.subscribe((state) => seen.push(state));
    await host.service.submit(a, { type: "input", content: "after the wake" });
    await settle();
    expect(seen.at(-1)?.entries.length ?? 0).toBeGreaterThan(0);
    expect(lost).toEqual([]);
    socket.close();
    await host.service.close();
  });

  it("H2, the tabs' endpoint: a worker's page whose watch the worker's door cannot serve when the database reopens (its hook throws) says reconnecting, asks again after a backoff, and is served again once the hook answers — nobody is told lost", async () => {
    const { host, rebuildWithout } = await rebuildingHost();
    const a = await host.service.createConversation();
    const hook = { failing: false, asked: 0 };
    const channel = new MessageChannel();
    exposeHost(host.service, channel.port1 as never, () => {
      hook.asked++;
      if (hook.failing) throw new Error("the permission store is down");
      return true;
    });
    const tabs = tabsEndpoint(wrapHost(channel.port2 as never));
    const client = new HostClient(tabs, "page-1");
    await client.ready();
    const view = await client.openConversation(a);
    const lost: Error[] = [];
    view.onLost((error) => lost.push(error));
    const statuses: HarnessStatus["kind"][] = [];
    client.onStatus((status) => statuses.push(status.kind));
    hook.failing = true;
    await rebuildWithout(-1); // the harness opens again on the rebuilt storage: the watch moves there, and the hook throws
    await settle();
    expect(client.status).toMatchObject({ kind: "reconnecting", attempt: 1, retryInMs: 500 });
    // Asked again after the backoff (the second wait twice as long), never faster.
    const asked = hook.asked;
    await expect.poll(() => hook.asked, { timeout: 5_000 }).toBe(asked + 1);
    await expect.poll(() => client.status, { timeout: 5_000 }).toMatchObject({ kind: "reconnecting", attempt: 2, retryInMs: 1000 });
    hook.failing = false;
    await expect.poll(() => client.status.kind, { timeout: 5_000 }).toBe("ready");
    const seen: ConversationViewState[] = [];
    view.subscribe((state) => seen.push(state));
    await host.service.submit(a, { type: "input", content: "served again" });
    await expect.poll(() => seen.at(-1)?.entries.length ?? 0).toBeGreaterThan(0);
    expect(lost).toEqual([]);
    expect(statuses).toContain("reconnecting");
    tabs.close();
    channel.port1.close();
    channel.port2.close();
    await host.service.close();
  });
});
