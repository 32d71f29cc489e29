import fc from "fast-check";
import { describe, expect, it } from "vitest";
import { objectCopy } from "../src/cloudflare/follow-copy.ts";
import { LeaseBook, type LeaseRecord } from "../src/follow/arbiter.ts";
import type { HarnessStatus } from "../src/host/protocol.ts";
import { createRegistry } from "../src/index.ts";
import { openSqliteStorage } from "../src/storage/sqlite/open-storage.ts";

// Decision 0067 (decision 0057's "Not done"): an `?edge=` page, a client of the object's own host, said "a tab that
// holds the object's lease" without naming it — the object's host was never told its holder. The copy the object
// serves while a tab holds its lease now names the holder from the object's own LeaseBook record, in the same shape
// the tab's host uses (`heldBy`).

async function objectCopyOver(initial: LeaseRecord) {
  let record = initial;
  let now = 0;
  // Wired as the object wires it (src/cloudflare/object.ts): the book's onHolder tells the copy (decision 0075).
  let holderChanged = () => {};
  const book = new LeaseBook({
    clock: { now: () => now },
    ttlMs: 60_000,
    load: () => record,
    save: (next) => void (record = next),
    onHolder: () => holderChanged(),
  });
  const copied = objectCopy({
    database: "copy",
    storage: openSqliteStorage({ vfs: "memory" }),
    harness: { registry: createRegistry() },
    book,
    place: "object",
    end: () => undefined,
  });
  const statuses: HarnessStatus[] = [];
  copied.copy.service.onStatus((status) => void statuses.push(status));
  while (copied.copy.service.status().kind !== "ready") await new Promise((resolve) => setTimeout(resolve, 1));
  holderChanged = () => copied.copy.holderChanged();
  return {
    service: copied.copy.service,
    statuses,
    book,
    set: (next: LeaseRecord) => void (record = next),
    advance: (ms: number) => void (now += ms),
  };
}

describe("the object's host names its lease's holder (decision 0067)", () => {
  it("0067: the copy's ready status carries heldBy from the object's own LeaseBook: a tab by its place, the object itself, none while free", async () => {
    const place = "tab-0123abcd-4567-89ab-cdef-0123456789ab";
    const world = await objectCopyOver({ epoch: 1, holder: place, expiresAt: 60_000 });
    expect(world.service.status()).toMatchObject({ kind: "ready", runs: "elsewhere", heldBy: { kind: "tab", place } });
    // What a subscriber was told carries it too (the page's strip reads its subscription).
    expect(world.statuses.at(-1)).toMatchObject({ kind: "ready", heldBy: { kind: "tab", place } });
    world.set({ epoch: 2, holder: "object", expiresAt: 60_000 });
    expect(world.service.status()).toMatchObject({ runs: "elsewhere", heldBy: { kind: "object", place: "object" } });
    world.set({ epoch: 2, heir: "tab-x", releasedAt: 4 });
    const free = world.service.status();
    expect(free).toMatchObject({ kind: "ready", runs: "elsewhere" });
    expect("heldBy" in free).toBe(false);
    await world.service.close();
  });

  it("0067: whatever the record holds, heldBy is exactly a place of the wire's shape (1-200 characters) or absent (fast-check)", async () => {
    const world = await objectCopyOver({ epoch: 1 });
    const base = world.service.status();
    await fc.assert(
      fc.asyncProperty(
        fc.oneof(fc.string({ maxLength: 260 }), fc.string({ unit: "grapheme", maxLength: 240 }), fc.anything(), fc.constant("object")),
        async (holder) => {
          world.set({ epoch: 3, holder: holder as string, expiresAt: 60_000 });
          const status = world.service.status();
          const { heldBy, ...rest } = status as HarnessStatus & { heldBy?: unknown };
          // Nothing else in the status moves with the holder.
          const { heldBy: _none, ...before } = base as HarnessStatus & { heldBy?: unknown };
          expect(rest).toEqual(before);
          const valid = typeof holder === "string" && holder.length >= 1 && holder.length <= 200;
          if (!valid) expect(heldBy).toBeUndefined();
          else expect(heldBy).toEqual({ kind: holder === "object" ? "object" : "tab", place: holder });
        },
      ),
      { numRuns: 300 },
    );
    await world.service.close();
  });

  it("0075: a holder change with no transaction after it reaches a subscribed page at once: a grant, a renewal (no status), a release, an expired lease taken", async () => {
    const world = await objectCopyOver({ epoch: 1, holder: "tab-a", expiresAt: 60_000 });
    const heldBy = () => world.statuses.map((status) => (status as HarnessStatus & { heldBy?: { place: string } }).heldBy?.place ?? "none");
    const told = world.statuses.length;
    // tab-a releases at position 0 (its copy holds nothing more): the lease is free — no transaction follows.
    await world.book.release("tab-a", 1, 0);
    expect(heldBy().slice(told)).toEqual(["none"]);
    // tab-b takes it (its recovery writes nothing: it had nothing running).
    await world.book.acquire("tab-b", 0);
    expect(heldBy().slice(told)).toEqual(["none", "tab-b"]);
    // A renewal names the same holder: no status.
    await world.book.renew("tab-b", 2);
    expect(heldBy().slice(told)).toEqual(["none", "tab-b"]);
    // tab-b vanishes; after the expiry tab-c takes the lease.
    world.advance(61_000);
    await world.book.acquire("tab-c", 0);
    expect(heldBy().slice(told)).toEqual(["none", "tab-b", "tab-c"]);
    expect(world.statuses.at(-1)).toMatchObject({ kind: "ready", runs: "elsewhere", heldBy: { kind: "tab", place: "tab-c" } });
    await world.service.close();
  });

  it("0075: hostile holders in any order of grants and releases: a subscriber hears one status per change of holder, each naming it or none (fast-check)", async () => {
    const world = await objectCopyOver({ epoch: 0 });
    await fc.assert(
      fc.asyncProperty(
        fc.array(fc.oneof(fc.string({ minLength: 1, maxLength: 230 }), fc.constant("tab-x")), { minLength: 1, maxLength: 8 }),
        async (places) => {
          for (const place of places) {
            if (place === "object") continue; // the object's own place is its own to take (not a caller's)
            const before = world.statuses.length;
            const holder = world.book.record.holder;
            if (holder !== undefined) await world.book.release(holder, world.book.record.epoch, 0);
            await world.book.acquire(place, 0);
            const heard = world.statuses.slice(before) as Array<HarnessStatus & { heldBy?: { place: string } }>;
            expect(heard.length).toBe(holder === undefined ? 1 : 2);
            const last = heard.at(-1)!;
            if (place.length <= 200) expect(last.heldBy).toEqual({ kind: "tab", place });
            else expect(last.heldBy).toBeUndefined();
          }
        },
      ),
      { numRuns: 60 },
    );
    await world.service.close();
  });
});
