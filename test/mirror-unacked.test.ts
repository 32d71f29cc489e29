import { setFlagsFromString } from "node:v8";
import { runInNewContext } from "node:vm";
import fc from "fast-check";
import { describe, expect, it } from "vitest";
import { pushFrames, textFrames } from "../src/follow/chunks.ts";
import type { LoggedBatch } from "../src/follow/handover.ts";
import { loggedText, Unacked } from "../src/follow/unacked.ts";
import { followWorld, rows } from "./follow-support.ts";
import { ctx, runUntil } from "./support.ts";

// Decision 0122 (issue 27 item 6, "zero added latency for effect-free steps"): the mirror kept every stored batch
// (task row, checkpoint, fence) and, in a WeakMap beside it, its log text until the object's first acknowledgement;
// during a job of 1,000 steps no acknowledgement comes, so a young collection copied a thousand batches and walked a
// thousand ephemerons. Now it keeps each one's mark and text only. What it pushes must not change: the same frames,
// byte for byte, in the same order, under the same chunking, and after a reconnect exactly what is unacknowledged.

const json = fc.jsonValue({ maxDepth: 3 });
const body = fc.record({
  tasks: fc.array(fc.record({ id: fc.integer({ min: 1 }), state: fc.record({ status: fc.constant("running"), checkpoint: json }) }), {
    maxLength: 3,
  }),
  conversations: fc.constant([]),
  entries: fc.constant([]),
  submissions: fc.constant([]),
  documents: fc.array(fc.record({ scope: fc.string(), key: fc.string(), value: fc.option(json, { nil: null }) }), { maxLength: 2 }),
});

/** What the mirror did before: the batches themselves in order, their texts in a WeakMap, dropped through the head. */
class OldBuffer {
  buffer: LoggedBatch[] = [];
  readonly texts = new WeakMap<LoggedBatch, string>();
  add(batch: LoggedBatch, text: string | undefined) {
    if (text !== undefined) this.texts.set(batch, text);
    this.buffer.push(batch);
  }
  acknowledge(head: number) {
    this.buffer = this.buffer.filter((batch) => batch.fence.position > head);
  }
  frames(from: string, epoch: number, after: number, through: number, budget: number) {
    const rest = this.buffer.filter((batch) => batch.fence.position > after && batch.fence.position <= through);
    return pushFrames(from, epoch, rest, (batch) => this.texts.get(batch), budget);
  }
}

type Op =
  | { type: "store"; body: object; gap: number; newEpoch: boolean; text: "storage" | "none" }
  | { type: "ack"; by: number }
  | { type: "push"; after: number; through: number };

const op: fc.Arbitrary<Op> = fc.oneof(
  {
    weight: 4,
    arbitrary: fc.record({
      type: fc.constant("store" as const),
      body,
      gap: fc.constantFrom(1, 1, 1, 2),
      newEpoch: fc.boolean(),
      text: fc.constantFrom("storage" as const, "none" as const),
    }),
  },
  { weight: 1, arbitrary: fc.record({ type: fc.constant("ack" as const), by: fc.integer({ min: 0, max: 6 }) }) },
  {
    weight: 2,
    arbitrary: fc.record({
      type: fc.constant("push" as const),
      after: fc.integer({ min: -1, max: 30 }),
      through: fc.oneof(fc.integer({ min: 0, max: 40 }), fc.constant(Number.POSITIVE_INFINITY)),
    }),
  },
);

describe("the mirror keeps marks and texts of what is unacknowledged, not the batches (decision 0122)", () => {
  it("property: whatever is stored (with or without a log text), acknowledged and pushed in any order, the frames are the ones pushFrames made of the kept batches, byte for byte, under any budget", () => {
    fc.assert(
      fc.property(
        fc.array(op, { maxLength: 40 }),
        fc.integer({ min: 200, max: 3_000 }),
        fc.string(),
        fc.integer({ min: 1, max: 1_000 }),
        (ops, budget, from, epoch) => {
          const old = new OldBuffer();
          const kept = new Unacked();
          let position = 0;
          let fenceEpoch = 1;
          let head = 0;
          for (const step of ops) {
            if (step.type === "store") {
              position += step.gap;
              if (step.newEpoch) fenceEpoch++;
              const batch = { ...step.body, fence: { epoch: fenceEpoch, position } } as unknown as LoggedBatch;
              // The storage's text is pushed as it is, not made again: spaced here, so a text made again would differ.
              const text = step.text === "storage" ? JSON.stringify(batch, null, 1) : undefined;
              old.add(batch, text);
              kept.add(batch, text);
            } else if (step.type === "ack") {
              head += step.by;
              old.acknowledge(head);
              kept.acknowledge(head);
            } else {
              const expected = old.frames(from, epoch, step.after, step.through, budget);
              const frames = textFrames(from, epoch, kept.texts(step.after, step.through), budget);
              expect(frames).toEqual(expected);
            }
          }
          expect(textFrames(from, epoch, kept.texts(head), budget)).toEqual(
            old.frames(from, epoch, head, Number.POSITIVE_INFINITY, budget),
          );
        },
      ),
      { numRuns: 200 },
    );
  });

  it("property: a batch read from the durable tail pushes as pushFrames pushes it (its JSON, made when pushed)", () => {
    fc.assert(
      fc.property(fc.array(body, { maxLength: 6 }), fc.integer({ min: 200, max: 3_000 }), (bodies, budget) => {
        const batches = bodies.map((one, index) => ({ ...one, fence: { epoch: 2, position: index + 1 } }) as unknown as LoggedBatch);
        expect(
          textFrames(
            "tab",
            2,
            batches.map((batch) => loggedText(batch)),
            budget,
          ),
        ).toEqual(pushFrames("tab", 2, batches, undefined, budget));
      }),
      { numRuns: 100 },
    );
  });

  it("S12 under a mirror: while no acknowledgement comes, the stored batches are not kept alive (only their texts), and once the object hears, it holds everything the tab stored", async () => {
    setFlagsFromString("--expose-gc");
    const gc = runInNewContext("gc") as () => void;
    const world = await followWorld({ to: 30 });
    // The first round (the task's creation) is under way; the frames to the object are held: no acknowledgement comes.
    world.hold(true);
    const stored: Array<WeakRef<object>> = [];
    world.tab.onLog((batch) => void stored.push(new WeakRef(batch)));
    world.tab.resume();
    await runUntil(world.clock, async () => (await world.tab.getTask(world.taskId, ctx))?.state.status === "terminal");
    expect(world.mirror.acknowledged).toBeLessThan(world.tab.lease!.position);
    expect(stored.length).toBeGreaterThanOrEqual(30);
    await new Promise((resolve) => setTimeout(resolve, 0));
    gc();
    // Old code: every one of them, held in the mirror's buffer until the acknowledgement.
    expect(stored.filter((ref) => ref.deref() !== undefined)).toEqual([]);
    world.hold(false);
    await runUntil(world.clock, () => world.mirror.acknowledged >= world.tab.lease!.position);
    expect(await rows(world.copy)).toEqual(await rows(world.tabStorage));
  });
});
