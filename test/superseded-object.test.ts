/**
 * Decision 0149 (0145's review, L1 and L3), in the shared core with no Cloudflare: an object whose idle lease lapsed
 * (its renewal let pass, decision 0052) and which a tab then took. Before, nothing in the core ended that object's
 * harness (only Cloudflare's alarm did): an object built on `ObjectEnd` elsewhere, never evicted, answered the new
 * holder's every push `NotReady` for good. Now `ObjectEnd` tells its host (`onSuperseded`) once the grant is made; the
 * host ends the instance, and the next one follows the tab and stores its pushes, each once.
 */
import fc from "fast-check";
import { describe, expect, it } from "vitest";
import type { Clock } from "../src/base/clock.ts";
import type { Harness } from "../src/harness.ts";
import type { ManualClock } from "../src/testing/clock.ts";
import { comebackWorld, type Fate } from "./comeback-support.ts";
import { rows } from "./follow-support.ts";
import { ctx, runUntil } from "./support.ts";

/** An idle object's harness clock: its lease renewals are let pass (the lease lapses, decision 0052), all else runs. */
function lettingTheLeaseLapse(clock: ManualClock): Clock {
  return {
    now: () => clock.now(),
    setTimer: (delayMs, fire, kind) => (kind === "lease-renewal" ? () => {} : clock.setTimer(delayMs, fire)),
  };
}

/** The world where the object ran the counter to its end (holding the lease), the tab following; then the lease lapses. */
async function lapsedWorld(options: { keepSuperseded?: boolean; fate?: Fate; ttlMs?: number } = {}) {
  const ttlMs = options.ttlMs ?? 5_000;
  const world = await comebackWorld({ to: 3, copyService: true, objectClock: lettingTheLeaseLapse, ...options, ttlMs });
  const { clock } = world;
  const following = await world.handOverAndFollow(3);
  await runUntil(clock, async () => (await world.tab.harness.storage.getTask(world.taskId))?.state.status === "terminal");
  const held = world.record();
  expect(held.holder).toBe("object");
  clock.advance(ttlMs + 1_000);
  expect(clock.now()).toBeGreaterThan(held.expiresAt!);
  return { world, following, held };
}

describe("an object harness whose lease a tab took ends, and the next instance takes the tab's pushes (decision 0149)", () => {
  it("S4/S12: the grant tells the host, which ends the instance; the tab's pushes are stored once, no alarm and no refusal", async () => {
    const { world, following, held } = await lapsedWorld();
    const { clock } = world;
    const instance = world.end;
    const objectHarness = (await instance.harness)!;
    expect(objectHarness.closed).toBe(false); // still open: nothing has ended it yet

    // The tab opens again: its open takes the lapsed lease under a new epoch, then it writes a note and pushes.
    following.follower!.stop();
    await following.harness.close(ctx);
    const back = await world.reopenTab();
    expect(back.harness.readOnly).toBe(false);
    const epoch = back.harness.lease!.epoch;
    expect(epoch).toBeGreaterThan(held.epoch);
    const root = await back.harness.root(ctx);
    await root.submit({ type: "write", entry: { kind: "app.note" } }, ctx);
    const stored = back.harness.lease!.position;

    // Before: the instance lived on, and every push was NotReady for good (this never held).
    await runUntil(clock, () => back.mirror!.acknowledged >= stored);
    expect(back.mirror!.refused).toBeUndefined();
    expect(world.ended).toEqual([instance]); // told once, at the grant
    expect(objectHarness.closed).toBe(true);
    expect(world.end).not.toBe(instance);
    // Nothing doubled, nothing lost: the copy is the tab's, row for row, its log under the tab's epoch; one note.
    expect(await rows(world.copy)).toEqual(await rows(world.tabStorage));
    expect((await world.copy.load()).log).toEqual({ epoch, position: stored });
    const notes = (await back.harness.conversation(root.id).entries(ctx)).filter((entry) => entry.kind === "app.note");
    expect(notes).toHaveLength(1);
    expect(world.record()).toMatchObject({ holder: "tab", epoch });
    await back.harness.close(ctx);
  });

  it("without a host that ends it (no onSuperseded), the instance answers the new holder NotReady for as long as it lives", async () => {
    const { world, following } = await lapsedWorld({ keepSuperseded: true });
    following.follower!.stop();
    await following.harness.close(ctx);
    const back = await world.reopenTab();
    await (await back.harness.root(ctx)).submit({ type: "write", entry: { kind: "app.note" } }, ctx);
    const stored = back.harness.lease!.position;
    await runUntil(world.clock, () => back.mirror!.stats.retriedRefusals >= 5);
    expect(back.mirror!.acknowledged).toBeLessThan(stored);
    expect(back.mirror!.refused).toBeUndefined(); // passing, never final: a host that ends the instance lets it through
    await back.harness.close(ctx);
  });
});

