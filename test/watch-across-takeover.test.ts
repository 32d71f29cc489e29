import { describe, expect, it } from "vitest";
import { HostClient } from "../src/host/client.ts";
import { hostEndpoint } from "../src/host/endpoint.ts";
import { type ClientMessage, type HostMessage, messageEndpoint, serveMessages } from "../src/host/messages.ts";
import { flush } from "./support.ts";
import { pageWatch, type Tab, takeoverWorld } from "./takeover-world.ts";

// Decision 0140 (issue 27, left by 0134's review): after a takeover (another tab takes the database) the host queues
// for it again and opens a harness later, but a page's conversation views stayed bound to the closed harness, silent
// for good (or, taken during a take-back or a rebuild, ended `lost`): the page had to watch again. They now wait and
// go on on the harness opened next — one snapshot there, then its commits — and end with a typed error only when no
// harness will come (a close for good, an open that failed).

/** `a` holds the database with notes 1 and 2 in its root conversation; `b` waits for it. */
async function twoTabs(rebuilds = false) {
  const world = takeoverWorld();
  const a = world.tab("a", rebuilds);
  await a.served.ready;
  await a.note(1);
  await a.note(2);
  const conversationId = (await a.service.listConversations())[0]!.id;
  const b = world.tab("b");
  await flush(8);
  expect(b.service.status().kind).toBe("waiting-for-lock");
  return { world, a, b, conversationId };
}

/** `to` asks for the database; resolves once it has it open (the owner closed and queued again behind it). */
async function takeOver(from: Tab, to: Tab) {
  to.service.requestTakeover();
  await expect.poll(() => to.service.status().kind).toBe("ready");
  expect(from.service.status().kind).toBe("waiting-for-lock");
}

/** The view a watch made on `tab` now starts with (a fresh load's). */
async function freshIds(tab: Tab, conversationId: number) {
  const fresh = pageWatch(tab.service, conversationId);
  const unsubscribe = await fresh.subscribed;
  await flush(8);
  unsubscribe();
  return { ids: fresh.ids(), notes: fresh.notes() };
}

/** No entry twice, in id order. */
function once(ids: number[]) {
  expect(ids).toEqual([...new Set(ids)].sort((x, y) => x - y));
}

