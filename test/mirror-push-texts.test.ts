import fc from "fast-check";
import { afterEach, describe, expect, it, vi } from "vitest";
import { stepper } from "../bench/stepper.ts";
import { systemClock } from "../src/base/clock.ts";
import { watchCommits } from "../src/browser/commit-watch.ts";
import { memoryArbiter } from "../src/follow/arbiter.ts";
import { packPushes, pushFrames } from "../src/follow/chunks.ts";
import type { LoggedBatch } from "../src/follow/handover.ts";
import { encodeFollowMessage } from "../src/follow/wire.ts";
import { createRegistry, defineExtension, Harness, MemoryStorage } from "../src/index.ts";
import { utf8Length } from "../src/limits.ts";
import type { Batch } from "../src/storage/records.ts";
import { batchText } from "../src/storage/sqlite/log-write.ts";
import { openSqliteStorage } from "../src/storage/sqlite/open-storage.ts";
import { followWorld } from "./follow-support.ts";
import { ctx, runUntil } from "./support.ts";

// Decision 0093 (issue 27 item 6, "zero added latency for effect-free steps"): the mirror pushed every stored
// transaction by serializing it twice more (once to measure it, once inside the push message) although the storage
// had just made its JSON for the log row. Now the storage hands that text to the log's listeners and the push frame
// is made of it; a fence and a number are spelled without JSON.stringify. Counts only, never time.

afterEach(() => {
  vi.restoreAllMocks();
});

/** Counts JSON.stringify calls (and the characters they return) while `spying` says so, whatever calls it. */
function spyStringify(counted: (value: unknown) => boolean = () => true) {
  const original = JSON.stringify;
  const seen = { calls: 0, chars: 0, on: false };
  vi.spyOn(JSON, "stringify").mockImplementation(((value: unknown, ...rest: unknown[]) => {
    const text = (original as (...args: unknown[]) => string)(value, ...rest);
    if (seen.on && counted(value)) {
      seen.calls++;
      seen.chars += text?.length ?? 0;
    }
    return text;
  }) as typeof JSON.stringify);
  return seen;
}

describe("a mirrored step's push is made of its log text (decision 0093)", () => {
  it("S12 under a mirror: the tab serializes no stored transaction again to push it, and every push frame is encodeFollowMessage's text", async () => {
    const world = await followWorld({ to: 12 });
    const logged = new WeakSet<object>();
    const texts: string[] = [];
    world.tab.onLog((batch, text) => {
      logged.add(batch);
      if (text !== undefined) texts.push(text);
    });
    // Only the tab's own transactions, or a push message of the tab's: what the mirror serialized before.
    const seen = spyStringify(
      (value) => logged.has(value as object) || (value as { type?: unknown; from?: unknown } | null)?.from === "tab",
    );
    seen.on = true;
    world.tab.resume();
    await runUntil(world.clock, async () => (await world.tab.getTask(world.taskId, ctx))?.state.status === "terminal");
    await runUntil(world.clock, () => world.mirror.acknowledged >= world.tab.lease!.position);
    seen.on = false;
    // Old code: one JSON.stringify of every stored transaction (packPushes) and one of every push message.
    expect(seen.calls).toBe(0);
    expect(texts.length).toBeGreaterThan(12);
    const pushes = world.sent.toObject.filter((frame) => frame.startsWith('{"type":"push"'));
    expect(pushes.length).toBeGreaterThan(0);
    for (const frame of pushes) expect(encodeFollowMessage(JSON.parse(frame))).toBe(frame);
    // The bytes the mirror counts are the frames' own (counted from the texts', not by scanning each frame again).
    expect(world.mirror.stats.bytes).toBe(pushes.reduce((sum, frame) => sum + utf8Length(frame), 0));
    // The object holds the tab's rows, as before (the frames carry the same transactions).
    const pushed = pushes.flatMap((frame) => (JSON.parse(frame) as { batches: unknown[] }).batches.map((batch) => JSON.stringify(batch)));
    for (const text of texts) expect(pushed).toContain(text);
    await world.tab.close(ctx);
  });

  it("an effect-free fenced step calls JSON.stringify once (its checkpoint), its log row spelled from texts already made", async () => {
    const registry = createRegistry().install(defineExtension({ name: "bench", tasks: [stepper] }));
    const harness = await Harness.open(
      await openSqliteStorage({ vfs: "memory" }),
      { registry, lease: { place: "tab", arbiter: memoryArbiter({ clock: systemClock, ttlMs: 600_000 }) } },
      ctx,
    );
    const texts: Array<[Batch, string | undefined]> = [];
    harness.onLog((batch, text) => void texts.push([batch, text]));
    const root = await harness.root(ctx);
    const steps = 1_000;
    const id = await root.commit((tx) => tx.createTask(stepper, { steps }), ctx);
    const seen = spyStringify();
    seen.on = true;
    harness.resume();
    await harness.waitForTask(id, ctx);
    seen.on = false;
    // Old code: 2 a step (the checkpoint, and the fence in the log row's text).
    expect(seen.calls / steps).toBeLessThanOrEqual(1.05);
    expect(texts.length).toBeGreaterThanOrEqual(steps);
    for (const [batch, text] of texts) expect(text).toBe(JSON.stringify(batch));
    await harness.close(ctx);
  });

  it("the browser worker's commit watch hands the log text on (the worker's mirror pushes it as it is)", async () => {
    const inner = await openSqliteStorage({ vfs: "memory" });
    const storage = watchCommits(inner);
    await storage.load();
    const batch = {
      tasks: [],
      conversations: [],
      entries: [],
      submissions: [],
      documents: [],
      nextId: 2,
      fence: { epoch: 1, position: 1 },
    };
    // Old code: the watch awaited the storage and resolved with nothing (the mirror serialized the batch again).
    expect(await storage.apply(batch)).toBe(JSON.stringify(batch));
    expect(await storage.apply({ tasks: [], conversations: [], entries: [], submissions: [], documents: [], nextId: 3 })).toBeUndefined();
    await storage.close();
  });

  it("a storage that makes no log text (memory) leaves the listener's text undefined, and the mirror serializes as before", async () => {
    const registry = createRegistry().install(defineExtension({ name: "bench", tasks: [stepper] }));
    const harness = await Harness.open(
      new MemoryStorage(),
      { registry, lease: { place: "tab", arbiter: memoryArbiter({ clock: systemClock, ttlMs: 600_000 }) } },
      ctx,
    );
    const texts: Array<string | undefined> = [];
    harness.onLog((_batch, text) => void texts.push(text));
    const root = await harness.root(ctx);
    await root.commit((tx) => tx.createTask(stepper, { steps: 3 }), ctx);
    expect(texts.length).toBeGreaterThan(0);
    expect(texts.every((text) => text === undefined)).toBe(true);
    await harness.close(ctx);
  });
});

