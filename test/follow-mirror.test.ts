import fc from "fast-check";
import { describe, expect, it } from "vitest";
import { FollowMessageRefused, LeaseNotHeld, NotAuthorized, StaleEpoch } from "../src/errors.ts";
import { memoryArbiter } from "../src/follow/arbiter.ts";
import { FollowLink } from "../src/follow/link-client.ts";
import { Mirror, remoteArbiter } from "../src/follow/mirror.ts";
import { ObjectEnd } from "../src/follow/object-end.ts";
import { encodeFollowMessage } from "../src/follow/wire.ts";
import { createRegistry, Harness, type Json, MemoryStorage } from "../src/index.ts";
import { utf8Length } from "../src/limits.ts";
import { createManualClock } from "../src/testing/clock.ts";
import { followWorld, rows } from "./follow-support.ts";
import { ctx, hostileJson, runUntil } from "./support.ts";

// Issue 27 items 2–3 (decision 0031): the tab's mirror pushes every stored transaction to the object's copy,
// coalesced, resent from the durable tail after a lost link, trimmed on acknowledgement; the hand-over on top.

describe("the mirror: every stored transaction live at the object (issue 27 item 2)", () => {
  it("S12 in the tab: the object's copy holds exactly the tab's rows, acknowledged up to the tab's head, the tab's tail trimmed", async () => {
    const world = await followWorld();
    world.tab.resume();
    await runUntil(world.clock, async () => (await world.tab.getTask(world.taskId, ctx))?.state.status === "terminal");
    const head = world.tab.lease!.position;
    await runUntil(world.clock, () => world.mirror.acknowledged >= head);
    expect(await rows(world.copy)).toEqual(await rows(world.tabStorage));
    expect(world.printed.map(([place]) => place)).toEqual(["tab", "tab", "tab", "tab", "tab"]);
    expect(await world.tabStorage.readLog(0, 100)).toEqual([]);
    // Coalesced: fewer push rounds than transactions, and the bytes on the wire close to the batches' own.
    const stored = head;
    expect(world.mirror.stats.rounds).toBeLessThanOrEqual(stored);
    await world.tab.close(ctx);
  });

  it("replicated bytes per step ≤ 1.2× the step's own batch (measured over the counter's steps)", async () => {
    const world = await followWorld({ to: 20 });
    let own = 0;
    world.tab.onLog((batch) => void (own += utf8Length(JSON.stringify(batch))));
    world.tab.resume();
    await runUntil(world.clock, async () => (await world.tab.getTask(world.taskId, ctx))?.state.status === "terminal");
    await runUntil(world.clock, () => world.mirror.acknowledged >= world.tab.lease!.position);
    const bytes = world.mirror.stats.bytes;
    console.log(
      `mirror: ${world.mirror.stats.rounds} rounds, ${world.mirror.stats.frames} frames, ${bytes} bytes for ${own} bytes of batches (${(bytes / own).toFixed(3)}×)`,
    );
    expect(bytes / own).toBeLessThanOrEqual(1.2);
    await world.tab.close(ctx);
  });

  it("the copy's own apply (a follower harness's, say) stores each pushed transaction once, in log order", async () => {
    const applied: number[] = [];
    const world = await followWorld({
      apply: async (copy, batch) => {
        await copy.apply(batch);
        applied.push(batch.fence.position);
      },
    });
    world.tab.resume();
    await runUntil(world.clock, async () => (await world.tab.getTask(world.taskId, ctx))?.state.status === "terminal");
    const head = world.tab.lease!.position;
    await runUntil(world.clock, () => world.mirror.acknowledged >= head);
    expect(applied).toEqual(Array.from({ length: head }, (_, index) => index + 1));
    await world.tab.close(ctx);
  });

  it("a lost link: what was stored while it was down is pushed from the durable tail when it is up again", async () => {
    const world = await followWorld();
    world.tab.resume();
    await runUntil(world.clock, () => world.printed.length >= 2);
    world.setUp(false);
    await runUntil(world.clock, async () => (await world.tab.getTask(world.taskId, ctx))?.state.status === "terminal");
    const head = world.tab.lease!.position;
    expect(world.mirror.acknowledged).toBeLessThan(head);
    expect((await world.tabStorage.readLog(0, 100)).length).toBeGreaterThan(0);
    world.setUp(true);
    await runUntil(world.clock, () => world.mirror.acknowledged >= head);
    expect(await rows(world.copy)).toEqual(await rows(world.tabStorage));
    await world.tab.close(ctx);
  });

  it("whenAcknowledged(P) resolves once the object holds P, not before", async () => {
    const world = await followWorld();
    world.setUp(false);
    world.tab.resume();
    await runUntil(world.clock, () => world.printed.length >= 1);
    const position = world.tab.lease!.position;
    let acknowledged = false;
    void world.mirror.whenAcknowledged(position, ctx).then(() => (acknowledged = true));
    await runUntil(world.clock, () => world.printed.length >= 2);
    expect(acknowledged).toBe(false);
    world.setUp(true);
    await runUntil(world.clock, () => acknowledged);
    expect((await world.copy.load()).log!.position).toBeGreaterThanOrEqual(position);
    await world.tab.close(ctx);
  });
});

