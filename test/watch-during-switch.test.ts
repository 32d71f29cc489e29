import { describe, expect, it } from "vitest";
import type { ConversationViewUpdate } from "../src/agent/view/view.ts";
import { ConversationViewStore } from "../src/agent/view/view-store.ts";
import type { Harness } from "../src/harness.ts";
import { isPending } from "../src/host/pending-subscription.ts";
import { silentTab } from "./leave-early-copy-support.ts";
import { ctx, flush, settled } from "./support.ts";

// Decision 0134 (issue 27, left by 0127; tried in 0133 and withdrawn there): reads answered from the open copy while
// the host switched it, but a `watchConversation` asked during a take-back (`runHere`) or a rebuild still waited for
// the harness opened next — over a silent link for the call's bound or longer — and the page's view (`useChat`) stood
// still. It now starts on the copy open at once and moves with the reopen: the copy's state at once, then the new
// harness's commits, no entry twice, none lost.

/** Appends a note (`payload`) to the root conversation of `harness`. */
async function note(harness: Harness, payload: number) {
  await (await harness.root(ctx)).commit((tx) => void tx.appendEntry({ kind: "app.note", payload }), ctx);
}

/** A tab whose leave the object took (link delivering): its copy, read-only, follows the object; it holds note 1. */
async function followingTab(hooks: Parameters<typeof silentTab>[0] = {}) {
  const t = await silentTab(hooks);
  await note(t.tab, 1);
  await flush(16);
  expect(await t.pagehide()).toBe("taken");
  for (let i = 0; i < 8; i++) await t.step(250);
  await expect.poll(() => t.host.service.status()).toMatchObject({ kind: "ready", runs: "elsewhere" });
  const conversationId = (await t.host.service.listConversations())[0]!.id;
  return { ...t, conversationId };
}

/** A page's watch: every update it heard, applied to a store as the page's view does. */
function pageWatch(service: Awaited<ReturnType<typeof followingTab>>["host"]["service"], conversationId: number) {
  const updates: ConversationViewUpdate[] = [];
  const lost: Error[] = [];
  const store = new ConversationViewStore();
  const subscribed = service.watchConversation(
    conversationId,
    (update) => {
      updates.push(update);
      store.apply(update);
    },
    (error) => void lost.push(error),
  );
  return {
    updates,
    lost,
    store,
    subscribed,
    answered: settled(Promise.resolve(subscribed), "ok"),
    notes: () => store.state?.entries.filter((entry) => entry.kind === "app.note").map((entry) => entry.payload),
  };
}

/** The view a watch made now starts with (the state a page sees on a fresh load). */
async function freshView(service: Awaited<ReturnType<typeof followingTab>>["host"]["service"], conversationId: number) {
  const fresh = pageWatch(service, conversationId);
  await flush(8);
  const unsubscribe = await fresh.subscribed;
  unsubscribe();
  return fresh.store.state;
}

/** No entry twice, in id order. */
function once(entries: readonly { id: number }[] | undefined) {
  const ids = (entries ?? []).map((entry) => entry.id);
  expect(ids).toEqual([...new Set(ids)].sort((a, b) => a - b));
}

