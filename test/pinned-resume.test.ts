import { describe, expect, it } from "vitest";
import { followTabWorld } from "./follow-tab-support.ts";
import { ctx, runUntil } from "./support.ts";

// Issue 27 item 4, decision 0039: under a pinned lease (ttlMs: Infinity) no one else may take the lease, so a tab
// that reloads while offline opens writable at once — the grant remembered in its own database — and tells the
// object once the link is back. Before, every open asked the object for a new epoch and waited for the link.

const frames = (received: string[], method: string) => received.filter((frame) => frame.includes(`"method":"${method}"`)).length;

describe("a pinned lease reopened offline (decision 0039)", () => {
  it("a tab reloaded (or crashed) while offline reopens writable at once under its pinned epoch; back online it tells the object and its writes are mirrored", async () => {
    const w = await followTabWorld({ ttlMs: Infinity });
    const tab = await w.openTab();
    expect(tab.harness.readOnly).toBe(false);
    expect(tab.harness.lease!.epoch).toBe(1);
    // The grant crossed the link (JSON has no Infinity): it is still pinned, not expired at once.
    const root = await tab.harness.root(ctx);
    await root.commit((tx) => tx.setDocument("notes", "online", { n: 1 }), ctx);
    await runUntil(w.clock, async () => ((await w.copy.load()).log?.position ?? 0) >= tab.harness.lease!.position);
    expect(tab.harness.closed).toBe(false);
    expect((await w.tabStorage.load()).pinned).toEqual({ place: "tab", epoch: 1 });

    w.goOffline();
    tab.follow.leave(); // the reload's pagehide, offline: nothing can reach the object, so nothing is handed over
    expect((await w.tabStorage.load()).pinned).toEqual({ place: "tab", epoch: 1 });
    tab.follow.close();
    await w.crash(); // the tab's worker is gone; its database as it was on disk
    const acquiresBefore = frames(w.received, "acquire");
    // Offline: nothing answers. The open resolves without the object (no timer of the link's call has to run out).
    const reloaded = await w.openTab();
    expect(reloaded.harness.readOnly).toBe(false);
    expect(reloaded.harness.lease).toMatchObject({ place: "tab", epoch: 1 });
    const offlineRoot = await reloaded.harness.root(ctx);
    await offlineRoot.commit((tx) => tx.setDocument("notes", "offline", { n: 2 }), ctx);
    const head = reloaded.harness.lease!.position;
    expect(frames(w.received, "acquire")).toBe(acquiresBefore); // the object was never asked for a new epoch

    w.goOnline();
    await runUntil(w.clock, async () => ((await w.copy.load()).log?.position ?? 0) >= head);
    expect(await w.copy.getDocument("notes", "offline")).toEqual({ n: 2 });
    expect(frames(w.received, "renew")).toBeGreaterThanOrEqual(1); // the object was told
    expect(w.book.record).toMatchObject({ epoch: 1, holder: "tab" });
    expect(reloaded.harness.closed).toBe(false);
    reloaded.follow.close();
    await reloaded.harness.close(ctx);
  });

  it("a pinned lease handed over is forgotten: the reload asks the object, which holds it now, and opens read-only", async () => {
    const w = await followTabWorld({ ttlMs: Infinity });
    const tab = await w.openTab();
    const root = await tab.harness.root(ctx);
    await root.commit((tx) => tx.setDocument("notes", "before", { n: 1 }), ctx);
    tab.follow.leave(); // the page's pagehide: the hand-over without draining
    await runUntil(w.clock, () => w.object() !== undefined);
    expect((await w.tabStorage.load()).pinned).toBeUndefined();
    tab.follow.close();
    const reloaded = await w.openTab();
    expect(reloaded.harness.readOnly).toBe(true);
    reloaded.follow.close();
    await reloaded.harness.close(ctx);
    await w.object()!.close(ctx);
  });

  it("the object moved the lease meanwhile (the tab's pinned epoch is superseded): the resumed tab is told at the link's return and stops", async () => {
    const w = await followTabWorld({ ttlMs: Infinity });
    const tab = await w.openTab();
    await (await tab.harness.root(ctx)).commit((tx) => tx.setDocument("notes", "before", { n: 1 }), ctx);
    await runUntil(w.clock, async () => ((await w.copy.load()).log?.position ?? 0) >= tab.harness.lease!.position);
    w.goOffline();
    tab.follow.close();
    await w.crash();
    // The app released the tab's lease on the object's side while the tab was away (an operator moved it).
    await w.book.release("tab", 1, tab.harness.lease!.position);
    const reloaded = await w.openTab();
    expect(reloaded.harness.readOnly).toBe(false); // offline it cannot know yet
    w.goOnline();
    await runUntil(w.clock, () => reloaded.harness.closed);
    expect((await w.tabStorage.load()).pinned).toBeUndefined();
    reloaded.follow.close();
  });
});