describe("the tab's side without the object", () => {
  it("a harness without a lease has nothing to mirror: Mirror says how to open it", async () => {
    const clock = createManualClock(0);
    const harness = await Harness.open(new MemoryStorage(), { registry: createRegistry(), clock }, ctx);
    const link = new FollowLink({ clock, send: () => {} });
    expect(() => new Mirror({ harness, link, clock })).toThrow(/lease option/);
    await harness.close(ctx);
  });

  it("an open under remoteArbiter whose object never answers fails with ConnectionLost after the call's timeout (nothing written)", async () => {
    const clock = createManualClock(0);
    const link = new FollowLink({ clock, send: () => {}, callTimeoutMs: 1_000 });
    link.connected();
    const storage = new MemoryStorage();
    const opening = Harness.open(
      storage,
      { registry: createRegistry(), clock, lease: { place: "tab", arbiter: remoteArbiter(link) } },
      ctx,
    );
    await runUntil(clock, () => clock.now() >= 1_000);
    await expect(opening).rejects.toMatchObject({ name: "ConnectionLost" });
    expect((await storage.load()).log).toBeUndefined();
  });
});

describe("the hand-over over the link (issue 27 item 3)", () => {
  it("S4/S12: handOver() pushes the rest, releases at P; the object takes epoch 2 with the restarts counted and counts on", async () => {
    let handed: { position: number } | undefined;
    // The tab leaves while tick 2's step runs (printed, its next checkpoint not stored yet).
    const world: Awaited<ReturnType<typeof followWorld>> = await followWorld({
      onLine: (place, line) => {
        if (place === "tab" && line === "tick 2") queueMicrotask(() => void world.mirror.handOver(ctx).then((mark) => (handed = mark)));
      },
    });
    world.tab.resume();
    await runUntil(world.clock, () => handed !== undefined);
    const object = (await world.end.harness)!;
    expect(object.lease).toMatchObject({ place: "object", epoch: 2 });
    expect(object.recovery.stop).toBe("crash");
    expect(object.recovery.tasks).toEqual([{ id: world.taskId, kind: "example.counter", restarts: 1 }]);
    await runUntil(world.clock, async () => (await object.getTask(world.taskId, ctx))?.state.status === "terminal");
    const lines = world.printed.map(([, line]) => line);
    expect(lines).toEqual(["tick 1", "tick 2", "tick 3", "tick 4", "tick 5"]);
    expect(world.printed.slice(0, 2).every(([place]) => place === "tab")).toBe(true);
    expect(world.printed.slice(2).every(([place]) => place === "object")).toBe(true);
    expect(await world.copy.query("SELECT epoch, start FROM pi_durable_epochs ORDER BY epoch")).toEqual([
      { epoch: 1, start: 1 },
      { epoch: 2, start: handed!.position + 1 },
    ]);
    expect(world.tab.closed).toBe(true);
    await object.close(ctx);
  });

  it("leave(mark) sends the rest and the release in the same tick: a tab that dies right after is still taken over at P", async () => {
    const world = await followWorld();
    world.tab.resume();
    await runUntil(world.clock, () => world.printed.length >= 2);
    world.hold(true); // the object is slow: nothing it would acknowledge arrives yet
    await runUntil(world.clock, () => world.printed.length >= 3);
    const mark = await world.tab.handOver(ctx);
    const sent = world.sent.toObject.length;
    const mirror = world.mirror;
    void mirror.leave(mark, ctx);
    const frames = world.sent.toObject.slice(sent).map((frame) => JSON.parse(frame));
    expect(frames.at(-1)).toEqual({ type: "release", from: "tab", epoch: 1, position: mark.position });
    expect(
      frames.some(
        (frame) =>
          frame.type === "push" && frame.batches.some((batch: { fence: { position: number } }) => batch.fence.position === mark.position),
      ),
    ).toBe(true);
    mirror.stop(); // the tab dies in the next task: nothing more is sent
    world.hold(false);
    await runUntil(world.clock, () => world.end.harness !== undefined);
    const object = (await world.end.harness)!;
    expect(object.lease).toMatchObject({ place: "object", epoch: 2 });
    expect((await world.copy.query("SELECT epoch, start FROM pi_durable_epochs ORDER BY epoch")).at(-1)).toEqual({
      epoch: 2,
      start: mark.position + 1,
    });
    await object.close(ctx);
  });

  it("leave(mark) when the mirror's buffer does not reach the mark: the rest read from the durable tail and the release sent within the leaving task (no next round)", async () => {
    // A mirror sees only what is stored after it began (the worker attaches it after the open's own transaction),
    // and a transaction's log may reach it after the hand-over's mark. Before, leave sent nothing then and left the
    // release to a next round that a closing page never runs: the object waited for the lease's expiry.
    const world = await followWorld();
    await runUntil(world.clock, () => world.mirror.acknowledged >= world.tab.lease!.position);
    world.mirror.stop();
    const root = await world.tab.root(ctx);
    for (const key of ["a", "b"]) await root.commit((tx) => tx.setDocument("late", key, { key }), ctx);
    world.hold(true); // the object is slow: nothing it would acknowledge arrives
    const mirror = new Mirror({ harness: world.tab, link: world.link, clock: world.clock });
    const mark = await world.tab.handOver(ctx, { drain: false });
    const sent = world.sent.toObject.length;
    void mirror.leave(mark, ctx);
    for (let turn = 0; turn < 50; turn++) await Promise.resolve(); // the leaving task's microtasks, no timer
    mirror.stop(); // the tab dies: nothing more is sent
    const frames = world.sent.toObject.slice(sent).map((frame) => JSON.parse(frame));
    expect(frames.at(-1)).toEqual({ type: "release", from: "tab", epoch: 1, position: mark.position });
    const pushed = frames.flatMap((frame) =>
      frame.type === "push" ? frame.batches.map((batch: { fence: { position: number } }) => batch.fence.position) : [],
    );
    expect(pushed).toContain(mark.position);
    world.hold(false);
    const before = world.record().expiresAt;
    await runUntil(world.clock, () => world.end.harness !== undefined);
    // Taken at the release, not at the expiry.
    expect(world.clock.now()).toBeLessThan(before ?? Number.POSITIVE_INFINITY);
    const object = (await world.end.harness)!;
    expect((await world.copy.query("SELECT epoch, start FROM pi_durable_epochs ORDER BY epoch")).at(-1)).toEqual({
      epoch: 2,
      start: mark.position + 1,
    });
    await object.close(ctx);
  });

  it("a stale epoch's push is refused with StaleEpoch after the takeover, and nothing of it is applied", async () => {
    const world = await followWorld();
    world.tab.resume();
    await runUntil(world.clock, () => world.printed.length >= 1);
    void world.mirror.handOver(ctx);
    await runUntil(world.clock, () => world.end.harness !== undefined);
    const object = (await world.end.harness)!;
    const before = await rows(world.copy);
    const head = before.head!.position;
    const late = {
      fence: { epoch: 1, position: head + 1 },
      tasks: [],
      conversations: [],
      entries: [],
      submissions: [],
      documents: [{ scope: "x", key: "y", value: 1 }],
    };
    const replies = world.sent.toTab.length;
    await world.deliver(encodeFollowMessage({ type: "push", from: "tab", epoch: 1, batches: [late], parts: [] }));
    const refusal = JSON.parse(world.sent.toTab[replies]!);
    expect(refusal).toMatchObject({ type: "refused", head, error: { name: "StaleEpoch" } });
    expect(refusal.error.stack).toBeUndefined(); // the object's stack stays there
    // Where the object's log stands, so the fenced tab can find its fork (decision 0032).
    expect(refusal.epochs).toEqual(before.epochs);
    expect(await rows(world.copy)).toEqual(before);
    await object.close(ctx);
  });

  it("a push from a place that does not hold the lease, or a caller authorize refuses, is refused and not applied", async () => {
    let allow = true;
    const world = await followWorld({ authorize: (action) => allow || action.startsWith("lease.") });
    const before = await rows(world.copy);
    const batch = {
      fence: { epoch: 1, position: (before.head?.position ?? 0) + 1 },
      tasks: [],
      conversations: [],
      entries: [],
      submissions: [],
      documents: [],
    };
    const replies = world.sent.toTab.length;
    await world.deliver(encodeFollowMessage({ type: "push", from: "intruder", epoch: 1, batches: [batch], parts: [] }));
    allow = false;
    await world.deliver(encodeFollowMessage({ type: "push", from: "tab", epoch: 1, batches: [batch], parts: [] }));
    const answers = world.sent.toTab.slice(replies).map((frame) => JSON.parse(frame).error?.name);
    expect(answers).toEqual([new LeaseNotHeld("x", "").name, new NotAuthorized("x", "").name]);
    expect(await rows(world.copy)).toEqual(before);
    await world.tab.close(ctx);
  });

  it("S11: the holder's push at its own epoch carrying a transaction stamped with an epoch never minted is refused, nothing applied; the hand-over still takes over at epoch 2", async () => {
    let handed: { position: number } | undefined;
    let forged = false;
    const world: Awaited<ReturnType<typeof followWorld>> = await followWorld({
      onLine: (place, line) => {
        if (place === "tab" && line === "tick 2") queueMicrotask(() => void world.mirror.handOver(ctx).then((mark) => (handed = mark)));
      },
    });
    await runUntil(world.clock, () => world.mirror.acknowledged === world.tab.lease?.position);
    const before = await rows(world.copy);
    const next = (before.head?.position ?? 0) + 1;
    const batch = { fence: { epoch: 99, position: next }, tasks: [], conversations: [], entries: [], submissions: [], documents: [] };
    // On a connection of its own (say, a second tab of the same caller): its answer goes there.
    const replies: string[] = [];
    await world.end.receive(
      encodeFollowMessage({ type: "push", from: "tab", epoch: 1, batches: [batch], parts: [] }),
      (frame) => replies.push(frame),
      () => true,
    );
    forged = true;
    expect(replies.map((frame) => JSON.parse(frame).error?.name)).toEqual([new LeaseNotHeld("x", "").name]);
    expect(await rows(world.copy)).toEqual(before);
    world.tab.resume();
    await runUntil(world.clock, () => handed !== undefined);
    const object = (await world.end.harness)!;
    expect(forged && object.lease).toMatchObject({ place: "object", epoch: 2 });
    await runUntil(world.clock, async () => (await object.getTask(world.taskId, ctx))?.state.status === "terminal");
    expect(world.printed.map(([, line]) => line)).toEqual(["tick 1", "tick 2", "tick 3", "tick 4", "tick 5"]);
    await object.close(ctx);
  });

  it("a lease call delivered twice is answered twice with the same grant: one epoch minted", async () => {
    const world = await followWorld();
    const epoch = world.record().epoch;
    const call = encodeFollowMessage({ type: "call", id: "dup-1", topic: "lease", method: "acquire", args: ["other", 0] });
    const replies = world.sent.toTab.length;
    await world.deliver(call);
    await world.deliver(call);
    const [first, second] = world.sent.toTab.slice(replies).map((frame) => JSON.parse(frame));
    expect(first).toEqual(second);
    expect(first.error.name).toBe("LeaseNotHeld"); // the tab holds it
    expect(world.record().epoch).toBe(epoch);
    await world.tab.close(ctx);
  });
});

