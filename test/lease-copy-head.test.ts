import fc from "fast-check";
import { describe, expect, it } from "vitest";
import { memoryArbiter } from "../src/follow/arbiter.ts";
import { createRegistry, Harness, LeaseNotHeld } from "../src/index.ts";
import { MemoryStorage } from "../src/storage/memory.ts";
import { createManualClock } from "../src/testing/clock.ts";
import { emptyBatch } from "../src/testing/storage-conformance.ts";
import { ctx } from "./support.ts";

// Decision 0039 (issue 27 item 4's seam): the arbiter keeps a copy beside it (the object's). A place whose copy
// is behind that one must not take the lease — expired, free or its own — or it would write at positions the
// arbiter's copy already holds, and the two histories would mix. Before, only a release's position was checked.

describe("LeaseBook.acquire checks the taker's head against the arbiter's copy (decision 0039)", () => {
  it("an expired lease is refused (LeaseNotHeld) to a tab whose copy is behind the object's; granted once it caught up", async () => {
    const clock = createManualClock(1_000);
    let copy = 0;
    const book = memoryArbiter({ clock, ttlMs: 3_000, copyHead: () => copy });
    await book.acquire("object", 0);
    copy = 7; // the object wrote its copy up to 7, then was evicted: its renewals stopped
    clock.advance(3_000);
    const refusal = await book.acquire("tab", 4).catch((error: unknown) => error);
    expect(refusal).toBeInstanceOf(LeaseNotHeld);
    expect((refusal as Error).message).toMatch(/up to position 4 and the arbiter's copy up to 7/);
    expect(book.record).toMatchObject({ epoch: 1, holder: "object" }); // nothing minted
    expect(await book.acquire("tab", 7)).toEqual({ epoch: 2, ttlMs: 3_000 });
  });

  it("a tab with a stale copy opens read-only (S5) instead of writing over the object's history", async () => {
    const clock = createManualClock(1_000);
    let copy = 0;
    const book = memoryArbiter({ clock, ttlMs: 3_000, copyHead: () => copy });
    await book.acquire("object", 0);
    copy = 2;
    clock.advance(3_000);
    const stale = new MemoryStorage();
    await stale.apply({ ...emptyBatch(), fence: { epoch: 1, position: 1 } });
    const tab = await Harness.open(stale, { registry: createRegistry(), clock, lease: { place: "tab", arbiter: book } }, ctx);
    expect(tab.readOnly).toBe(true);
    expect((await stale.load()).log).toEqual({ epoch: 1, position: 1 });
    await tab.close(ctx);
  });

  it("any head below the copy's is refused and nothing is minted; any head at or past it is granted (fast-check)", async () => {
    await fc.assert(
      fc.asyncProperty(
        fc.integer({ min: 0, max: 1_000 }),
        fc.integer({ min: 0, max: 1_000 }),
        fc.boolean(),
        async (copy, head, expired) => {
          const clock = createManualClock(1_000);
          const book = memoryArbiter({ clock, ttlMs: 3_000, copyHead: () => copy });
          if (expired) {
            await book.acquire("object", copy);
            clock.advance(3_000);
          }
          const before = book.record;
          const answer = await book.acquire("tab", head).catch((error: unknown) => error);
          if (head < copy) {
            expect(answer).toBeInstanceOf(LeaseNotHeld);
            expect(book.record).toEqual(before);
          } else expect(answer).toEqual({ epoch: before.epoch + 1, ttlMs: 3_000 });
        },
      ),
      { numRuns: 200 },
    );
  });
});
