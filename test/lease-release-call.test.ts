import fc from "fast-check";
import { describe, expect, it } from "vitest";
import { LeaseBook, type LeaseRecord } from "../src/follow/arbiter.ts";
import { packPushes } from "../src/follow/chunks.ts";
import { ObjectEnd } from "../src/follow/object-end.ts";
import { encodeFollowMessage } from "../src/follow/wire.ts";
import { createRegistry, Harness, MemoryStorage, type Storage } from "../src/index.ts";
import { createManualClock } from "../src/testing/clock.ts";
import { emptyBatch } from "../src/testing/storage-conformance.ts";
import { ctx, flush } from "./support.ts";

// Review (session 9): the follow link's `lease.release(place, epoch, position, heir?)` call (no part of the library
// makes it: a tab releases with a `release` message, which the object takes only once its copy holds the position)
// went straight to the LeaseBook with any position. The holder could release at a position past the object's copy —
// 9007199254740991, say — and then no place could ever take the lease again: an acquire needs a head at or past the
// release, and the object, also after a restart, takes a release only when its copy holds it. The conversation was
// bricked for good. A release past the copy's head is now refused (LeaseNotHeld), the record unchanged.

async function objectWorld(shared: { record: LeaseRecord; storage: Storage }) {
  const clock = createManualClock(1_000);
  const book = new LeaseBook({ clock, ttlMs: 5_000, load: () => shared.record, save: (next) => void (shared.record = next) });
  const end = await ObjectEnd.start({
    place: "object",
    storage: shared.storage,
    book,
    clock,
    watchExpiry: false,
    open: (storage, lease) => Harness.open(storage, { registry: createRegistry(), clock, lease }, ctx),
  });
  const send = async (message: Parameters<typeof encodeFollowMessage>[0]) => {
    const replies: Array<Record<string, unknown>> = [];
    await end.receive(
      encodeFollowMessage(message),
      (frame) => replies.push(JSON.parse(frame)),
      () => true,
    );
    return replies;
  };
  return { clock, book, end, send };
}

describe("lease.release called over the link cannot strand the lease (S11, decision 0029)", () => {
  it("the holder's release past the object's copy is refused, the record unchanged; the object still takes the lease at its expiry", async () => {
    const shared = { record: { epoch: 0 } as LeaseRecord, storage: new MemoryStorage() as Storage };
    const w = await objectWorld(shared);
    expect(await w.send({ type: "call", id: "1", topic: "lease", method: "acquire", args: ["tab", 0] })).toMatchObject([
      { value: { epoch: 1 } },
    ]);
    const [load] = packPushes([{ ...emptyBatch(), fence: { epoch: 1, position: 1 } }]);
    await w.send({ type: "push", from: "tab", epoch: 1, ...load! });
    expect(w.end.head).toBe(1);

    const far = await w.send({ type: "call", id: "2", topic: "lease", method: "release", args: ["tab", 1, Number.MAX_SAFE_INTEGER] });
    expect(far).toMatchObject([{ id: "2", error: { name: "LeaseNotHeld" } }]); // before: { value: null }
    expect(shared.record).toMatchObject({ epoch: 1, holder: "tab" });
    // Before: releasedAt 9007199254740991 — no place could take it, the object neither at its expiry nor at a restart.
    w.clock.advance(6_000);
    await w.end.checkExpiry();
    expect(w.end.harness).toBeDefined();
    expect((await w.end.harness!)!.lease).toMatchObject({ place: "object", epoch: 2 });
    await (await w.end.harness!)!.close(ctx);
  });

  it("a release at or before the copy's head is answered as before (the lease free there)", async () => {
    const shared = { record: { epoch: 0 } as LeaseRecord, storage: new MemoryStorage() as Storage };
    const w = await objectWorld(shared);
    await w.send({ type: "call", id: "1", topic: "lease", method: "acquire", args: ["tab", 0] });
    const [load] = packPushes([{ ...emptyBatch(), fence: { epoch: 1, position: 1 } }]);
    await w.send({ type: "push", from: "tab", epoch: 1, ...load! });
    expect(await w.send({ type: "call", id: "2", topic: "lease", method: "release", args: ["tab", 1, 1] })).toMatchObject([
      { id: "2", value: null },
    ]);
    expect(shared.record).toMatchObject({ epoch: 1, releasedAt: 1 });
    // Another start of the object (its next instance) takes a release its copy holds.
    const next = await objectWorld(shared);
    await flush(5);
    expect((await next.end.harness!)!.lease).toMatchObject({ place: "object", epoch: 2 });
    await (await next.end.harness!)!.close(ctx);
  });

  it("property: whatever position the holder releases at, some place can take the lease afterwards (fast-check)", async () => {
    await fc.assert(
      fc.asyncProperty(fc.integer({ min: 0, max: Number.MAX_SAFE_INTEGER }), fc.boolean(), async (position, toObject) => {
        const shared = { record: { epoch: 0 } as LeaseRecord, storage: new MemoryStorage() as Storage };
        const w = await objectWorld(shared);
        await w.send({ type: "call", id: "1", topic: "lease", method: "acquire", args: ["tab", 0] });
        const [load] = packPushes([{ ...emptyBatch(), fence: { epoch: 1, position: 1 } }]);
        await w.send({ type: "push", from: "tab", epoch: 1, ...load! });
        await w.send({
          type: "call",
          id: "2",
          topic: "lease",
          method: "release",
          args: toObject ? ["tab", 1, position, "object"] : ["tab", 1, position],
        });
        // The object's next instance (or this one at the expiry) holds the lease again.
        w.clock.advance(6_000);
        await w.end.checkExpiry();
        const next = w.end.harness ? w : await objectWorld(shared);
        await flush(5);
        expect(next.end.harness).toBeDefined();
        const harness = (await next.end.harness!)!;
        expect(harness.readOnly).toBe(false);
        await harness.close(ctx);
      }),
      { numRuns: 40 },
    );
  });
});