const json = fc.jsonValue({ maxDepth: 3 });
const logged: fc.Arbitrary<LoggedBatch> = fc.record(
  {
    tasks: fc.array(fc.record({ id: fc.integer({ min: 1 }), state: fc.record({ status: fc.constant("running"), checkpoint: json }) }), {
      maxLength: 3,
    }),
    conversations: fc.array(fc.record({ id: fc.integer({ min: 1 }), title: fc.string() }), { maxLength: 2 }),
    entries: fc.constant([]),
    submissions: fc.constant([]),
    documents: fc.array(fc.record({ scope: fc.string(), key: fc.string(), value: fc.option(json, { nil: null }) }), { maxLength: 2 }),
    fence: fc.record({ epoch: fc.integer({ min: 1, max: 9 }), position: fc.integer({ min: 1 }) }),
  },
  { requiredKeys: ["tasks", "conversations", "entries", "submissions", "documents", "fence"] },
) as unknown as fc.Arbitrary<LoggedBatch>;

describe("push frames from texts: text for text the messages they stand for (decision 0093)", () => {
  it("property: pushFrames gives encodeFollowMessage of packPushes' loads and their bytes, with texts known for any of the batches, under any budget", () => {
    fc.assert(
      fc.property(
        fc.array(fc.tuple(logged, fc.boolean()), { maxLength: 8 }),
        fc.integer({ min: 200, max: 4_000 }),
        fc.string(),
        fc.integer({ min: 1, max: 1_000 }),
        (pairs, budget, from, epoch) => {
          const batches = pairs.map(([batch]) => batch);
          const known = new Map(pairs.filter(([, has]) => has).map(([batch]) => [batch, JSON.stringify(batch)] as const));
          const expected = packPushes(batches, budget).map((load) => encodeFollowMessage({ type: "push", from, epoch, ...load }));
          const frames = pushFrames(from, epoch, batches, (batch) => known.get(batch), budget);
          expect(frames.map(({ frame }) => frame)).toEqual(expected);
          for (const { frame, bytes } of frames) expect(bytes).toBe(utf8Length(frame));
        },
      ),
      { numRuns: 150 },
    );
  });

  it("property: a log row's text is JSON.stringify of its batch whatever its fence and numbers are (spelled here, not by JSON)", () => {
    const number = fc.oneof(fc.integer(), fc.double(), fc.constant(-0), fc.constant(Number.NaN), fc.constant(Number.POSITIVE_INFINITY));
    const fence = fc.oneof(
      fc.record({ epoch: number, position: number }),
      fc.record({ epoch: fc.string({ unit: "binary" }), position: number }),
      fc.record({ position: number, epoch: number }),
      fc.record({ epoch: number, position: number, note: fc.string() }),
      fc.record({ epoch: number }),
      fc.constant(Object.assign(Object.create({ epoch: 1 }), { position: 2 })),
      fc.constant({ epoch: 1, position: 2, toJSON: () => "mark" }),
      fc.constant(null),
    );
    fc.assert(
      fc.property(fence, fc.option(number, { nil: undefined }), (mark, nextId) => {
        const batch = {
          tasks: [],
          conversations: [],
          entries: [],
          submissions: [],
          documents: [],
          nextId,
          fence: mark,
        } as unknown as Batch;
        const none: string[] = [];
        expect(batchText(batch, { tasks: none, conversations: none, entries: none, submissions: none, documents: none })).toBe(
          JSON.stringify(batch),
        );
      }),
      { numRuns: 300 },
    );
  });

  it("property: utf8Length is TextEncoder's byte count, ASCII or not, lone surrogates included", () => {
    const encoder = new TextEncoder();
    fc.assert(
      fc.property(fc.string(), fc.string({ unit: "binary" }), fc.string(), (ascii, any, tail) => {
        const text = `${ascii}${any}${tail}`;
        expect(utf8Length(text)).toBe(encoder.encode(text).length);
        expect(utf8Length(ascii)).toBe(encoder.encode(ascii).length);
      }),
      { numRuns: 200 },
    );
  });
});
