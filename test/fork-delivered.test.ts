import { describe, expect, it } from "vitest";
import { followObject } from "../src/browser/follow.ts";
import { dismissFork, listForks } from "../src/follow/fork.ts";
import { createHost } from "../src/host/host.ts";
import { createRegistry, type Harness } from "../src/index.ts";
import type { KernelTx } from "../src/session/tx.ts";
import { followTabWorld } from "./follow-tab-support.ts";
import { ctx, runUntil } from "./support.ts";

// Issue 27 item 4, decision 0039: "a tab that finds it was fenced while offline reports its unpushed work as a
// visible fork instead of losing or doubling it" — found by the tab's follow link, kept in the tab's database (a
// reload still shows it) until the app dismisses it. Before, `findFork` existed but nothing called it.

/** The tab writes, while offline, a transaction with a user's input (an entry and its submission). */
async function writeOffline(harness: Harness, text: string, requestId: string): Promise<void> {
  const root = await harness.root(ctx);
  await root.commit((tx) => {
    tx.appendEntry({ kind: "pi.user", payload: { text } });
    // The kernel's own handle: the public Tx writes no submission (the agent's submit does, with a model behind it).
    const kernel = tx as unknown as KernelTx;
    kernel.putSubmission({
      id: kernel.mintId(),
      conversationId: root.id,
      type: "input",
      requestId,
      status: "queued",
      payload: { type: "input", content: text },
      createdAt: tx.now(),
    });
  }, ctx);
}

describe("the visible fork delivered (issue 27 item 4, decision 0039)", () => {
  it("a tab fenced while offline: back online its push is refused as stale, the fork is kept with its input; a reload shows it once, dismissed it is gone", async () => {
    const w = await followTabWorld();
    const tab = await w.openTab();
    expect(tab.harness.readOnly).toBe(false);
    const root = await tab.harness.root(ctx);
    await root.commit((tx) => tx.setDocument("notes", "before", { pushed: true }), ctx);
    const pushed = tab.harness.lease!.position;
    await runUntil(w.clock, async () => ((await w.copy.load()).log?.position ?? 0) >= pushed);
    w.goOffline();
    await writeOffline(tab.harness, "written offline", "offline-1");
    // The lease runs out on both clocks: the tab stops as a crash stops, the object takes over under epoch 2.
    await runUntil(w.clock, () => w.object() !== undefined && tab.harness.closed);
    expect(w.book.record).toMatchObject({ epoch: 2, holder: "object" });
    w.goOnline();
    await runUntil(w.clock, () => tab.heard() > 0);
    const [fork, ...others] = await listForks(w.tabStorage);
    expect(others).toEqual([]);
    expect(fork).toMatchObject({ kind: "fork", from: pushed + 1, mine: { epoch: 1 }, theirs: { epoch: 2 } });
    expect(fork!.transactions.flatMap((t) => t.entries).map((entry) => entry.payload)).toEqual([{ text: "written offline" }]);
    expect(fork!.transactions.flatMap((t) => t.submissions)).toEqual([
      expect.objectContaining({ requestId: "offline-1", conversationId: root.id, status: "queued" }),
    ]);
    // Neither lost nor doubled: the object's history has no trace of it.
    expect(JSON.stringify(await w.copy.listEntries(root.id))).not.toContain("written offline");
    tab.follow.close();

    // A reload: the object holds the lease, the tab opens read-only; the fork is still there, once.
    const reloaded = await w.openTab();
    expect(reloaded.harness.readOnly).toBe(true);
    await runUntil(w.clock, async () => true);
    expect((await listForks(w.tabStorage)).map((kept) => kept.id)).toEqual([fork!.id]);
    await dismissFork(w.tabStorage, fork!.id);
    expect(await listForks(w.tabStorage)).toEqual([]);
    reloaded.follow.close();
    await reloaded.harness.close(ctx);
    await w.object()!.close(ctx);
  });

  it("a tab that crashed while offline and reloads online (its lease refused: the object took over) finds its fork from the object's history", async () => {
    const w = await followTabWorld();
    const tab = await w.openTab();
    const root = await tab.harness.root(ctx);
    await root.commit((tx) => tx.setDocument("notes", "before", { pushed: true }), ctx);
    const pushed = tab.harness.lease!.position;
    await runUntil(w.clock, async () => ((await w.copy.load()).log?.position ?? 0) >= pushed);
    w.goOffline();
    await writeOffline(tab.harness, "typed on the train", "train-1");
    tab.follow.close(); // the tab crashed: its link is gone, its harness abandoned as it was
    await w.crash();
    await runUntil(w.clock, () => w.object() !== undefined);
    w.goOnline();
    const reloaded = await w.openTab();
    expect(reloaded.harness.readOnly).toBe(true);
    await runUntil(w.clock, () => reloaded.heard() > 0);
    const forks = await listForks(w.tabStorage);
    expect(forks).toHaveLength(1);
    expect(forks[0]!.transactions.flatMap((t) => t.submissions).map((s) => s.requestId)).toEqual(["train-1"]);
    reloaded.follow.close();
    await reloaded.harness.close(ctx);
    await w.object()!.close(ctx);
  });

  it("the host's ready status counts the kept forks, forks() gives them whole, dismissFork(id) drops one; a fork kept later is counted at once", async () => {
    const w = await followTabWorld();
    const tab = await w.openTab();
    const root = await tab.harness.root(ctx);
    await root.commit((tx) => tx.setDocument("notes", "before", { pushed: true }), ctx);
    const pushed = tab.harness.lease!.position;
    await runUntil(w.clock, async () => ((await w.copy.load()).log?.position ?? 0) >= pushed);
    w.goOffline();
    await writeOffline(tab.harness, "kept for the app", "app-1");
    await runUntil(w.clock, () => w.object() !== undefined && tab.harness.closed);
    tab.follow.close();
    // The page loads again, online: the worker's host, under the object's lease, on the same database.
    w.goOnline();
    const follow = followObject({ url: "ws://object/follow", connect: w.connect }, w.clock);
    const host = createHost({
      database: "tab",
      openStorage: async () => w.tabStorage,
      harness: { registry: createRegistry(), clock: w.clock, lease: follow.lease },
      onReady: (harness) => follow.attach(harness),
      onFork: (listener) => void follow.onFork(listener),
      now: w.clock.now,
    });
    await host.ready;
    expect(host.service.status()).toMatchObject({ kind: "ready", runs: "elsewhere" });
    await runUntil(w.clock, () => (host.service.status() as { forks?: number }).forks === 1);
    const [fork] = await host.service.forks();
    expect(fork!.transactions.flatMap((t) => t.submissions).map((s) => s.requestId)).toEqual(["app-1"]);
    await host.service.dismissFork(fork!.id);
    expect(host.service.status()).not.toHaveProperty("forks");
    expect(await host.service.forks()).toEqual([]);
    follow.close();
    await host.service.close();
    await w.object()!.close(ctx);
  });
});
