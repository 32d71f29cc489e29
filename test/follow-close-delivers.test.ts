import { describe, expect, it } from "vitest";
import { silentTab } from "./leave-early-copy-support.ts";
import { ctx, flush, settled } from "./support.ts";

// Review of decision 0133, H1: the worker's close (its host, then `TabFollow.close()`) stopped the mirror with its pushes
// in flight. A tab holding the lease that committed and then closed lost its last commits to a fork: the object took
// the lease over at its expiry from the last position it had acknowledged. A leave under way was cut the same way.
// Since: the close lets what the tab stored reach the object first, within a link call's bound (15 s) and the lease's
// expiry. And (L1) a leave of a pinned lease under way when the link closes rejects HarnessClosed, as a 60 s one does.

/** The object's epochs once its 60 s lease is past (it took over from the tab). */
async function objectTakesOver(t: Awaited<ReturnType<typeof silentTab>>) {
  for (let i = 0; i < 90; i++) await t.step(1_000);
  await flush(16);
  const object = await t.end.harness;
  return (await object!.storage.readEpochs?.()) ?? [];
}

describe("the follow link's close delivers what the tab stored first (review of 0133, H1)", () => {
  it("S4/S11: commits right before the worker's close reach the object: its next epoch begins after the tab's last position", async () => {
    const t = await silentTab();
    const root = await t.tab.root(ctx);
    for (let i = 0; i < 3; i++) await root.commit((tx) => void tx.appendEntry({ kind: "app.note", payload: i }), ctx);
    await t.host.service.close();
    const last = t.tab.lease!.position; // the harness's closing commit included
    const closing = settled(t.follow.close(), "closed");
    for (let i = 0; i < 20 && closing.outcome === undefined; i++) await t.step(100);
    expect(closing.outcome).toBe("closed"); // before the bound: the object acknowledged
    const epochs = await objectTakesOver(t);
    expect(epochs.at(-1)!.start).toBe(last + 1); // before: 12 (positions 12–14 were the tab's fork)
  }, 60_000);

  it("S4/S11: a leave under way whose frames were lost, then the close: the leave is answered and the object begins after the tab's mark", async () => {
    const t = await silentTab();
    t.silence(); // frames lost from here on, the link up
    await (await t.tab.root(ctx)).commit((tx) => void tx.appendEntry({ kind: "app.note", payload: 1 }), ctx);
    const mark = t.tab.lease!.position;
    const left = settled(t.host.service.leave(), "ok");
    for (let i = 0; i < 4; i++) await t.step(250);
    await t.host.service.close();
    const closing = settled(t.follow.close(), "closed");
    await t.step(1_000);
    expect(closing.outcome).toBeUndefined(); // waiting for the leave's answer, within its bound
    t.restore(); // the link delivers again: its resend sends the rest and the release
    for (let i = 0; i < 14 && closing.outcome === undefined; i++) await t.step(1_000);
    expect(closing.outcome).toBe("closed");
    expect(left.outcome).toBe("ok"); // before: HarnessClosed
    const epochs = await objectTakesOver(t);
    expect(epochs.at(-1)!.start).toBe(mark + 1); // before: the mark itself (the note a fork)
  }, 60_000);

  it("S4: an object that never answers does not hold the close past its bound", async () => {
    const t = await silentTab();
    t.silence();
    await (await t.tab.root(ctx)).commit((tx) => void tx.appendEntry({ kind: "app.note", payload: 1 }), ctx);
    await t.host.service.close();
    const closing = settled(t.follow.close(), "closed");
    for (let i = 0; i < 14; i++) await t.step(1_000);
    expect(closing.outcome).toBeUndefined();
    await t.step(1_000); // the link call's bound, 15 s
    expect(closing.outcome).toBe("closed");
  }, 60_000);
});

describe("a leave under way when the follow link closes (review of 0133, L1)", () => {
  for (const [name, ttlMs] of [
    ["pinned", Number.POSITIVE_INFINITY],
    ["60 s", 60_000],
  ] as const)
    it(`S4: a ${name} lease's leave, its release lost, rejects HarnessClosed once the close's bound passed`, async () => {
      const t = await silentTab({ ttlMs });
      t.silence(); // the release never arrives
      const left = settled(t.host.service.leave(), "ok");
      for (let i = 0; i < 4; i++) await t.step(250);
      expect(left.outcome).toBeUndefined();
      const closing = settled(t.follow.close(), "closed");
      for (let i = 0; i < 16; i++) await t.step(1_000);
      expect(closing.outcome).toBe("closed");
      expect(left.outcome).toBe("HarnessClosed"); // pinned, before: pending for good
    }, 30_000);
});