describe("a tab takes the lease back while the object's own takeover is still opening its harness (decision 0149, 0145's L3)", () => {
  it("S4: its pushes are NotReady (not StaleEpoch), the instance is not ended, and once the open ends read-only they are stored once", async () => {
    let cut = false;
    let letOpen: (() => void) | undefined;
    let opens = 0;
    const world = await comebackWorld({
      ttlMs: 5_000,
      fate: () => (cut ? "drop" : "deliver"),
      // The object's takeover holds at its open (a slow recovery), before it asks the book for the lease.
      objectOpen: async (open) => {
        opens++;
        await new Promise<void>((resolve) => (letOpen = resolve));
        return open();
      },
    });
    const { clock } = world;
    const first = world.tab;
    await runUntil(clock, () => first.mirror!.acknowledged >= first.harness.lease!.position); // the copy holds the tab's log
    world.loseFrames();
    // The tab's link goes down: its lease expires at the object, whose watch starts the takeover (held at its open).
    cut = true;
    await runUntil(clock, () => letOpen !== undefined);
    expect(opens).toBe(1);
    const instance = world.end;
    expect(instance.harness).toBeDefined(); // the takeover is under way: this place counts as holding
    await world.tab.harness.close(ctx).catch(() => {});

    // The link is back; the tab opens again and takes the lease back first (the object has not asked yet).
    cut = false;
    const back: { harness: Harness; mirror?: { stats: { retriedRefusals: number }; refused?: Error; acknowledged: number } } =
      await world.reopenTab();
    expect(back.harness.readOnly).toBe(false);
    const epoch = back.harness.lease!.epoch;
    expect(world.record()).toMatchObject({ holder: "tab", epoch });
    const root = await back.harness.root(ctx);
    await root.submit({ type: "write", entry: { kind: "app.note" } }, ctx);
    const stored = back.harness.lease!.position;
    await runUntil(clock, () => back.mirror!.stats.retriedRefusals > 0 || back.mirror!.refused !== undefined);
    expect(back.mirror!.refused).toBeUndefined(); // NotReady, passing: not StaleEpoch, which would stop the mirror
    expect(back.mirror!.acknowledged).toBeLessThan(stored);
    expect(world.ended).toEqual([]); // the harness opening here holds no epoch: not superseded, nothing to end

    // The object's open goes on: the book refuses it (the tab holds the lease), it opens read-only and follows on.
    letOpen!();
    await runUntil(clock, () => back.mirror!.acknowledged >= stored);
    await runUntil(clock, async () => (await back.harness.storage.getTask(world.taskId))?.state.status === "terminal");
    await runUntil(clock, () => back.mirror!.acknowledged >= back.harness.lease!.position); // the counter ran on at the tab
    expect(back.mirror!.refused).toBeUndefined();
    expect(world.end).toBe(instance);
    expect(world.ended).toEqual([]);
    expect(world.end.harness).toBeUndefined();
    expect(await rows(world.copy)).toEqual(await rows(world.tabStorage));
    expect((await world.copy.load()).log).toEqual({ epoch, position: back.harness.lease!.position });
    const notes = (await back.harness.conversation(root.id).entries(ctx)).filter((entry) => entry.kind === "app.note");
    expect(notes).toHaveLength(1);
    expect(world.record()).toMatchObject({ holder: "tab", epoch });
    await back.harness.close(ctx);
  });
});

// 0149's review (L1): an arm that called the object's own expiry check in the lapse, after the grant or after the notes
// was removed: `Arrival.checkExpiry` returned at once in all three (its own harness open, then the tab's lease live).
describe("the order of the lapse, the grant and the pushes (decision 0149)", () => {
  it("S4: whatever the link loses or repeats, the copy ends as the tab's, each note once, the host told once", async () => {
    const fates = fc.constantFrom<"deliver" | "drop" | "twice">("deliver", "deliver", "drop", "twice");
    await fc.assert(
      fc.asyncProperty(
        fc.record({
          toObject: fc.array(fates, { maxLength: 24 }),
          toTab: fc.array(fates, { maxLength: 24 }),
          notes: fc.integer({ min: 1, max: 3 }),
        }),
        async ({ toObject, toTab, notes }) => {
          const fate: Fate = (way, index) => (way === "toObject" ? toObject : toTab)[index] ?? "deliver";
          // A lease long beside the link's resends (2 s each): a lost renewal must not end the tab's lease meanwhile.
          const { world, following } = await lapsedWorld({ fate, ttlMs: 30_000 });
          const { clock } = world;
          const instance = world.end;
          world.loseFrames();
          following.follower!.stop();
          await following.harness.close(ctx);
          const back = await world.reopenTab();
          expect(back.harness.readOnly).toBe(false);
          const epoch = back.harness.lease!.epoch;
          const root = await back.harness.root(ctx);
          for (let note = 0; note < notes; note++) await root.submit({ type: "write", entry: { kind: "app.note" } }, ctx);
          const stored = back.harness.lease!.position;
          await runUntil(clock, () => back.mirror!.acknowledged >= stored);
          expect(back.mirror!.refused).toBeUndefined();
          expect(world.ended).toEqual([instance]); // once, whatever was lost or repeated
          expect(world.record()).toMatchObject({ holder: "tab", epoch }); // the object took nothing back
          expect(await rows(world.copy)).toEqual(await rows(world.tabStorage));
          expect((await world.copy.load()).log).toEqual({ epoch, position: stored });
          const written = (await back.harness.conversation(root.id).entries(ctx)).filter((entry) => entry.kind === "app.note");
          expect(written).toHaveLength(notes);
          await back.harness.close(ctx);
        },
      ),
      { numRuns: 40 },
    );
  }, 120_000);
});