describe("a conversation view goes on across a takeover (decision 0140)", () => {
  it("S5, S9: a watch made before a takeover hears nothing while another tab has the database, then goes on on the harness its host opens again: one snapshot with what the other tab wrote, then its own commits, nothing lost or twice, no lost told", async () => {
    const { a, b, conversationId } = await twoTabs();
    const baseline = a.served.listenerCount();
    const page = pageWatch(a.service, conversationId);
    await page.subscribed;
    await flush(8);
    expect(page.notes()).toEqual([1, 2]);
    await takeOver(a, b);
    await b.note(3);
    await b.note(4);
    await flush(8);
    // Nothing from a closed or another tab's harness: the view is where it was.
    expect(page.updates.map((u) => u.type)).toEqual(["snapshot"]);
    expect(page.notes()).toEqual([1, 2]);
    await b.service.close(); // the other tab lets go: this one opens again
    await expect.poll(() => a.service.status().kind).toBe("ready");
    await flush(8);
    // Before: still ["snapshot"] and [1, 2] — bound to the closed harness, silent for good.
    expect(page.updates.map((u) => u.type)).toEqual(["snapshot", "snapshot"]);
    expect(page.notes()).toEqual([1, 2, 3, 4]);
    await a.note(5);
    await flush(8);
    expect(page.notes()).toEqual([1, 2, 3, 4, 5]);
    once(page.ids());
    expect({ ids: page.ids(), notes: page.notes() }).toEqual(await freshIds(a, conversationId));
    expect(page.lost).toEqual([]);
    expect(a.served.listenerCount()).toBe(baseline + 1);
    await a.service.close();
  });

  it("S5: a page's view over messages (the client React's hooks use) goes on across two takeovers: its state the fresh view's after each, never told lost", async () => {
    const { a, b, conversationId } = await twoTabs();
    let toPage: (message: HostMessage) => void = () => {};
    const connection = serveMessages(hostEndpoint(a.service), (message) => queueMicrotask(() => toPage(structuredClone(message))));
    const endpoint = messageEndpoint((message: ClientMessage) => queueMicrotask(() => connection.receive(structuredClone(message))));
    toPage = endpoint.receive;
    const client = new HostClient(endpoint.endpoint, "page-1");
    const view = await client.openConversation(conversationId);
    const lost: Error[] = [];
    view.onLost((error) => void lost.push(error));
    const notes = () => view.state.entries.filter((entry) => entry.kind === "app.note").map((entry) => entry.payload);
    const ids = () => view.state.entries.map((entry) => entry.id);
    for (const [round, payload] of [
      [1, 3],
      [2, 5],
    ] as const) {
      await takeOver(a, b);
      await b.note(payload);
      await takeOver(b, a);
      await a.note(payload + 1);
      await flush(16);
      expect(notes(), `round ${round}`).toEqual(Array.from({ length: payload + 1 }, (_, i) => i + 1));
      once(ids());
      expect({ ids: ids(), notes: notes() }).toEqual(await freshIds(a, conversationId));
    }
    expect(lost).toEqual([]);
    view.close();
    connection.close();
    await a.service.close();
    await b.service.close();
  });

  it("S5, S9: a takeover that ends a rebuild under way (review of 0134's L1 path): the view made before is not ended — it goes on on the harness opened once the other tab lets go, nothing lost or twice", async () => {
    const { a, b, conversationId } = await twoTabs(true);
    const page = pageWatch(a.service, conversationId);
    await page.subscribed;
    await flush(8);
    a.rebuild();
    await flush(8);
    b.service.requestTakeover(); // a closes once its rebuild's run ends
    a.endRebuild();
    await expect.poll(() => b.service.status().kind).toBe("ready");
    await flush(8);
    // Before: ended here, `lost` HarnessClosed (0134's review), and the page had to watch again.
    expect(page.lost).toEqual([]);
    await b.note(3);
    await b.service.close();
    await expect.poll(() => a.service.status().kind).toBe("ready");
    await a.note(4);
    await flush(8);
    expect(page.notes()).toEqual([1, 2, 3, 4]);
    once(page.ids());
    expect({ ids: page.ids(), notes: page.notes() }).toEqual(await freshIds(a, conversationId));
    expect(page.lost).toEqual([]);
    await a.service.close();
  });

  it("S5: closed for good while it waits for the database after a takeover: the view is told lost once (HarnessClosed), holds nothing, and hears nothing after", async () => {
    const { a, b, conversationId } = await twoTabs();
    const baseline = a.served.listenerCount();
    const page = pageWatch(a.service, conversationId);
    await page.subscribed;
    await takeOver(a, b);
    expect(a.served.listenerCount()).toBe(baseline + 1);
    await a.service.close();
    await flush(8);
    // Before: no lost, and still counted (+1), bound to the closed harness.
    expect(page.lost.map((error) => error.name)).toEqual(["HarnessClosed"]);
    expect(a.served.listenerCount()).toBe(baseline);
    await b.note(3);
    await b.service.close();
    await flush(8);
    expect(page.updates.map((u) => u.type)).toEqual(["snapshot"]);
    expect(page.lost).toHaveLength(1);
    expect(a.service.status()).toEqual({ kind: "closed", reason: "close" });
  });

  it("S5: the open after a takeover fails: the view is told lost once with that open's error and holds nothing (the status says failed)", async () => {
    const { world, a, b, conversationId } = await twoTabs();
    const baseline = a.served.listenerCount();
    const page = pageWatch(a.service, conversationId);
    await page.subscribed;
    await takeOver(a, b);
    world.failOpens(1);
    await b.service.close();
    await expect.poll(() => a.service.status().kind).toBe("failed");
    await flush(8);
    // Before: no lost, still counted, silent.
    expect(page.lost.map((error) => error.message)).toEqual(["a's open 2 failed"]);
    expect(a.served.listenerCount()).toBe(baseline);
    expect(page.updates.map((u) => u.type)).toEqual(["snapshot"]);
  });

  it("S5: a close for good with no takeover ends each view once (HarnessClosed) instead of leaving it bound to the closed harness", async () => {
    const { a, conversationId } = await twoTabs();
    const baseline = a.served.listenerCount();
    const page = pageWatch(a.service, conversationId);
    await page.subscribed;
    await a.service.close();
    await flush(8);
    expect(page.lost.map((error) => error.name)).toEqual(["HarnessClosed"]);
    expect(a.served.listenerCount()).toBe(baseline);
  });
});
