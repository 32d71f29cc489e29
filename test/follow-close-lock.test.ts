import { describe, expect, it } from "vitest";
import type { Ownership } from "../src/host/ownership.ts";
import { silentTab } from "./leave-early-copy-support.ts";
import { ctx, settled } from "./support.ts";

// Review of decision 0133, M1: the worker's close waited for the object's acknowledgement of the tab's last commits
// after its host had closed the storage and let the database's Web Lock go. For up to 15 s the next worker for the
// database (another tab of the origin, the page's next client) opened it and its own follow link while the old link
// still pushed; with a pinned lease it resumed offline at the same epoch. Since: the host's close awaits the follow's
// `drain()` once the harness closed, before the storage closes and the lock goes.

/** The database's lock as Web Locks hold it: one owner at a time; the next `acquire` waits until the owner lets go. */
function oneLock() {
  let held = false;
  const queue: Array<() => void> = [];
  const give = () => {
    held = true;
    let gone = false;
    return () => {
      if (gone) return;
      gone = true;
      held = false;
      queue.shift()?.();
    };
  };
  const acquire = () => (held ? new Promise<() => void>((resolve) => queue.push(() => resolve(give()))) : Promise.resolve(give()));
  const ownership: Ownership = {
    acquire: () => acquire(),
    cancel: () => {},
    requestTakeover: () => {},
    onTakeoverRequest: () => {},
    lifeLock: async () => undefined,
  };
  return { ownership, acquire };
}

describe("the worker's close lets the database's lock go only after the follow link delivered (review of 0133, M1)", () => {
  it("S4/S11: the next owner of the database waits for the close's delivery; the object's epoch begins after the tab's last position", async () => {
    const lock = oneLock();
    const t = await silentTab({ ownership: lock.ownership, drainsAtClose: true });
    t.silence(); // the tab's last frames are lost, the link up
    await (await t.tab.root(ctx)).commit((tx) => void tx.appendEntry({ kind: "app.note", payload: 1 }), ctx);
    const closing = settled(t.host.service.close(), "closed");
    const next = settled(lock.acquire(), "owner");
    for (let i = 0; i < 3; i++) await t.step(1_000);
    expect(t.tab.closed).toBe(true); // the harness closed; the storage and the lock wait
    expect(next.outcome).toBeUndefined(); // before: the lock was let go before the wait
    expect(closing.outcome).toBeUndefined();
    t.restore(); // the link's resend delivers the rest
    for (let i = 0; i < 12 && next.outcome === undefined; i++) await t.step(1_000);
    expect([next.outcome, closing.outcome]).toEqual(["owner", "closed"]); // within the bound: the object acknowledged
    const last = t.tab.lease!.position; // the harness's closing commit included
    const shut = settled(t.follow.close(), "shut");
    await Promise.resolve();
    expect(shut.outcome).toBe("shut"); // delivered already: the link ends at once
    for (let i = 0; i < 90; i++) await t.step(1_000);
    const epochs = (await (await t.end.harness)!.storage.readEpochs?.()) ?? [];
    expect(epochs.at(-1)!.start).toBe(last + 1);
  }, 60_000);

  it("S4: an object that never answers holds the lock no longer than the close's bound (15 s)", async () => {
    const lock = oneLock();
    const t = await silentTab({ ownership: lock.ownership, drainsAtClose: true });
    t.silence();
    await (await t.tab.root(ctx)).commit((tx) => void tx.appendEntry({ kind: "app.note", payload: 1 }), ctx);
    const closing = settled(t.host.service.close(), "closed");
    const next = settled(lock.acquire(), "owner");
    for (let i = 0; i < 13; i++) await t.step(1_000);
    expect(next.outcome).toBeUndefined();
    for (let i = 0; i < 4; i++) await t.step(1_000); // past the bound, counted from the harness's close
    expect(closing.outcome).toBe("closed");
    expect(next.outcome).toBe("owner");
    await t.follow.close();
  }, 60_000);
});