describe("a conversation watch during the host's switch starts on the open copy and moves with it (decision 0134)", () => {
  it("S5, S9: runHere() over a link gone silent: a watch asked meanwhile is answered at once with the copy's view; once the link delivers, it moves to the writable harness and hears its commits, nothing lost or twice", async () => {
    let current: Harness | undefined;
    const t = await followingTab({ onReady: (_n, harness) => void (current = harness) });
    const s = t.host.service;
    t.silence(); // the handBack call is lost
    const runHere = settled(s.runHere(), "ok");
    await flush(8);
    const page = pageWatch(s, t.conversationId);
    await flush(16);
    // Before: a pending subscription, answered only once the harness opened next (no view while the link is silent).
    expect(page.answered.outcome).toBe("ok");
    expect(page.updates.map((u) => u.type)).toEqual(["snapshot"]);
    expect(page.notes()).toEqual([1]);
    expect(runHere.outcome).toBeUndefined();
    // The link delivers again: the hand-back is asked again, the lease comes back, the writable harness opens.
    t.restore();
    for (let i = 0; i < 40 && runHere.outcome === undefined; i++) await t.step(500);
    expect(runHere.outcome).toBe("ok");
    expect(s.status()).toMatchObject({ kind: "ready", runs: "here" });
    expect(current!.readOnly).toBe(false);
    await note(current!, 2);
    await flush(16);
    // The move is one snapshot from the new harness (it holds what the copy showed), then its commits as they come.
    expect(page.updates.filter((u) => u.type !== "live").map((u) => u.type)).toEqual(["snapshot", "snapshot", "commit"]);
    expect(page.notes()).toEqual([1, 2]);
    once(page.store.state?.entries);
    expect(page.store.state).toEqual(await freshView(s, t.conversationId));
    ((await page.subscribed) as () => void)();
    await t.close();
  });

  it("S5, S9: a rebuild over a link gone silent: a watch asked meanwhile is answered at once with the copy's view; once the link delivers, it moves to the rebuilt copy and hears the object's commits, nothing lost or twice", async () => {
    let rebuild: (() => void) | undefined;
    const t = await followingTab({ rebuildAsked: (listener) => void (rebuild = listener) });
    const s = t.host.service;
    t.silence(); // the snapshot's call is lost
    rebuild!();
    await flush(8);
    const page = pageWatch(s, t.conversationId);
    await flush(16);
    // Before: pending until the rebuilt copy opened.
    expect(page.answered.outcome).toBe("ok");
    expect(page.updates.map((u) => u.type)).toEqual(["snapshot"]);
    expect(page.notes()).toEqual([1]);
    const statuses: string[] = [];
    s.onStatus((status) => void statuses.push(status.kind));
    t.restore();
    const reopened = () => statuses.includes("recovering") && statuses.at(-1) === "ready";
    for (let i = 0; i < 40 && !reopened(); i++) await t.step(500);
    expect(statuses.filter((kind) => kind !== "ready")).toEqual(["opening", "recovering"]); // rebuilt, opened again once
    expect(s.status()).toMatchObject({ kind: "ready", runs: "elsewhere" });
    const object = (await t.end.harness)!;
    await note(object, 3);
    for (let i = 0; i < 8 && page.notes()?.length !== 2; i++) await t.step(250);
    expect(page.updates.filter((u) => u.type !== "live").map((u) => u.type)).toEqual(["snapshot", "snapshot", "commit"]);
    expect(page.notes()).toEqual([1, 3]);
    once(page.store.state?.entries);
    expect(page.store.state).toEqual(await freshView(s, t.conversationId));
    ((await page.subscribed) as () => void)();
    await t.close();
  });

  it("S5: a watch given up during the switch holds nothing after it: one answered (unsubscribed) and one waiting for a conversation the copy has not received (cancelled) hear nothing more and leave no listener", async () => {
    const t = await followingTab();
    const s = t.host.service;
    const baseline = t.host.listenerCount();
    t.silence();
    const runHere = settled(s.runHere(), "ok");
    await flush(8);
    const answered = pageWatch(s, t.conversationId);
    const waiting = pageWatch(s, 1_000_000); // an id the copy's log has not reached: waited for (decision 0103)
    await flush(16);
    expect(answered.answered.outcome).toBe("ok");
    expect(isPending(waiting.subscribed)).toBe(true);
    expect(waiting.answered.outcome).toBeUndefined();
    expect(t.host.listenerCount()).toBe(baseline + 2);
    ((await answered.subscribed) as () => void)();
    (waiting.subscribed as { cancel(): void }).cancel();
    await flush(8);
    expect(t.host.listenerCount()).toBe(baseline);
    expect(waiting.answered.outcome).toBe("NotFound");
    t.restore();
    for (let i = 0; i < 40 && runHere.outcome === undefined; i++) await t.step(500);
    expect(runHere.outcome).toBe("ok");
    await flush(16);
    expect(answered.updates.map((u) => u.type)).toEqual(["snapshot"]); // not moved: given up
    expect(waiting.updates).toEqual([]);
    expect(t.host.listenerCount()).toBe(baseline);
    await t.close();
  });

  it("S5, S9: a take-back whose writable open's lease ask goes unanswered (the link silent at its opening): a watch asked then is answered on the kept copy, moves to the read-only fallback with no lost, its view the fallback's (review of 0134, L2)", async () => {
    const t = await followingTab();
    const s = t.host.service;
    const statuses: string[] = [];
    let page: ReturnType<typeof pageWatch> | undefined;
    s.onStatus((status) => {
      statuses.push(status.kind);
      if (status.kind !== "opening" || page) return;
      t.silence(); // the writable open's lease ask is lost
      page = pageWatch(s, t.conversationId);
    });
    const runHere = settled(s.runHere(), "ok");
    await flush(16);
    expect(page!.answered.outcome).toBe("ok"); // on the kept copy, before the open failed
    expect(page!.updates.map((u) => u.type)).toEqual(["snapshot"]);
    for (let i = 0; i < 80 && runHere.outcome === undefined; i++) await t.step(500);
    expect(runHere.outcome).toBe("ConnectionLost");
    expect(statuses.slice(1)).toEqual(["opening", "recovering", "opening", "recovering", "ready"]); // writable, then read-only
    expect(s.status()).toMatchObject({ kind: "ready", runs: "elsewhere" });
    expect(page!.updates.filter((u) => u.type !== "live").map((u) => u.type)).toEqual(["snapshot", "snapshot"]);
    expect(page!.lost).toEqual([]);
    expect(page!.notes()).toEqual([1]);
    once(page!.store.state?.entries);
    expect(page!.store.state).toEqual(await freshView(s, t.conversationId)); // on the fallback, as a fresh watch there
    ((await page!.subscribed) as () => void)();
    await t.close();
  }, 60_000);

  it("S5: a watch given up while a rebuild whose run does not close the copy itself runs (no copy open: it waits for the reopen) is refused NotFound, holds nothing, and hears nothing after the reopen (review of 0134, L4)", async () => {
    let rebuild: (() => void) | undefined;
    const t = await followingTab({ rebuildAsked: (listener) => void (rebuild = listener), rebuildKeepsCopy: true });
    const s = t.host.service;
    const statuses: string[] = [];
    s.onStatus((status) => void statuses.push(status.kind));
    const baseline = t.host.listenerCount();
    t.silence(); // the snapshot's call is lost: the rebuild runs, the copy closed before it (decision 0132)
    rebuild!();
    await flush(8);
    const page = pageWatch(s, t.conversationId);
    await flush(16);
    expect(isPending(page.subscribed)).toBe(true); // no copy open: it waits for the reopen (decision 0107)
    expect(t.host.listenerCount()).toBe(baseline + 1);
    (page.subscribed as { cancel(): void }).cancel();
    await flush(8);
    expect(t.host.listenerCount()).toBe(baseline);
    t.restore();
    const reopened = () => statuses.includes("recovering") && statuses.at(-1) === "ready";
    for (let i = 0; i < 40 && !reopened(); i++) await t.step(500);
    expect(reopened()).toBe(true);
    await flush(16);
    expect(page.answered.outcome).toBe("NotFound");
    expect(page.updates).toEqual([]);
    expect(t.host.listenerCount()).toBe(baseline);
    await t.close();
  }, 60_000);
});