describe("the object's doors for calls (issue 27 item 2)", () => {
  it("a remembered answer goes only to a caller that may make the call; no caller may take the object's own place", async () => {
    let caller = "alice";
    const world = await followWorld({ authorize: (action) => caller === "alice" || !action.startsWith("lease.") });
    const renew = encodeFollowMessage({ type: "call", id: "r-1", topic: "lease", method: "renew", args: ["tab", 1] });
    const replies = world.sent.toTab.length;
    await world.deliver(renew);
    caller = "mallory";
    await world.deliver(renew);
    caller = "alice";
    await world.deliver(encodeFollowMessage({ type: "call", id: "r-2", topic: "lease", method: "acquire", args: ["object", 1_000] }));
    const [granted, refused, own] = world.sent.toTab.slice(replies).map((frame) => JSON.parse(frame));
    expect(granted).toMatchObject({ id: "r-1", value: { epoch: 1 } });
    expect(refused).toMatchObject({ id: "r-1", error: { name: "NotAuthorized" } });
    expect(own).toMatchObject({ id: "r-2", error: { name: "NotAuthorized" } });
    expect(world.record()).toMatchObject({ epoch: 1, holder: "tab" });
    await world.tab.close(ctx);
  });
});

describe("lease answers kept beyond the object's instance (issue 27 item 1)", () => {
  it("a duplicate acquire that reaches the object's next instance gets the first grant: one epoch minted, not two", async () => {
    const clock = createManualClock(1_000);
    const book = memoryArbiter({ clock, ttlMs: 5_000 });
    const kept = new Map<string, Json>();
    const answers = { get: (id: string) => kept.get(id), put: (id: string, answer: Json) => void kept.set(id, answer) };
    const copy = new MemoryStorage();
    const start = () =>
      ObjectEnd.start({ place: "object", storage: copy, book, clock, answers, open: () => Promise.reject(new Error("not taken")) });
    const acquire = encodeFollowMessage({ type: "call", id: "tab:1", topic: "lease", method: "acquire", args: ["tab", 0] });
    const heard: string[] = [];
    await (await start()).receive(
      acquire,
      (frame) => void heard.push(frame),
      () => true,
    );
    // The object restarts (an eviction); the tab's resend of the same call arrives at the new instance.
    await (await start()).receive(
      acquire,
      (frame) => void heard.push(frame),
      () => true,
    );
    expect(heard[1]).toBe(heard[0]);
    expect(JSON.parse(heard[0]!)).toMatchObject({ id: "tab:1", value: { epoch: 1 } });
    expect(book.record).toMatchObject({ epoch: 1, holder: "tab" });
  });
});

