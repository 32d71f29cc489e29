/**
 * Decision 0149's review: M1 (an instance that only follows is never told it was superseded, and its head is the
 * copy's: a harness it handed back is never put back as its holder) and L2 (a takeover's open that drew its epoch
 * before the tab's grant is caught at the tab's next push, which `ObjectEnd` refuses).
 */
import { describe, expect, it } from "vitest";
import type { Clock } from "../src/base/clock.ts";
import type { Harness } from "../src/harness.ts";
import type { ManualClock } from "../src/testing/clock.ts";
import { comebackWorld } from "./comeback-support.ts";
import { ctx, runUntil } from "./support.ts";

/** Lets `open` run until `hold()` says so, then holds it (before the open, or after it, with its epoch drawn). */
function heldOpen(after: boolean) {
  let holding = false;
  let letGo: (() => void) | undefined;
  const wait = () => (holding ? new Promise<void>((resolve) => (letGo = resolve)) : Promise.resolve());
  return {
    hold: () => void (holding = true),
    held: () => letGo !== undefined,
    release: () => letGo!(),
    objectOpen: async (open: () => Promise<Harness>) => {
      if (!after) await wait();
      const harness = await open();
      if (after) await wait();
      return harness;
    },
  };
}

/** An object's harness clock whose lease renewals are let pass (its lease lapses, decision 0052), all else runs. */
function lettingTheLeaseLapse(clock: ManualClock): Clock {
  return {
    now: () => clock.now(),
    setTimer: (delayMs, fire, kind) => (kind === "lease-renewal" ? () => {} : clock.setTimer(delayMs, fire)),
  };
}

/**
 * The object handed over to the tab, took it back and handed it back again (one instance throughout); then the tab's
 * link is cut, its lease lapses, and the object's takeover starts, held by `open` (the object's place; see heldOpen).
 */
async function takeoverHeld(options: {
  keepSuperseded: boolean;
  after: boolean;
  ttlMs?: number;
  objectClock?: (clock: ManualClock) => Clock;
}) {
  let cut = false;
  const open = heldOpen(options.after);
  const world = await comebackWorld({
    ttlMs: options.ttlMs ?? 5_000,
    to: 3,
    keepSuperseded: options.keepSuperseded,
    fate: () => (cut ? "drop" : "deliver"),
    objectOpen: open.objectOpen,
    ...(options.objectClock ? { objectClock: options.objectClock } : {}),
  });
  const { clock } = world;
  const following = await world.handOverAndFollow(3);
  const instance = world.end;
  const { tab } = await world.takeBack(following);
  expect(world.end).toBe(instance);
  expect(instance.harness).toBeUndefined(); // handed back: it follows the tab
  await runUntil(clock, () => tab.mirror!.acknowledged >= tab.harness.lease!.position);
  world.loseFrames();
  open.hold();
  cut = true;
  await runUntil(clock, () => open.held());
  await tab.harness.close(ctx).catch(() => {});
  cut = false;
  return { world, instance, open };
}

describe("0149's review: who is superseded after a hand-back and a takeover", () => {
  for (const keepSuperseded of [false, true]) {
    it(`M1 (S4/S12): the tab takes the lease back during the object's open; the instance that follows stores and acks its pushes, and is not told it was superseded (${keepSuperseded ? "no hook" : "with onSuperseded"})`, async () => {
      const { world, instance, open } = await takeoverHeld({ keepSuperseded, after: false });
      const { clock } = world;
      const back = await world.reopenTab(); // takes the lease back first
      expect(back.harness.readOnly).toBe(false);
      open.release(); // the object's open ends read-only: it follows on
      await runUntil(clock, () => instance.harness === undefined);
      const copyHead = (await world.copy.load()).log?.position;
      expect(instance.head).toBe(copyHead); // not the handed-back harness's position
      const root = await back.harness.root(ctx);
      await root.submit({ type: "write", entry: { kind: "app.note" } }, ctx);
      const stored = back.harness.lease!.position;
      await runUntil(clock, () => back.mirror!.acknowledged >= stored); // before: never (the pushes joined at a stale head)
      expect((await world.copy.load()).log?.position).toBe(stored);
      expect(back.mirror!.refused).toBeUndefined();
      // Its renewals went through this instance too: a following instance holds nothing that could be superseded.
      clock.advance(10_000);
      await runUntil(clock, () => back.mirror!.acknowledged >= stored);
      expect(world.ended).toEqual([]);
      expect(world.end).toBe(instance);
      expect(world.record().holder).not.toBe("object");
      await back.harness.close(ctx);
    }, 60_000);
  }

  it("L2 (S12): the object's open drew its epoch before the tab's grant; the tab's next push, refused, tells the host (before any renewal of the tab's)", async () => {
    // A long lease: the tab's first renewal (a lease call, which would tell the host too) comes after its pushes' resend.
    const ttlMs = 60_000;
    const { world, instance, open } = await takeoverHeld({ keepSuperseded: false, after: true, ttlMs, objectClock: lettingTheLeaseLapse });
    const { clock } = world;
    const objectEpoch = world.record().epoch; // the object's open took the lease, then was held
    expect(world.record().holder).toBe("object");
    clock.advance(ttlMs + 1_000); // its lease lapses while its open is held (its renewals let pass)
    const back = await world.reopenTab();
    expect(back.harness.readOnly).toBe(false);
    const granted = world.record();
    expect(granted.epoch).toBeGreaterThan(objectEpoch);
    expect(world.ended).toEqual([]); // the grant found no harness here yet (its open still running)
    expect(back.mirror!.stats.retriedRefusals).toBeGreaterThan(0); // its open's push: NotReady, and no one told (no epoch here yet)
    open.release(); // the open ends writable, under the epoch the grant moved past
    await runUntil(clock, async () => (await instance.harness)?.lease?.epoch === objectEpoch);
    expect(world.ended).toEqual([]);
    const root = await back.harness.root(ctx);
    await root.submit({ type: "write", entry: { kind: "app.note" } }, ctx);
    const stored = back.harness.lease!.position;
    await runUntil(clock, () => world.ended.length > 0);
    expect(world.ended).toEqual([instance]);
    expect(world.record().expiresAt).toBe(granted.expiresAt); // told at the push, not at the tab's next lease call
    await runUntil(clock, () => back.mirror!.acknowledged >= stored);
    expect((await world.copy.load()).log?.position).toBe(stored);
    expect(world.record().epoch).toBe(granted.epoch);
    await back.harness.close(ctx);
  }, 60_000);
});
