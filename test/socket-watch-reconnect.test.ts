/**
 * Decision 0111: a watch that waits (a subscribe the host answers later, decision 0107) on connectHarness(url)'s
 * reconnecting socket (src/browser/socket.ts) when the socket drops. Before, the caller's promise rejected
 * `ConnectionLost` while the reconnect subscribed the watch again, so the host kept a watch nobody held and the
 * rejected caller's listener still heard its views. Now the watch the caller still holds keeps waiting across the
 * reconnect and is answered on the next connection; one the caller gave up (or the endpoint closed) is asked nowhere.
 * Against a host that serves real frames (`serveMessages`) and counts what it holds.
 */
import fc from "fast-check";
import { describe, expect, it } from "vitest";
import { type SocketLike, socketEndpoint } from "../src/browser/socket.ts";
import { ConnectionLost } from "../src/errors.ts";
import type { HostEndpoint } from "../src/host/endpoint.ts";
import { type HostMessage, serveMessages } from "../src/host/messages.ts";
import type { PendingSubscription } from "../src/host/pending-subscription.ts";
import { settled, waitingWatches } from "./support.ts";

/**
 * A host whose `watch` subscriptions wait until `come()` (then each is answered and hears "view"), served to each
 * socket the page opens through `serveMessages`; `held()` counts the watches it holds, waiting or answered.
 */
function waitingHost() {
  const watches = waitingWatches();
  const answered = new Map<number, (value: unknown) => void>();
  let ids = 0;
  const endpoint: HostEndpoint = {
    call: async () => "ok",
    subscribe: (_method, _args, emit) =>
      watches.wait(() => {
        const id = ++ids;
        answered.set(id, emit);
        emit("view");
        return id;
      }),
    unsubscribe: (id) => void answered.delete(id),
  };
  const sockets: Array<{ drop(): void; open: boolean }> = [];
  /** How many of the next attempts fail before they open (a server down, a network gone: error, then close). */
  let failNext = 0;
  const connect = (): SocketLike => {
    const listeners: Record<string, Array<(event?: any) => void>> = { open: [], message: [], close: [], error: [] };
    const fire = (type: string, event?: unknown) => {
      for (const listener of listeners[type]!) listener(event);
    };
    const state = { open: true, drop: () => {} };
    const connection = serveMessages(endpoint, (message: HostMessage) => {
      const data = JSON.stringify(message);
      queueMicrotask(() => state.open && fire("message", { data }));
    });
    state.drop = () => {
      if (!state.open) return;
      state.open = false;
      connection.close();
      fire("close");
    };
    sockets.push(state);
    if (failNext > 0) {
      failNext--;
      state.open = false;
      connection.close();
      queueMicrotask(() => {
        fire("error");
        fire("close");
      });
    } else queueMicrotask(() => state.open && fire("open"));
    return {
      send: (data: string) => void (state.open && connection.receive(JSON.parse(data))),
      close: () => state.drop(),
      addEventListener: (type: string, listener: (event?: any) => void) => void listeners[type]!.push(listener),
    } as SocketLike;
  };
  return {
    connect,
    /** Drops the page's current connection (the host sees it close). */
    drop: () => sockets.at(-1)?.drop(),
    come: () => watches.come(),
    held: () => watches.size + answered.size,
    /** The next `n` attempts fail before they open. */
    failAttempts: (n: number) => void (failNext = n),
  };
}

/** Lets every queued frame, open and retry (timers of 0 ms) run. */
const settle = async () => {
  for (let i = 0; i < 5; i++) await new Promise((resolve) => setTimeout(resolve, 0));
};

