import { describe, expect, it } from "vitest";
import { silentTab } from "./leave-early-copy-support.ts";
import { ctx, flush, settled } from "./support.ts";

// Decision 0133's close, the review's Lows left open (its "Not done": L2, L3), on the real host wiring (createHost +
// followObject as worker.ts makes them, `beforeStorageClose` the follow's drain).

/** A tab holding the lease whose last commit is unacknowledged (its frames lost), its host's close waiting for it. */
async function closingUnacknowledged() {
  const t = await silentTab({ drainsAtClose: true });
  t.silence();
  await (await t.tab.root(ctx)).commit((tx) => void tx.appendEntry({ kind: "app.note", payload: 1 }), ctx);
  const closing = settled(t.host.service.close(), "closed");
  for (let i = 0; i < 3; i++) await t.step(1_000);
  expect(t.tab.closed).toBe(true); // the harness closed; the close waits for the object's acknowledgement
  expect(closing.outcome).toBeUndefined();
  return { t, closing };
}

/** Lets the close's bound (15 s from the harness's close) pass; the host's close, then the link's, are done. */
async function pastTheBound(t: Awaited<ReturnType<typeof silentTab>>, closing: { outcome?: string }) {
  for (let i = 0; i < 14 && closing.outcome === undefined; i++) await t.step(1_000);
  expect(closing.outcome).toBe("closed");
  await t.follow.close();
  await flush(8);
}

describe("the follow link's close, the review's Lows (decision 0133: L2, L3; decision 0136)", () => {
  it("L2, S4: a page's leave during the close's wait leaves nothing of the mirror behind: after the close, as many timers as a close without it", async () => {
    const control = await closingUnacknowledged();
    await pastTheBound(control.t, control.closing);
    const withLeave = await closingUnacknowledged();
    const left = settled(withLeave.t.host.service.leave(), "left");
    await flush(8);
    expect(left.outcome).toBe("left"); // the harness closed: nothing to hand over, answered at once
    await pastTheBound(withLeave.t, withLeave.closing);
    // Before: the leave dropped the link's hold on the mirror, so the close stopped nothing: its resend timer stayed.
    expect(withLeave.t.clock.pending).toBe(control.t.clock.pending);
  }, 60_000);

  it("L3, S4: nothing unacknowledged while the tab holds the lease: the host's close needs no clock move, and the link ends in the same tick", async () => {
    const t = await silentTab({ drainsAtClose: true });
    expect(t.tab.lease?.position).toBeGreaterThan(0); // the tab holds the lease; everything it stored is acknowledged
    const closing = settled(t.host.service.close(), "closed");
    await flush(16); // no clock move
    expect(closing.outcome).toBe("closed");
    expect(t.worker.isClosed()).toBe(false);
    void t.follow.close();
    expect(t.worker.isClosed()).toBe(true); // shut in this tick: nothing to deliver
  }, 30_000);

  it("L3, S4/S11: the link drops and reconnects during the close's wait: the new connection delivers, the close ends before its bound, and no socket opens after it", async () => {
    const { t, closing } = await closingUnacknowledged();
    const last = t.tab.lease!.position; // the harness's closing commit included
    t.restore(); // the object hears the worker again…
    t.drop(); // …on a new connection: this one drops, what it held is lost
    for (let i = 0; i < 10 && closing.outcome === undefined; i++) await t.step(1_000);
    expect(closing.outcome).toBe("closed"); // before the 15 s bound: the resend on the new connection was acknowledged
    expect(t.connects()).toBe(2);
    await t.follow.close();
    expect(t.worker.isClosed()).toBe(true);
    for (let i = 0; i < 90; i++) await t.step(1_000); // past the lease's expiry: the object takes over
    await flush(16);
    expect(t.connects()).toBe(2); // the closed link never connects again
    const epochs = (await (await t.end.harness)!.storage.readEpochs?.()) ?? [];
    expect(epochs.at(-1)!.start).toBe(last + 1); // the object begins after everything the tab stored
  }, 60_000);
});