describe("a close or a takeover that ends the switch ends the watches it would have moved (review of 0134, L1)", () => {
  it("S5, S9: close during a runHere over a silent link: a watch answered on the copy meanwhile and one made before are told lost (HarnessClosed) and hold no listener", async () => {
    const t = await followingTab();
    const s = t.host.service;
    const baseline = t.host.listenerCount();
    const before = pageWatch(s, t.conversationId);
    await flush(8);
    t.silence();
    const runHere = settled(s.runHere(), "ok");
    await flush(8);
    const during = pageWatch(s, t.conversationId);
    await flush(16);
    expect(during.answered.outcome).toBe("ok");
    expect(t.host.listenerCount()).toBe(baseline + 2);
    await t.close();
    await flush(16);
    expect(runHere.outcome).toBe("HarnessClosed");
    // Before: no lost, and both still counted (+2), bound to the copy the close closed.
    expect(during.lost.map((error) => error.name)).toEqual(["HarnessClosed"]);
    expect(before.lost.map((error) => error.name)).toEqual(["HarnessClosed"]);
    expect(during.updates.map((u) => u.type)).toEqual(["snapshot"]);
    expect(t.host.listenerCount() - baseline).toBe(0);
  });

  it("S5, S9: close during a rebuild whose snapshot never comes: the watch answered on the kept copy is told lost (HarnessClosed) and holds no listener", async () => {
    let rebuild: (() => void) | undefined;
    const t = await followingTab({ rebuildAsked: (listener) => void (rebuild = listener) });
    const s = t.host.service;
    const baseline = t.host.listenerCount();
    t.silence();
    rebuild!();
    await flush(8);
    const page = pageWatch(s, t.conversationId);
    await flush(16);
    expect(page.answered.outcome).toBe("ok");
    const closing = settled(s.close(), "ok");
    for (let i = 0; i < 80 && closing.outcome === undefined; i++) await t.step(500);
    await flush(16);
    expect(closing.outcome).toBe("ok");
    expect(page.lost.map((error) => error.name)).toEqual(["HarnessClosed"]); // before: none
    expect(t.host.listenerCount() - baseline).toBe(0);
  }, 60_000);

  it("S5, S9: a takeover during a runHere over a silent link: the watch answered on the copy is not left on the closed copy — it waits for the next open, and is told lost (HarnessClosed) once when that open fails", async () => {
    let takeover: (() => void) | undefined;
    const ownership = {
      acquire: async () => () => {},
      cancel: () => {},
      requestTakeover: () => {},
      onTakeoverRequest: (handler: () => void) => void (takeover = handler),
      lifeLock: async () => undefined,
    };
    const t = await followingTab({ ownership });
    const s = t.host.service;
    t.silence();
    const runHere = settled(s.runHere(), "ok");
    await flush(8);
    const page = pageWatch(s, t.conversationId);
    await flush(16);
    expect(page.answered.outcome).toBe("ok");
    takeover!();
    for (let i = 0; i < 16; i++) await t.step(250);
    expect(runHere.outcome).toBe("HarnessClosed");
    expect(page.updates.map((u) => u.type)).toEqual(["snapshot"]);
    // Since decision 0140 a takeover ends no view: it waits for the host's next open. Here that open fails (this world's
    // one storage was closed by the takeover: the database is closed), so no harness will come and the view ends with
    // that open's error, once. (test/watch-across-takeover.test.ts: the open that succeeds, the view goes on.)
    expect(s.status()).toMatchObject({ kind: "failed", error: { name: "HarnessClosed" } });
    expect(page.lost.map((error) => error.name)).toEqual(["HarnessClosed"]); // before 0134's review: none
  }, 60_000);
});
