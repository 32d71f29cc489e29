import fc from "fast-check";
import { describe, expect, it } from "vitest";
import type { Json } from "../src/base/json.ts";
import { LEAVING_GRACE_MS, LeaseBook, type LeaseRecord } from "../src/follow/arbiter.ts";
import { packPushes } from "../src/follow/chunks.ts";
import { ObjectEnd } from "../src/follow/object-end.ts";
import { encodeFollowMessage, FOLLOW_TOPICS, type TabMessage } from "../src/follow/wire.ts";
import { createRegistry, Harness, MemoryStorage, type Storage } from "../src/index.ts";
import { createManualClock } from "../src/testing/clock.ts";
import { emptyBatch } from "../src/testing/storage-conformance.ts";
import { ctx, flush } from "./support.ts";

// Decision 0101: a closing tab's worker often never gets the task that would send its release (decision 0100: 11 of
// 20 closes handed over with 50 ms synchronous stretches), and the object then waited out the whole lease. The page's
// own socket says `lease.leaving(place, epoch, A)` at `pagehide` (A: the object's acknowledged head): the lease stays
// the tab's for a grace (1 s on the object's clock) in which the worker's own release wins; after it the object takes
// the lease as after a crash, from what its copy holds (at least A). Before: the object served no `lease.leaving`
// (refused "there is no call lease.leaving"), and a lone close waited for the lease's expiry (here 10 minutes).

const TTL_MS = 600_000;

async function objectWorld(shared: { record: LeaseRecord; storage: Storage }, topics = FOLLOW_TOPICS) {
  const clock = createManualClock(1_000);
  const book = new LeaseBook({ clock, ttlMs: TTL_MS, load: () => shared.record, save: (next) => void (shared.record = next) });
  const end = await ObjectEnd.start({
    place: "object",
    storage: shared.storage,
    book,
    clock,
    watchExpiry: false,
    topics,
    open: (storage, lease) => Harness.open(storage, { registry: createRegistry(), clock, lease }, ctx),
  });
  /** Sends `message` (or a raw frame) on a connection of its own (`worker`, `page`), the door saying yes to all. */
  const sendRaw = async (frame: string, connection: string) => {
    const replies: Array<Record<string, unknown>> = [];
    await end.receive(
      frame,
      (reply) => replies.push(JSON.parse(reply)),
      () => true,
      connection,
    );
    return replies;
  };
  const send = (message: TabMessage, connection = "worker") => sendRaw(encodeFollowMessage(message), connection);
  const push = (from: number, to: number, epoch = 1) => {
    const batches = [];
    for (let position = from; position <= to; position++) batches.push({ ...emptyBatch(), fence: { epoch, position } });
    const [load] = packPushes(batches);
    return send({ type: "push", from: "tab", epoch, ...load! });
  };
  const leaving = (id: string, args: unknown[]) =>
    send({ type: "call", id, topic: "lease", method: "leaving", args: args as Json[] }, "page");
  return { clock, book, end, send, sendRaw, push, leaving };
}

/** The tab holds epoch 1 and pushed positions 1..`head`. */
async function heldBy(head: number, topics = FOLLOW_TOPICS) {
  const shared = { record: { epoch: 0 } as LeaseRecord, storage: new MemoryStorage() as Storage };
  const w = await objectWorld(shared, topics);
  expect(await w.send({ type: "call", id: "a", topic: "lease", method: "acquire", args: ["tab", 0] })).toMatchObject([
    { value: { epoch: 1 } },
  ]);
  if (head > 0) await w.push(1, head);
  expect(w.end.head).toBe(head);
  return { ...w, shared };
}

async function takenEpoch(w: { end: ObjectEnd }): Promise<number | undefined> {
  const harness = w.end.harness && (await w.end.harness);
  return harness && !harness.readOnly ? harness.lease?.epoch : undefined;
}

async function closeAll(w: { end: ObjectEnd }): Promise<void> {
  const harness = w.end.harness && (await w.end.harness);
  await harness?.close(ctx);
}

