import { describe, expect, it } from "vitest";
import { memoryArbiter } from "../src/follow/arbiter.ts";
import { Arrival, Departure, type HandOverMessage } from "../src/follow/handover.ts";
import { createRegistry, Harness, LeaseNotHeld, MemoryStorage, type Storage } from "../src/index.ts";
import { createManualClock } from "../src/testing/clock.ts";
import { Link } from "../src/testing/two-places/link.ts";
import { ctx, flush } from "./support.ts";

// Review of decision 0029's hand-over: what the leaving place committed before it handed over must reach the
// taking place, however slowly the link carries it, as long as the leaving place is heard from.

describe("the hand-over keeps what the leaving place committed (decision 0029)", () => {
  it("S11: a hand-over longer than the lease's rest (more than one push, acknowledgements lost) does not let the object take over from part of the log", async () => {
    const clock = createManualClock(1_000);
    const arbiter = memoryArbiter({ clock, ttlMs: 3_000 });
    const link = new Link<HandOverMessage>();
    const tabStorage = new MemoryStorage();
    const tab = await Harness.open(tabStorage, { registry: createRegistry(), clock, lease: { place: "tab", arbiter } }, ctx);
    const root = await tab.root(ctx);
    // More transactions than one push carries (64).
    for (let n = 0; n < 100; n++) await root.commit((tx) => tx.setDocument("notes", `note-${n}`, n), ctx);
    const object = await Arrival.start({
      place: "object",
      storage: new MemoryStorage(),
      arbiter,
      clock,
      send: (message) => link.send("tab", message),
      open: (storage: Storage, lease) => Harness.open(storage, { registry: createRegistry(), clock, lease }, ctx),
    });
    link.attach("object", (message) => object.receive(message));
    const mark = await tab.handOver(ctx);
    const departure = new Departure({ place: "tab", storage: tabStorage, mark, clock, send: (message) => link.send("object", message) });
    link.attach("tab", (message) => departure.receive(message));
    await departure.start();
    // For 4 s of the harness clock every push arrives (resent every 200 ms) but every answer to the tab is lost.
    const healAt = clock.now() + 4_000;
    for (let round = 0; round < 2_000 && !departure.done; round++) {
      await flush(2);
      const next = link.inFlight[0];
      if (!next) clock.next();
      else await link.step(0, next.to === "tab" && clock.now() < healAt ? "drop" : "deliver");
    }
    expect(departure.done).toBe(true);
    const harness = (await object.harness)!;
    // The tab's whole stretch is in the object's copy, and the object's epoch begins after it.
    expect(harness.lease).toMatchObject({ place: "object", epoch: 2 });
    const notes = await harness.storage.listDocuments("notes");
    expect(notes).toHaveLength(100);
    await harness.close(ctx);
  });

  it("S11: a push carrying a transaction under an epoch the arbiter never granted is refused, nothing applied; the object still takes over at epoch 2", async () => {
    const clock = createManualClock(1_000);
    const arbiter = memoryArbiter({ clock, ttlMs: 30_000 });
    const tabStorage = new MemoryStorage();
    const tab = await Harness.open(tabStorage, { registry: createRegistry(), clock, lease: { place: "tab", arbiter } }, ctx);
    const root = await tab.root(ctx);
    await root.commit((tx) => tx.setDocument("notes", "real", 1), ctx);
    const log = await tabStorage.readLog(0, 100);
    const objectStorage = new MemoryStorage();
    const sent: HandOverMessage[] = [];
    const object = await Arrival.start({
      place: "object",
      storage: objectStorage,
      arbiter,
      clock,
      send: (message) => sent.push(message),
      open: (storage: Storage, lease) => Harness.open(storage, { registry: createRegistry(), clock, lease }, ctx),
    });
    // The holder's push, its first transaction re-stamped under epoch 99 (the arbiter minted 1) and rewritten.
    const first = log[0]!;
    const forged = {
      ...first,
      fence: { epoch: 99, position: first.fence.position },
      documents: [{ scope: "notes", key: "forged", value: 1 }],
    };
    await expect(object.receive({ type: "push", from: "tab", batches: [forged] })).rejects.toThrow(LeaseNotHeld);
    expect(await objectStorage.listDocuments("notes")).toEqual([]);
    // The honest push and the hand-over go on as if the forged one never came.
    const mark = await tab.handOver(ctx);
    await object.receive({ type: "push", from: "tab", batches: await tabStorage.readLog(0, 100) });
    await object.receive({ type: "release", from: "tab", epoch: mark.epoch, position: mark.position });
    expect(sent.at(-1)).toEqual({ type: "taken", epoch: 2 });
    const harness = (await object.harness)!;
    expect((await harness.storage.listDocuments("notes")).map((note) => note.key)).toEqual(["real"]);
    await harness.close(ctx);
    await flush(1);
  });

  it("S11: a copy whose store fails in the middle of a push keeps what it stored: the next push continues from there (before: LogOutOfOrder for good)", async () => {
    const clock = createManualClock(1_000);
    const arbiter = memoryArbiter({ clock, ttlMs: 30_000 });
    const tabStorage = new MemoryStorage();
    const tab = await Harness.open(tabStorage, { registry: createRegistry(), clock, lease: { place: "tab", arbiter } }, ctx);
    const root = await tab.root(ctx);
    for (let n = 0; n < 3; n++) await root.commit((tx) => tx.setDocument("notes", `note-${n}`, n), ctx);
    const log = await tabStorage.readLog(0, 100);
    const copy = new MemoryStorage();
    // The copy's store fails once, at the push's third transaction (a platform's storage hiccup, say).
    let failAt: number | undefined = log[2]!.fence.position;
    const sent: HandOverMessage[] = [];
    const object = await Arrival.start({
      place: "object",
      storage: copy,
      arbiter,
      clock,
      send: (message) => sent.push(message),
      open: (storage: Storage, lease) => Harness.open(storage, { registry: createRegistry(), clock, lease }, ctx),
      apply: (batch) => {
        if (batch.fence.position !== failAt) return copy.apply(batch);
        failAt = undefined;
        return Promise.reject(new Error("storage hiccup"));
      },
    });
    await expect(object.receive({ type: "push", from: "tab", batches: log })).rejects.toThrow("storage hiccup");
    expect(object.head).toBe(log[1]!.fence.position);
    // The tab sends the same again (it heard no acknowledgement): the copy continues and acknowledges the whole.
    await object.receive({ type: "push", from: "tab", batches: log });
    expect(sent.at(-1)).toEqual({ type: "ack", head: log.at(-1)!.fence.position });
    expect((await copy.listDocuments("notes")).map((note) => note.key)).toEqual(["note-0", "note-1", "note-2"]);
    await tab.close(ctx);
  });
});