describe("a waiting watch across connectHarness(url)'s reconnect (decision 0111)", () => {
  it("0111: a watch that waits when the socket drops keeps waiting, is asked again on the next connection only, and starts there when its conversation comes (before: ConnectionLost, and the host kept the re-asked watch for a caller that had given up)", async () => {
    const host = waitingHost();
    const endpoint = socketEndpoint(host.connect, { retryMs: 0 });
    const views: unknown[] = [];
    const watch = endpoint.subscribe("watchConversation", [9], (view) => views.push(view));
    const state = settled(watch);
    await settle();
    expect(host.held()).toBe(1);
    host.drop();
    await settle();
    expect(state.outcome).toBeUndefined(); // before: ConnectionLost
    expect(host.held()).toBe(1); // the lost connection's watch went with it; the next connection's waits
    host.drop(); // and once more
    await settle();
    expect(host.held()).toBe(1);
    host.come();
    await settle();
    expect(state.outcome).toBe("watching");
    expect(views).toEqual(["view"]);
    endpoint.unsubscribe(await watch);
    await settle();
    expect(host.held()).toBe(0);
    endpoint.close();
  });

  it("0111: a watch given up while the socket is down is asked nowhere again; close() ends a waiting watch with ConnectionLost and leaves nothing at the host", async () => {
    const host = waitingHost();
    const endpoint = socketEndpoint(host.connect, { retryMs: 50 });
    const views: unknown[] = [];
    const givenUp = endpoint.subscribe("watchConversation", [9], (view) => views.push(view)) as PendingSubscription<number>;
    const state = settled(givenUp);
    await settle();
    host.drop();
    givenUp.cancel(); // while reconnecting
    await new Promise((resolve) => setTimeout(resolve, 80));
    await settle();
    expect(endpoint.connections).toBe(2);
    expect(state.outcome).toBeDefined();
    expect(host.held()).toBe(0);
    host.come();
    await settle();
    expect(views).toEqual([]);
    const closing = endpoint.subscribe("watchConversation", [9], () => {});
    await settle();
    expect(host.held()).toBe(1);
    endpoint.close();
    await expect(closing).rejects.toBeInstanceOf(ConnectionLost);
    await settle();
    expect(host.held()).toBe(0);
  });

  it("0111 review: a watch waiting across a drop whose first reconnect attempt fails before it opens still starts on the next connection, and a call made afterwards is answered (before: the attempt's drop replaced the promise the watch waited on, which never settled, even after close())", async () => {
    const host = waitingHost();
    const endpoint = socketEndpoint(host.connect, { retryMs: 0 });
    const views: unknown[] = [];
    const state = settled(endpoint.subscribe("watchConversation", [9], (view) => views.push(view)));
    await settle();
    host.failAttempts(1);
    host.drop();
    await settle();
    await settle();
    expect(endpoint.connections).toBe(2);
    expect(host.held()).toBe(1);
    host.come();
    await settle();
    expect(state.outcome).toBe("watching");
    expect(views).toEqual(["view"]);
    const call = settled(endpoint.call("x", []));
    await settle();
    expect(call.outcome).toBe("watching"); // answered
    endpoint.close();
  });

  it("0111 review: a call and a watch made while the very first attempt fails (the server down at page load) are served on the connection after it (before: both waited for good, and close() did not end them)", async () => {
    const host = waitingHost();
    host.failAttempts(1);
    const endpoint = socketEndpoint(host.connect, { retryMs: 0 });
    const call = settled(endpoint.call("x", []));
    const views: unknown[] = [];
    const watch = settled(endpoint.subscribe("watchConversation", [9], (view) => views.push(view)));
    await settle();
    await settle();
    expect(call.outcome).toBe("watching");
    host.come();
    await settle();
    expect(watch.outcome).toBe("watching");
    expect(views).toEqual(["view"]);
    endpoint.close();
  });

  it("0111 review: a call waiting across failed attempts ends with ConnectionLost when the page closes the endpoint (before: it never settled)", async () => {
    const host = waitingHost();
    const retries: Array<() => void> = [];
    const endpoint = socketEndpoint(host.connect, { setTimer: (fire) => void retries.push(fire) });
    await settle();
    host.failAttempts(1);
    host.drop();
    const call = settled(endpoint.call("x", []));
    retries.shift()?.(); // the attempt, which fails before it opens
    await settle();
    expect(call.outcome).toBeUndefined();
    expect(retries.length).toBe(1); // the next attempt waits
    endpoint.close();
    await settle();
    expect(call.outcome).toBe("ConnectionLost");
  });

  it("0107/0111 review: a watch given up while the socket is down rejects at once with NotFound (no longer watched), as other transports' given-up watches do, and is asked nowhere (before: it settled only when a connection opened, with ConnectionLost)", async () => {
    const host = waitingHost();
    const endpoint = socketEndpoint(host.connect, { retryMs: 1_000_000 });
    const views: unknown[] = [];
    const watch = endpoint.subscribe("watchConversation", [9], (view) => views.push(view)) as PendingSubscription<number>;
    const state = settled(watch);
    await settle();
    host.drop(); // the next attempt is a long way off
    watch.cancel();
    await settle();
    expect(state.outcome).toBe("NotFound");
    expect(host.held()).toBe(0);
    endpoint.close();
  });

  it("0111 property: any sequence of watches, drops, cancels and arrivals leaves the host holding exactly the watches their callers still hold; a given-up watch hears nothing and rejects NotFound (or had started); attempts that fail before they open change none of it; a held one starts once", async () => {
    const action = fc.oneof(
      fc.constant({ kind: "watch" as const }),
      fc.constant({ kind: "drop" as const }),
      fc.constant({ kind: "come" as const }),
      fc.record({ kind: fc.constant("fail" as const), attempts: fc.integer({ min: 1, max: 2 }) }),
      fc.record({ kind: fc.constant("cancel" as const), which: fc.nat(20) }),
      fc.record({ kind: fc.constant("unsubscribe" as const), which: fc.nat(20) }),
    );
    await fc.assert(
      fc.asyncProperty(fc.array(action, { maxLength: 14 }), async (actions) => {
        const host = waitingHost();
        const endpoint = socketEndpoint(host.connect, { retryMs: 0 });
        const watches: Array<{
          promise: ReturnType<HostEndpoint["subscribe"]> & { cancel(): void };
          views: unknown[];
          state: ReturnType<typeof settled>;
          gone: boolean;
        }> = [];
        for (const step of actions) {
          if (step.kind === "watch") {
            const views: unknown[] = [];
            const promise = endpoint.subscribe("watchConversation", [9], (view) =>
              views.push(view),
            ) as never as (typeof watches)[number]["promise"];
            watches.push({ promise, views, state: settled(promise), gone: false });
          } else if (step.kind === "drop") host.drop();
          else if (step.kind === "fail") {
            host.failAttempts(step.attempts);
            host.drop();
          } else if (step.kind === "come") host.come();
          else {
            const watch = watches[step.which % Math.max(1, watches.length)];
            if (!watch || watch.gone) continue;
            watch.gone = true;
            if (step.kind === "cancel" || watch.state.outcome !== "watching") watch.promise.cancel();
            else endpoint.unsubscribe(await watch.promise);
          }
          await settle();
        }
        await settle();
        const held = watches.filter((watch) => !watch.gone);
        expect(host.held()).toBe(held.length);
        for (const watch of held) expect(watch.state.outcome ?? "waiting").not.toMatch(/ConnectionLost|NotFound/);
        const given = watches.filter((watch) => watch.gone && watch.state.outcome !== "watching");
        for (const watch of given) {
          expect(watch.views).toEqual([]);
          // Given up before it started: it rejected, as a refused watch (before, this was never checked).
          expect(watch.state.outcome).toBe("NotFound");
        }
        // Everything still held starts once its conversation comes, and hears it (once per connection it was answered on).
        host.come();
        await settle();
        for (const watch of held) {
          expect(watch.state.outcome).toBe("watching");
          expect(watch.views.length).toBeGreaterThan(0);
        }
        for (const watch of given) expect(watch.views).toEqual([]);
        endpoint.close();
        await settle();
      }),
      {
        numRuns: 60,
        // Found by this property: a watch answered, its socket dropped, unsubscribed while the next connection's
        // subscribe waited — that one stayed at the host.
        examples: [[[{ kind: "watch" }, { kind: "come" }, { kind: "drop" }, { kind: "unsubscribe", which: 0 }]]],
      },
    );
  });
});
