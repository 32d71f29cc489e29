import fc from "fast-check";
import { describe, expect, it } from "vitest";
import { LeaseBook, type LeaseRecord, memoryArbiter } from "../src/follow/arbiter.ts";
import { FollowLink } from "../src/follow/link-client.ts";
import { remoteArbiter } from "../src/follow/mirror.ts";
import { ObjectEnd } from "../src/follow/object-end.ts";
import { createRegistry, Harness, LeaseNotHeld } from "../src/index.ts";
import { MemoryStorage } from "../src/storage/memory.ts";
import type { LogMark } from "../src/storage/records.ts";
import { createManualClock } from "../src/testing/clock.ts";
import { emptyBatch } from "../src/testing/storage-conformance.ts";
import { ctx } from "./support.ts";

// Review (session 8), decision 0039's seam: `LeaseBook.acquire` compared only the taker's head *position* with the
// arbiter's copy. A tab that went on alone under its old epoch past where the object took over (a fork) holds a head
// at or past the copy's — and was granted the next epoch: it ran on its fork, and its mirror pushed its new epoch on
// top of the object's stretch (joinPush starts at the copy's head + 1), mixing the two histories without a report.

/** A storage whose log holds the stretches `[epoch, through]` in order (one empty transaction per position). */
async function logOf(stretches: Array<[epoch: number, through: number]>): Promise<MemoryStorage> {
  const storage = new MemoryStorage();
  let position = 0;
  for (const [epoch, through] of stretches)
    while (position < through) await storage.apply({ ...emptyBatch(), fence: { epoch, position: ++position } });
  return storage;
}

describe("LeaseBook.acquire refuses a taker whose log left the arbiter's copy's history (decision 0039, review)", () => {
  it("0032/S5: a forked tab is refused the lease the object handed back to it, over the real link; it opens read-only and its fork stays as it was", async () => {
    const clock = createManualClock(1_000);
    // The tab held epoch 1 and wrote 1..5; the object holds 1..3 of it, took over at 3 (epoch 2: its recovery at 4),
    // and handed the lease back to the tab at 4.
    const copy = await logOf([
      [1, 3],
      [2, 4],
    ]);
    const tabStorage = await logOf([[1, 5]]);
    let record: LeaseRecord = { epoch: 2, releasedAt: 4, heir: "tab" };
    const copyMark = { epoch: 2, position: 4 };
    const book = new LeaseBook({ clock, ttlMs: 5_000, load: () => record, save: (next) => void (record = next), copyHead: () => copyMark });
    const end = await ObjectEnd.start({
      place: "object",
      storage: copy,
      book,
      clock,
      watchExpiry: false,
      open: () => Promise.reject(new Error("the object does not take the lease here")),
    });
    const link: FollowLink = new FollowLink({
      clock,
      send: (frame) =>
        void end.receive(
          frame,
          (answer) => queueMicrotask(() => link.receive(answer)),
          () => true,
        ),
    });
    link.connected();
    const tab = await Harness.open(
      tabStorage,
      { registry: createRegistry(), clock, lease: { place: "tab", arbiter: remoteArbiter(link) } },
      ctx,
    );
    expect(tab.readOnly).toBe(true);
    expect(record).toEqual({ epoch: 2, releasedAt: 4, heir: "tab" }); // nothing minted
    expect((await tabStorage.load()).log).toEqual({ epoch: 1, position: 5 });
    expect(await tabStorage.readLog!(0, 10)).toHaveLength(5); // the fork is still there for findFork to name
    await tab.close(ctx);
  });

  it("an expired lease: refused to a head at the copy's under another epoch, or past it under an older one; granted to a prefix's continuation", async () => {
    const clock = createManualClock(1_000);
    const copy: LogMark = { epoch: 2, position: 7 };
    // The object took epoch 2 at 6 (its recovery at 7), then was evicted: its renewals stopped.
    const book = memoryArbiter({ clock, ttlMs: 3_000, copyHead: () => copy, record: { epoch: 2, holder: "object", expiresAt: 900 } });
    for (const [head, epoch] of [
      [7, 1],
      [9, 1],
      [7, 3],
    ] as const) {
      const refusal = await book.acquire("tab", head, epoch).catch((error: unknown) => error);
      expect(refusal).toBeInstanceOf(LeaseNotHeld);
      expect((refusal as Error).message).toMatch(/left the arbiter's copy's history/);
    }
    expect(book.record).toEqual({ epoch: 2, holder: "object", expiresAt: 900 }); // nothing minted
    expect(await book.acquire("tab", 9, 2)).toEqual({ epoch: 3, ttlMs: 3_000 });
  });

  it("property: a taker is granted exactly when its log continues the copy's (fast-check over shared prefixes and divergent tails)", async () => {
    await fc.assert(
      fc.asyncProperty(
        fc.integer({ min: 0, max: 20 }), // where both logs agree up to (epoch 1)
        fc.integer({ min: 0, max: 10 }), // what the copy has beyond, under epoch 2
        fc.integer({ min: 0, max: 10 }), // what the taker has beyond, under epoch 1 (its fork when the copy has any)
        async (shared, copyOwn, takerOwn) => {
          const clock = createManualClock(1_000);
          const copy: LogMark = { epoch: copyOwn > 0 ? 2 : 1, position: shared + copyOwn };
          const taker: LogMark = { epoch: 1, position: shared + takerOwn };
          let record: LeaseRecord = { epoch: 2 };
          const book = new LeaseBook({
            clock,
            ttlMs: 1_000,
            load: () => record,
            save: (next) => void (record = next),
            copyHead: () => copy,
          });
          const answer = await book.acquire("tab", taker.position, taker.position > 0 ? taker.epoch : undefined).catch((e: unknown) => e);
          // The taker continues the copy when the copy holds nothing of its own past the shared prefix (the taker is
          // then at or past it under the same epoch); it must not be behind it either.
          const continues = copyOwn === 0;
          if (continues && taker.position >= copy.position) expect(answer).toEqual({ epoch: 3, ttlMs: 1_000 });
          else expect(answer).toBeInstanceOf(LeaseNotHeld);
        },
      ),
      { numRuns: 300 },
    );
  });
});
