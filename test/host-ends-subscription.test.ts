/**
 * Decision 0117 (issue 27's seams left by 0114). A host that opens its harness again (a rebuild from the object's
 * snapshot, a take-back, the object taking the lease over) moves every answered watch to the new harness
 * (`ConversationWatch.rebind`, the page tools' watch). One whose conversation is not there has ended: the host tells
 * its owner (`lost`), sends it to a page over messages as the error frame under the page's subscription id (which the
 * page's socket understands since 0114), and holds it no more. Before, the error was dropped and the watch stayed
 * silent for good — on a Durable Object's socket the page never asks again; the page tools' watch even threw out of
 * the reopen, and the views after it were not moved. Driven through a page's `HostClient` over a reconnecting socket,
 * as an app meets it.
 */
import { describe, expect, it } from "vitest";
import type { ConversationViewState } from "../src/agent/view/view.ts";
import { socketEndpoint } from "../src/browser/socket.ts";
import { ConnectionLost, NotFound } from "../src/errors.ts";
import { createCopyService } from "../src/follow/copy-service.ts";
import { HostClient } from "../src/host/client.ts";
import { hostEndpoint } from "../src/host/endpoint.ts";
import { createHost } from "../src/host/host.ts";
import { type HeldSubscription, messageEndpoint, serveMessages } from "../src/host/messages.ts";
import { createRegistry, Harness, MemoryStorage } from "../src/index.ts";
import { createManualClock } from "../src/testing/clock.ts";
import { rebuildingHost } from "./rebuilding-host-support.ts";
import { scriptedSockets, settle } from "./socket-support.ts";
import { ctx } from "./support.ts";

describe("a watch the host moves and cannot serve ends, and its owner is told (decision 0117)", () => {
  it("0117: over a page's socket, the host reopens without conversation A: A's view ends lost (NotFound, `onLost` once), a watch of A is told through its `lost`, the page tools of A through `onLost`; the host holds none of them any more, and the view of B moved and keeps updating (before: silent for good, held at the host)", async () => {
    const { host, rebuildWithout } = await rebuildingHost();
    const a = await host.service.createConversation();
    const b = await host.service.createConversation();
    const sockets = scriptedSockets(hostEndpoint(host.service));
    const socket = socketEndpoint(sockets.connect, { retryMs: 0 });
    const client = new HostClient(socket, "page-1");
    await client.ready();
    const base = host.listenerCount();
    const view = await client.openConversation(a);
    const other = await client.openConversation(b);
    const viewLost: Error[] = [];
    view.onLost((error) => viewLost.push(error));
    const watchLost: Error[] = [];
    await client.watchConversation(
      a,
      () => {},
      (error) => watchLost.push(error),
    );
    const toolsLost: Error[] = [];
    await client.providePageTools(a, { pick: (async () => ({ content: [] })) as never }, { onLost: (error) => toolsLost.push(error) });
    await settle();
    expect(host.listenerCount()).toBe(base + 3); // two views and the watch (page tools' watches are not counted)

    await rebuildWithout(a);

    expect(view.lost).toBeInstanceOf(NotFound);
    expect(viewLost).toEqual([view.lost]);
    expect(watchLost).toHaveLength(1);
    expect(watchLost[0]).toBeInstanceOf(NotFound);
    expect(toolsLost).toHaveLength(1);
    expect(toolsLost[0]).toBeInstanceOf(NotFound);
    expect(host.listenerCount()).toBe(base + 1); // only B's view is held (before: base + 3)
    expect(other.lost).toBeUndefined();
    expect(client.status.kind).toBe("ready");
    const states: ConversationViewState[] = [];
    other.subscribe((state) => states.push(state));
    await host.service.submit(b, { type: "input", content: "after the rebuild" });
    await expect.poll(() => states.at(-1)?.entries.length ?? 0).toBeGreaterThan(0);
    // A reconnect asks only what is still held: nobody is told twice.
    sockets.drop();
    await settle();
    expect(viewLost).toHaveLength(1);
    expect(watchLost).toHaveLength(1);
    expect(host.listenerCount()).toBe(base + 1);
    socket.close();
    await host.service.close();
  });

  it("0117: the host's own subscriber (no transport) is told through `lost` once, and a second reopen tells nobody again", async () => {
    const { host, rebuildWithout } = await rebuildingHost();
    const a = await host.service.createConversation();
    const told: Error[] = [];
    await host.service.watchConversation(
      a,
      () => {},
      (error) => told.push(error),
    );
    const base = host.listenerCount();
    await rebuildWithout(a);
    expect(told).toHaveLength(1);
    expect(told[0]).toBeInstanceOf(NotFound);
    expect(host.listenerCount()).toBe(base - 1);
    await rebuildWithout(a);
    expect(told).toHaveLength(1);
    await host.service.close();
  });
});

describe("a subscription the holding host refuses at a takeover ends, and its owner is told (decision 0117)", () => {
  it("0117: a Durable Object's copy hands its page's subscriptions to the host that took the lease; the view whose conversation that host lacks is told lost over the page's socket (NotFound, once) and is no longer held there, the status goes on (before: dropped at the move, the page's view silent for good)", async () => {
    const clock = createManualClock(0);
    const registry = createRegistry();
    // The copy holds conversation A; the holding host's storage lacks it (a copy and a holder that differ).
    const copyStorage = new MemoryStorage();
    const made = await Harness.open(copyStorage, { registry, clock }, ctx);
    const a = (await made.createConversation({}, ctx)).id;
    await made.close(ctx);
    const copyHost = createHost({
      database: "object",
      openStorage: async () => copyStorage,
      harness: { registry, clock, readOnly: true },
      now: clock.now,
    });
    const copy = createCopyService({
      copy: copyHost,
      holder: { forward: () => Promise.reject(new ConnectionLost()) },
      clock,
    });
    // The page's socket, frames as JSON a microtask later.
    let held: HeldSubscription[] = [];
    const page = messageEndpoint((message) => queueMicrotask(() => connection.receive(JSON.parse(JSON.stringify(message)))));
    const connection = serveMessages(
      hostEndpoint(copy.service),
      (message) => queueMicrotask(() => page.receive(JSON.parse(JSON.stringify(message)))),
      { onSubscriptions: (now) => void (held = now) },
    );
    const client = new HostClient(page.endpoint, "device-page");
    await client.ready();
    const view = await client.openConversation(a);
    const lost: Error[] = [];
    view.onLost((error) => lost.push(error));
    expect(held.map((subscription) => subscription.method).sort()).toEqual(["onStatus", "watchConversation"]);
    const holder = createHost({
      database: "object",
      openStorage: async () => new MemoryStorage(),
      harness: { registry, clock },
      now: clock.now,
    });
    await copy.hold(holder);
    await settle();
    expect(lost).toHaveLength(1);
    expect(lost[0]).toBeInstanceOf(NotFound);
    expect(view.lost).toBe(lost[0]);
    expect(held.map((subscription) => subscription.method)).toEqual(["onStatus"]); // before: the watch still held
    expect(client.status.kind).toBe("ready");
    connection.close();
    await copy.close();
  });
});