describe("a leaving page's lease.leaving: the worker's release wins within a grace, else the object takes over (S4, decision 0101)", () => {
  it("a lone leaving: nothing taken within the grace, the object takes the lease at A (epoch 2, restarts as after a crash) after it", async () => {
    const w = await heldBy(2);
    // Before: [{ id: "l1", error: { name: "FollowMessageRefused" } }] ("there is no call lease.leaving").
    expect(await w.leaving("l1", ["tab", 1, 2])).toEqual([{ type: "answer", id: "l1", value: null }]);
    expect(w.shared.record).toMatchObject({ epoch: 1, holder: "tab", leaving: 2, expiresAt: 1_000 + LEAVING_GRACE_MS });
    expect(w.end.expiresAt).toBe(1_000 + LEAVING_GRACE_MS); // the object's alarm goes there
    w.clock.advance(LEAVING_GRACE_MS - 1);
    await w.end.checkExpiry();
    expect(await takenEpoch(w)).toBeUndefined(); // the worker's release may still come
    w.clock.advance(1);
    await w.end.checkExpiry();
    // Before: not taken until the lease's expiry, 10 minutes on.
    expect(await takenEpoch(w)).toBe(2);
    expect(w.shared.record).toMatchObject({ epoch: 2, holder: "object" });
    expect(w.shared.record.leaving).toBeUndefined();
    expect(w.end.head).toBeGreaterThan(2); // the takeover's recovery is epoch 2's first transaction, after A
    await closeAll(w);
  });

  it("the worker's rest and release within the grace win: the lease is released at its position P > A and taken there", async () => {
    const w = await heldBy(2);
    expect(await w.leaving("l1", ["tab", 1, 2])).toMatchObject([{ value: null }]);
    w.clock.advance(LEAVING_GRACE_MS / 2);
    // The worker's first task after pagehide: the rest (3, 4) and the release at 4.
    expect(await w.push(3, 4)).toMatchObject([{ type: "ack", head: 4 }]);
    // Heard from, the leaving holder is given one grace more, never the whole lease again.
    expect(w.shared.record.expiresAt).toBe(1_000 + LEAVING_GRACE_MS / 2 + LEAVING_GRACE_MS);
    expect(await w.send({ type: "release", from: "tab", epoch: 1, position: 4 })).toMatchObject([{ type: "taken", epoch: 2 }]);
    expect(await takenEpoch(w)).toBe(2);
    // Epoch 2 begins after the worker's last transaction: nothing the tab stored is a fork.
    const epochs = await w.end.harness!.then((h) => h.storage.readEpochs?.());
    expect(epochs?.at(-1)).toEqual({ epoch: 2, start: 5 });
    await closeAll(w);
  });

  it("the worker's release without the page's leaving is taken as before, and a leaving that comes after it is refused as stale, changing nothing", async () => {
    const w = await heldBy(1);
    expect(await w.send({ type: "release", from: "tab", epoch: 1, position: 1 })).toMatchObject([{ type: "taken", epoch: 2 }]);
    const record = { ...w.shared.record };
    expect(await w.leaving("late", ["tab", 1, 1])).toMatchObject([{ id: "late", error: { name: "StaleEpoch" } }]);
    expect(w.shared.record).toEqual(record);
    expect(await takenEpoch(w)).toBe(2);
    await closeAll(w);
  });

  it("an old epoch's leaving and a non-holder's are refused (StaleEpoch, LeaseNotHeld); the record and the lease's end unchanged", async () => {
    const w = await heldBy(1);
    const before = { ...w.shared.record };
    expect(await w.leaving("s", ["tab", 2, 1])).toMatchObject([{ error: { name: "StaleEpoch" } }]); // a future epoch
    // The tab's restarted incarnation takes epoch 2; its dead one's leaving at epoch 1 is stale.
    expect(await w.send({ type: "call", id: "a2", topic: "lease", method: "acquire", args: ["tab", 1] })).toMatchObject([
      { value: { epoch: 2 } },
    ]);
    const held = { ...w.shared.record };
    expect(held).toMatchObject({ epoch: 2, holder: "tab" });
    expect(await w.leaving("old", ["tab", 1, 1])).toMatchObject([{ error: { name: "StaleEpoch" } }]);
    expect(await w.leaving("other", ["tab-b", 2, 1])).toMatchObject([{ error: { name: "LeaseNotHeld" } }]);
    expect(await w.leaving("past", ["tab", 2, 5])).toMatchObject([{ error: { name: "LeaseNotHeld" } }]); // the copy lacks 5
    expect(await w.leaving("own", ["object", 2, 1])).toMatchObject([{ error: { name: "NotAuthorized" } }]);
    expect(w.shared.record).toEqual(held);
    expect(before.epoch).toBe(1);
    w.clock.advance(10 * LEAVING_GRACE_MS);
    await w.end.checkExpiry();
    expect(await takenEpoch(w)).toBeUndefined(); // the lease is the tab's for its whole time still
  });

  it("duplicates are harmless: the same call again gets the same answer, another leaving does not move the grace, one takeover", async () => {
    const w = await heldBy(2);
    expect(await w.leaving("l1", ["tab", 1, 2])).toMatchObject([{ value: null }]);
    const first = { ...w.shared.record };
    w.clock.advance(LEAVING_GRACE_MS - 100);
    expect(await w.leaving("l1", ["tab", 1, 2])).toMatchObject([{ id: "l1", value: null }]);
    expect(await w.leaving("l2", ["tab", 1, 1])).toMatchObject([{ id: "l2", value: null }]);
    expect(w.shared.record).toEqual(first);
    w.clock.advance(100);
    await w.end.checkExpiry();
    await w.end.checkExpiry();
    expect(await takenEpoch(w)).toBe(2);
    expect(w.shared.record.epoch).toBe(2);
    expect(await w.leaving("l3", ["tab", 1, 2])).toMatchObject([{ error: { name: "StaleEpoch" } }]);
    expect(w.shared.record.epoch).toBe(2);
    await closeAll(w);
  });

  it("the page's socket does not become the place's speaker: the object's calls of the holder still go to the worker's connection", async () => {
    const w = await heldBy(1);
    const frames: string[] = [];
    await w.end.receive(
      encodeFollowMessage({ type: "call", id: "r", topic: "lease", method: "renew", args: ["tab", 1] }),
      (f) => frames.push(f),
      () => true,
      "worker",
    );
    await w.leaving("l1", ["tab", 1, 1]);
    void w.end.call("forward", "probe", [], { timeoutMs: 10 }).catch(() => {});
    await flush(3);
    expect(frames.some((frame) => frame.includes('"forward"'))).toBe(true);
  });

  it("an object that knows no lease.leaving refuses it typed (FollowMessageRefused), and the link goes on: a push after it is applied", async () => {
    const { leaving: _new, ...older } = FOLLOW_TOPICS.lease!.methods;
    const w = await heldBy(1, { ...FOLLOW_TOPICS, lease: { ...FOLLOW_TOPICS.lease!, methods: older } });
    expect(await w.leaving("l1", ["tab", 1, 1])).toMatchObject([
      { id: "l1", error: { name: "FollowMessageRefused", message: expect.stringContaining("lease.leaving") } },
    ]);
    expect(await w.push(2, 2)).toMatchObject([{ type: "ack", head: 2 }]);
    expect(w.shared.record).toMatchObject({ epoch: 1, holder: "tab" });
  });

  it("property: any leaving frame at the object is answered (null or a typed error), only ever shortens the holder's lease, and the lease can be taken after (fast-check)", async () => {
    const arg = fc.oneof(
      fc.constantFrom("tab", "tab-b", "object", "", 1, 2, 0, -1, 1.5, null),
      fc.integer({ min: -2, max: 4 }),
      fc.jsonValue({ maxDepth: 2 }),
    );
    const frame = fc.oneof(
      fc.tuple(arg, arg, arg).map((args) => ({ type: "call", id: "p", topic: "lease", method: "leaving", args })),
      fc.array(arg, { maxLength: 5 }).map((args) => ({ type: "call", id: "p", topic: "lease", method: "leaving", args })),
      fc.dictionary(fc.string({ maxLength: 8 }), fc.jsonValue({ maxDepth: 2 }), { maxKeys: 4 }).map((extra) => ({
        type: "call",
        id: "p",
        topic: "lease",
        method: "leaving",
        args: ["tab", 1, 1],
        ...extra,
      })),
    );
    await fc.assert(
      fc.asyncProperty(frame, async (message) => {
        const w = await heldBy(2);
        const before = { ...w.shared.record };
        const replies = await w.sendRaw(JSON.stringify(message), "page");
        expect(replies).toHaveLength(1);
        const reply = replies[0]!;
        if ("error" in reply)
          expect(["FollowMessageRefused", "StaleEpoch", "LeaseNotHeld", "NotAuthorized"]).toContain((reply.error as { name: string }).name);
        else expect(reply).toMatchObject({ type: "answer", value: null });
        const after = w.shared.record;
        expect(after.epoch).toBe(before.epoch);
        expect(after.holder).toBe(before.holder);
        expect(after.expiresAt!).toBeLessThanOrEqual(before.expiresAt!);
        if ("error" in reply) expect(after).toEqual(before);
        // Whatever it said, the object takes the lease once it lapsed (a grace, or the whole lease).
        w.clock.advance(TTL_MS);
        await w.end.checkExpiry();
        expect(await takenEpoch(w)).toBe(2);
        await closeAll(w);
      }),
      { numRuns: 60 },
    );
  });
});