describe("hostile frames at the object (issue 27 item 2)", () => {
  it("property: any frame that is not a valid message is refused with FollowMessageRefused and never changes the copy", async () => {
    const world = await followWorld();
    world.tab.resume();
    await runUntil(world.clock, () => world.printed.length >= 1);
    await runUntil(world.clock, () => world.mirror.acknowledged >= world.tab.lease!.position);
    world.setUp(false);
    const before = await rows(world.copy);
    const frames = fc.oneof(
      fc.string({ maxLength: 200 }),
      hostileJson(4).map((value) => JSON.stringify(value)),
      fc
        .record({
          type: fc.constant("push"),
          from: fc.constant("tab"),
          epoch: fc.constant(1),
          batches: fc.array(hostileJson(3), { maxLength: 3 }),
          parts: fc.constant([]),
        })
        .map((value) => JSON.stringify(value)),
      fc
        .record({
          type: fc.constant("push"),
          from: fc.constant("tab"),
          epoch: fc.constant(1),
          batches: fc.constant([]),
          parts: fc.array(
            fc.record({
              epoch: fc.integer({ min: -1, max: 2 }),
              position: fc.integer({ min: 0, max: 40 }),
              index: fc.integer({ min: -1, max: 3 }),
              count: fc.integer({ min: 0, max: 3 }),
              text: fc.string({ maxLength: 20 }),
            }),
            { maxLength: 3 },
          ),
        })
        .map((value) => JSON.stringify(value)),
    );
    await fc.assert(
      fc.asyncProperty(frames, async (frame) => {
        const replies = world.sent.toTab.length;
        const replying = new Promise<void>((resolve) => setTimeout(resolve, 0));
        await world.deliver(frame);
        await replying;
        for (const reply of world.sent.toTab.slice(replies)) {
          const message = JSON.parse(reply);
          if (message.type === "refused" || "error" in message)
            expect([new FollowMessageRefused("shape", "").name, "LeaseNotHeld", "StaleEpoch", "NotAuthorized"]).toContain(
              message.error.name,
            );
        }
        expect(await rows(world.copy)).toEqual(before);
      }),
      { numRuns: 300 },
    );
    void StaleEpoch;
    await world.tab.close(ctx);
  });
});
