import { describe, expect, it } from "vitest";
import { DEFAULT_LEASE_TTL_MS, LeaseBook, type LeaseRecord } from "../src/follow/arbiter.ts";
import { ObjectEnd } from "../src/follow/object-end.ts";
import { encodeFollowMessage } from "../src/follow/wire.ts";
import { createRegistry, Harness, MemoryStorage } from "../src/index.ts";
import { createManualClock } from "../src/testing/clock.ts";
import { ctx, flush } from "./support.ts";

// Review (session 9): a release to an heir (the object's answer to `lease.handBack`, decision 0038) reserves the lease
// for the heir "for one lease's time", so an heir that never comes — its tab crashed after asking — does not strand
// it. Under a pinned lease (ttlMs Infinity) that time was Infinity: a tab that asked for the lease back and vanished
// left the lease reserved for ever, and neither the object nor any other place could ever take it again. A pinned
// lease keeps its holder for ever; a reservation for a place that never came now lapses after the default lease time.

describe("a pinned lease handed back to a tab that never comes (decision 0038)", () => {
  it("the reservation lapses after the default lease time and the object takes the lease back; the heir is refused after", async () => {
    const clock = createManualClock(1_000);
    let record: LeaseRecord = { epoch: 1, releasedAt: 0 }; // free: the object takes it at its start
    const book = new LeaseBook({ clock, ttlMs: Number.POSITIVE_INFINITY, load: () => record, save: (next) => void (record = next) });
    const end = await ObjectEnd.start({
      place: "object",
      storage: new MemoryStorage(),
      book,
      clock,
      watchExpiry: false,
      open: (storage, lease) => Harness.open(storage, { registry: createRegistry(), clock, lease }, ctx),
    });
    expect((await end.harness!).lease).toMatchObject({ place: "object", epoch: 2 });
    const replies: Array<Record<string, unknown>> = [];
    await end.receive(
      encodeFollowMessage({ type: "call", id: "1", topic: "lease", method: "handBack", args: ["tab", end.head] }),
      (frame) => replies.push(JSON.parse(frame)),
      () => true,
    );
    expect(replies).toMatchObject([{ id: "1", value: { epoch: 2 } }]);
    expect(record).toMatchObject({ epoch: 2, heir: "tab" });
    // The tab never comes. Before: expiresAt Infinity (null through JSON) — no alarm, never lapsed, stranded for good.
    expect(end.expiresAt).toBe(1_000 + DEFAULT_LEASE_TTL_MS);
    clock.advance(DEFAULT_LEASE_TTL_MS - 1);
    await end.checkExpiry();
    expect(end.harness).toBeUndefined();
    clock.advance(1);
    await end.checkExpiry();
    await flush(5);
    const back = await end.harness!;
    expect(back.lease).toMatchObject({ place: "object", epoch: 3 });
    // The object's own lease is pinned again: it lasts.
    expect(record).toMatchObject({ epoch: 3, holder: "object" });
    await expect(book.acquire("tab", end.head)).rejects.toThrow(/object holds it/);
    await back.close(ctx);
  });

  it("a pinned holder keeps its lease however long it is away (no lapse without a release)", async () => {
    const clock = createManualClock(1_000);
    let record: LeaseRecord = { epoch: 0 };
    const book = new LeaseBook({ clock, ttlMs: Number.POSITIVE_INFINITY, load: () => record, save: (next) => void (record = next) });
    expect(await book.acquire("tab", 0)).toEqual({ epoch: 1, ttlMs: Number.POSITIVE_INFINITY });
    clock.advance(365 * 24 * 3_600_000);
    await expect(book.acquire("object", 0)).rejects.toThrow(/tab holds it/);
  });
});
