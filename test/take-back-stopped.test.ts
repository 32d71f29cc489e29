import { describe, expect, it } from "vitest";
import { silentTab } from "./leave-early-copy-support.ts";
import { flush, settled } from "./support.ts";

// Decision 0130 (the review of 0127, L4): `Follower.stop()` left a pending `whenHolds` unsettled. runHere's take-back
// waits, after the object's hand-back answer at P, for the copy to hold P; over a link that delivers no more pushes,
// a close or a takeover left runHere — and every write, queued behind it — waiting for good.

/** A tab whose leave the object took: its copy follows the object, read-only. */
async function followingTab(hooks: Parameters<typeof silentTab>[0] = {}) {
  const t = await silentTab(hooks);
  expect(await t.pagehide()).toBe("taken");
  for (let i = 0; i < 8; i++) await t.step(250);
  await expect.poll(() => t.host.service.status()).toMatchObject({ kind: "ready", runs: "elsewhere" });
  return t;
}

/** Whether the object answered a `lease.handBack` call (its answer names the position it released at). */
const handBackAnswered = (frames: readonly unknown[]) =>
  frames.some((frame) => typeof frame === "string" && frame.includes('"type":"answer"') && frame.includes('"position"'));

/** A following tab whose object wrote on while its pushes were lost: a hand-back releases past the copy's head. */
async function behindTab(hooks: Parameters<typeof silentTab>[0] = {}) {
  const t = await followingTab(hooks);
  t.dropPushes();
  await t.step(1_500); // the object's counter ticks; the copy never hears of it
  await t.step(1_500);
  return t;
}

describe("a take-back whose pushes never come ends when the follower or the host stops (decision 0130)", () => {
  it("S4: runHere answered at P, its pushes lost: it waits while the host stays open (0127), and close() settles it and the write behind it HarnessClosed (before: both pending for good)", async () => {
    const t = await behindTab();
    const s = t.host.service;
    const runHere = settled(s.runHere(), "ok");
    await expect.poll(() => handBackAnswered(t.frames)).toBe(true);
    const write = settled(s.createConversation(), "ok");
    for (let i = 0; i < 40; i++) await t.step(1_000); // past every call's bound: the lease is reserved for this tab
    expect(runHere.outcome).toBeUndefined();
    expect(write.outcome).toBeUndefined();
    await s.close(); // the worker's follow link stays open: nothing but the host's close stops the wait
    await flush(16);
    expect(runHere.outcome).toBe("HarnessClosed");
    expect(write.outcome).toBe("HarnessClosed");
    expect(s.status().kind).toBe("closed");
    t.follow.close();
  });

  it("S4: runHere answered at P, its pushes lost, then another tab takes the database over: runHere settles HarnessClosed and so does the write while the host waits (before: both pending for good)", async () => {
    let takeover: (() => void) | undefined;
    let acquires = 0;
    const ownership = {
      acquire: async (waiting: () => void) => {
        if (++acquires === 1) return () => {};
        waiting();
        return new Promise<undefined>(() => {}); // the other tab holds it now
      },
      cancel: () => {},
      requestTakeover: () => {},
      onTakeoverRequest: (handler: () => void) => void (takeover = handler),
      lifeLock: async () => undefined,
    };
    const t = await behindTab({ ownership });
    const s = t.host.service;
    const runHere = settled(s.runHere(), "ok");
    await expect.poll(() => handBackAnswered(t.frames)).toBe(true);
    const write = settled(s.createConversation(), "ok");
    await t.step(1_000);
    takeover!();
    await flush(16);
    expect(s.status().kind).toBe("waiting-for-lock");
    expect(runHere.outcome).toBe("HarnessClosed");
    await expect.poll(() => write.outcome).toBe("HarnessClosed");
    expect(s.status().kind).toBe("waiting-for-lock"); // behind the tab that took the database
    t.follow.close();
  });

  it("S4: a take-back whose pushes never come waits while its follower goes on (0127); the follower stopped (the link closed, a new harness attached), it settles HarnessClosed (before: pending for good)", async () => {
    const t = await behindTab();
    const taking = settled(t.follow.takeBack(), "ok");
    await expect.poll(() => handBackAnswered(t.frames)).toBe(true);
    for (let i = 0; i < 20; i++) await t.step(1_000);
    expect(taking.outcome).toBeUndefined(); // the follower goes on: the copy may still reach P (decision 0127)
    t.follow.close(); // stops the follower
    await flush(8);
    expect(taking.outcome).toBe("HarnessClosed");
    await t.host.service.close();
  });
});
