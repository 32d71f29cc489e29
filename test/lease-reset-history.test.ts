import fc from "fast-check";
import { describe, expect, it } from "vitest";
import { LeaseBook, type LeaseRecord, MAX_FIRST_EPOCH, memoryArbiter, randomFirstEpoch } from "../src/follow/arbiter.ts";
import { continuesHistory, findFork, historyOf } from "../src/follow/fork.ts";
import { LeaseNotHeld } from "../src/index.ts";
import { MemoryStorage } from "../src/storage/memory.ts";
import { createManualClock } from "../src/testing/clock.ts";
import { emptyBatch } from "../src/testing/storage-conformance.ts";

// Decision 0074 (issue 27 item 4): a Durable Object whose storage was reset (deleted, a new environment) minted its
// epochs from 1 again. A tab that wrote under the old object's epoch 1 and comes back found the new history's
// epoch 1 at its own head's position and read it as its own continuation: it trimmed its unpushed transactions and
// followed the other history on top of them — no fork, work lost. The object's book now begins each history at a
// random epoch.

/** A storage whose log holds `count` empty transactions under `epoch`. */
async function logOf(epoch: number, count: number): Promise<MemoryStorage> {
  const storage = new MemoryStorage();
  for (let position = 1; position <= count; position++) await storage.apply({ ...emptyBatch(), fence: { epoch, position } });
  return storage;
}

describe("a reset object begins a new history (decision 0074)", () => {
  it("S5/0032: a tab of the old history does not continue the new one: its five transactions are a fork, none read as the new history's", async () => {
    const clock = createManualClock(1_000);
    // Before the reset: the tab takes the object's first lease and writes 1..5 (pushed or not).
    const before = memoryArbiter({ clock, firstEpoch: () => 40_961 });
    const tabGrant = await before.acquire("tab", 0);
    const tab = await logOf(tabGrant.epoch, 5);
    // The object's storage is reset: a new book. A second device takes its first lease and writes 1..8.
    const after = memoryArbiter({ clock, firstEpoch: () => 7_340_033 });
    const phoneGrant = await after.acquire("phone", 0);
    const phone = await logOf(phoneGrant.epoch, 8);
    const theirs = await historyOf(phone);
    const mine = (await tab.load()).log!;
    expect(continuesHistory(theirs, mine)).toBe(false);
    const fork = await findFork(tab, theirs);
    expect(fork?.transactions.map((t) => t.position)).toEqual([1, 2, 3, 4, 5]);
    expect(fork?.from).toBe(1);
  });

  it("0074: the reset object refuses the lease to the old history's tab whose head is past its copy under an epoch it never minted; nothing minted", async () => {
    const clock = createManualClock(1_000);
    let record: LeaseRecord = { epoch: 0 };
    const copy = { epoch: 0, position: 0 };
    const book = new LeaseBook({
      clock,
      ttlMs: 3_000,
      load: () => record,
      save: (next) => void (record = next),
      copyHead: () => copy,
      firstEpoch: () => 12,
    });
    // The new history: the phone's lease (epoch 12), its copy at 8; then the phone went away (expired).
    expect(await book.acquire("phone", 0)).toEqual({ epoch: 12, ttlMs: 3_000 });
    Object.assign(copy, { epoch: 12, position: 8 });
    clock.advance(5_000);
    // The tab of the old history: 10 transactions under its old object's epoch 57.
    const refusal = await book.acquire("tab", 10, 57).catch((error: unknown) => error);
    expect(refusal).toBeInstanceOf(LeaseNotHeld);
    expect((refusal as Error).message).toMatch(/never minted/);
    expect(record.epoch).toBe(12);
    // A place of this history at or past the copy is still granted the next epoch.
    expect(await book.acquire("phone", 8, 12)).toEqual({ epoch: 13, ttlMs: 3_000 });
  });

  it("0074: a new book's first epoch is past the taker's own head epoch (a place that wrote before it met its arbiter): a log's epochs only grow", async () => {
    const clock = createManualClock(1_000);
    expect((await memoryArbiter({ clock, firstEpoch: () => 3 }).acquire("tab", 9, 7)).epoch).toBe(8);
    expect((await memoryArbiter({ clock, firstEpoch: () => 30 }).acquire("tab", 9, 7)).epoch).toBe(30);
    // Without a first epoch, as before: 1.
    expect((await memoryArbiter({ clock }).acquire("tab", 0)).epoch).toBe(1);
  });

  it("property: any drawn value (hostile included) gives a first epoch in [1, 2^40], and a new book's grant is a safe integer past the taker's head", async () => {
    const drawn = fc.oneof(
      fc.double({ min: 0, max: 1, maxExcluded: true, noNaN: true }),
      fc.constantFrom(Number.NaN, -1, 1, 2, Infinity, -Infinity, 1e300),
    );
    fc.assert(
      fc.property(drawn, (value) => {
        const epoch = randomFirstEpoch(() => value);
        expect(Number.isSafeInteger(epoch) && epoch >= 1 && epoch <= MAX_FIRST_EPOCH).toBe(true);
      }),
      { numRuns: 500 },
    );
    await fc.assert(
      fc.asyncProperty(
        fc.oneof(fc.integer(), fc.double(), fc.constantFrom(Number.NaN, Infinity, 2 ** 60)),
        fc.option(fc.integer({ min: 1, max: 2 ** 45 }), { nil: undefined }),
        async (first, headEpoch) => {
          const book = memoryArbiter({ clock: createManualClock(0), firstEpoch: () => first });
          const { epoch } = await book.acquire("tab", headEpoch === undefined ? 0 : 5, headEpoch);
          expect(Number.isSafeInteger(epoch) && epoch >= 1).toBe(true);
          if (headEpoch !== undefined) expect(epoch).toBeGreaterThan(headEpoch);
        },
      ),
      { numRuns: 300 },
    );
  });
});
