/**
 * Decision 0145 (B; the review of 0143's lead, never probed before): an object instance whose idle lease lapsed (0052:
 * its renewal parked) keeps its harness open until its alarm ends it. A tab that takes the lapsed lease (its open asks
 * the object's book, which grants an expired lease: epoch N+1) pushes its new epoch's first transaction to that still
 * live instance. Before: refused `StaleEpoch` ("the object's copy": the instance counted its own open harness as the
 * holder) — final for the tab's mirror, which stopped pushing for good while the tab went on writing under a lease it
 * holds: the object's copy never got that work. Now: `NotReady` (the instance is between its harnesses), the mirror
 * pushes the round again, and the next instance (which follows the tab) stores every transaction once, in order.
 */
import fc from "fast-check";
import { describe, expect, it } from "vitest";
import { ObjectClock } from "../src/cloudflare/object-clock.ts";
import { LeaseNotHeld, StaleEpoch } from "../src/errors.ts";
import { LeaseBook, type LeaseRecord } from "../src/follow/arbiter.ts";
import { checkPusher } from "../src/follow/object-lease.ts";
import type { PushMessage } from "../src/follow/wire.ts";
import { createManualClock } from "../src/testing/clock.ts";
import { comebackWorld } from "./comeback-support.ts";
import { rows } from "./follow-support.ts";
import { ctx, runUntil } from "./support.ts";

describe("a tab takes an idle object's lapsed lease while that instance still lives (decision 0145)", () => {
  it("S4/S12: its pushes are not refused StaleEpoch but answered NotReady, then stored once by the next instance", async () => {
    let objectClock: ObjectClock | undefined;
    const world = await comebackWorld({
      ttlMs: 5_000,
      to: 3,
      copyService: true,
      objectClock: (clock) => (objectClock = new ObjectClock(clock)),
      keepSuperseded: true, // the window 0145 answers NotReady in, held open (decision 0149 ends it when told)
    });
    const { clock } = world;
    // The tab hands the lease over; the object runs the counter to its end and the tab, following, holds all of it.
    const following = await world.handOverAndFollow(3);
    await runUntil(clock, async () => (await world.tab.harness.storage.getTask(world.taskId))?.state.status === "terminal");
    const held = world.record();
    expect(held.holder).toBe("object");
    // Idle from here (as the object's alarm parks its clock): the renewal waits, and the lease lapses.
    objectClock!.park();
    clock.advance(6_000);
    expect(clock.now()).toBeGreaterThan(held.expiresAt!);
    const instance = world.end;
    expect(instance.harness).toBeDefined(); // still open on this instance: the alarm has not ended it

    // The tab opens again: its open takes the lapsed lease (a new epoch), writes its recovery and a note, and pushes.
    following.follower!.stop();
    await following.harness.close(ctx);
    const back = await world.reopenTab();
    expect(back.harness.readOnly).toBe(false);
    const epoch = back.harness.lease!.epoch;
    expect(epoch).toBeGreaterThan(held.epoch);
    expect(world.record()).toMatchObject({ holder: "tab", epoch });
    const root = await back.harness.root(ctx);
    await root.submit({ type: "write", entry: { kind: "app.note" } }, ctx);
    const stored = back.harness.lease!.position;
    await runUntil(clock, () => back.mirror!.stats.retriedRefusals > 0 || back.mirror!.refused !== undefined);
    // Before: StaleEpoch, and the mirror stopped pushing for good.
    expect(back.mirror!.refused?.name).toBeUndefined();
    expect(world.end).toBe(instance);

    // The alarm ends the instance; the next one follows the tab (the record names it) and takes every push once.
    await world.nextInstance();
    await runUntil(clock, () => back.mirror!.acknowledged >= stored);
    expect(back.mirror!.refused).toBeUndefined();
    expect(world.end.head).toBe(stored);
    // Nothing doubled, nothing lost: the object's copy is the tab's, row for row, its log under the tab's epoch.
    expect(await rows(world.copy)).toEqual(await rows(world.tabStorage));
    const notes = (await back.harness.conversation(root.id).entries(ctx)).filter((entry) => entry.kind === "app.note");
    expect(notes).toHaveLength(1);
    expect((await world.copy.load()).log).toEqual({ epoch, position: stored });
    await back.harness.close(ctx);
  });
});

/** checkPusher as it was before decision 0145: the oracle for every push that is not the new holder's in the lapse. */
function checkedBefore(record: LeaseRecord, place: string, holding: boolean, push: PushMessage): string | undefined {
  if (push.epoch < record.epoch || holding) return new StaleEpoch(push.epoch, record.epoch, "the object's copy").name;
  if (push.epoch > record.epoch) return LeaseNotHeld.name;
  if (record.holder !== undefined && record.holder !== push.from) return LeaseNotHeld.name;
  if (record.holder === undefined && record.heir !== undefined && record.heir !== place) return LeaseNotHeld.name;
  return undefined;
}

describe("who may push to the object's copy (decision 0145)", () => {
  it("a hostile push keeps its final refusal; only the holder of the current epoch, with the object's harness still open, is NotReady", () => {
    const places = fc.constantFrom("object", "tab", "tab-2", "");
    fc.assert(
      fc.property(
        fc.record(
          { epoch: fc.integer({ min: 0, max: 5 }), holder: places, heir: places, expiresAt: fc.integer({ min: 0, max: 10 }) },
          { requiredKeys: ["epoch"] },
        ),
        fc.boolean(),
        places,
        fc.integer({ min: -1, max: 7 }),
        (record, holding, from, epoch) => {
          const book = new LeaseBook({ clock: createManualClock(5), ttlMs: 5, load: () => record, save: () => {} });
          const push = { type: "push", from, epoch, batches: [], parts: [] } as unknown as PushMessage;
          let answer: string | undefined;
          try {
            checkPusher(book, "object", holding, push);
          } catch (error) {
            answer = (error as Error).name;
          }
          const superseded = holding && epoch === record.epoch && record.holder === from && from !== "object";
          expect(answer).toBe(superseded ? "NotReady" : checkedBefore(record, "object", holding, push));
        },
      ),
      { numRuns: 500 },
    );
  });
});
