import fc from "fast-check";
import { describe, expect, it } from "vitest";
import { MAX_OBJECT_SNAPSHOT_BYTES, MAX_SNAPSHOT_BYTES, SnapshotServer, snapshotParts } from "../src/follow/snapshot.ts";
import { MemoryStorage } from "../src/storage/memory.ts";
import { createManualClock } from "../src/testing/clock.ts";
import { emptyBatch } from "../src/testing/storage-conformance.ts";
import { comebackWorld } from "./comeback-support.ts";
import { ctx, runUntil } from "./support.ts";

// Decision 0053: a snapshot is the object's whole copy read in one transaction and held in memory. Before, every
// follow.snapshot call without an id read one: a caller asking in a loop made the object read and serialize its
// copy as often as it asked. Now each caller has a bucket of new snapshots (3, one more every 10 s) and the object
// one for all callers together (6, one more every 2 s); a refusal is SnapshotUnavailable("busy"), retryable, and
// reads nothing.

/** An object's copy with a few transactions, counting its snapshot reads. */
async function countingCopy(): Promise<{ storage: MemoryStorage; reads: () => number }> {
  const storage = new MemoryStorage();
  for (let position = 1; position <= 3; position++)
    await storage.apply({
      ...emptyBatch(),
      fence: { epoch: 1, position },
      documents: [{ scope: "s", key: `k${position}`, value: "x".repeat(3_000) }],
    });
  let reads = 0;
  const read = storage.readSnapshot.bind(storage);
  storage.readSnapshot = () => {
    reads++;
    return read();
  };
  return { storage, reads: () => reads };
}

type Step =
  | { kind: "new"; caller: string }
  | { kind: "part"; caller: string; id: string | undefined; index: number }
  | { kind: "wait"; ms: number };

const callers = fc.oneof(fc.constantFrom("phone", "laptop", "stranger"), fc.string({ maxLength: 20 }));
const step: fc.Arbitrary<Step> = fc.oneof(
  { weight: 5, arbitrary: callers.map((caller) => ({ kind: "new" as const, caller })) },
  {
    weight: 2,
    arbitrary: fc.record({
      kind: fc.constant("part" as const),
      caller: callers,
      id: fc.option(fc.string({ maxLength: 60 }), { nil: undefined }),
      index: fc.integer({ min: 0, max: 5 }),
    }),
  },
  { weight: 2, arbitrary: fc.record({ kind: fc.constant("wait" as const), ms: fc.integer({ min: 0, max: 15_000 }) }) },
);

describe("follow.snapshot is rate-limited per caller and for the object (decision 0053)", () => {
  it("property: over hostile call sequences, new snapshots stay within each caller's bucket and the object's, every refusal is SnapshotUnavailable and a busy one reads nothing (fast-check)", async () => {
    await fc.assert(
      fc.asyncProperty(fc.array(step, { maxLength: 60 }), async (steps) => {
        const clock = createManualClock(0);
        const { storage, reads } = await countingCopy();
        const server = new SnapshotServer(storage, clock);
        const taken = new Map<string, number>();
        let ids: string[] = [];
        for (const one of steps) {
          if (one.kind === "wait") {
            clock.advance(one.ms);
            continue;
          }
          const before = reads();
          const positions = server.positions();
          const asked = one.kind === "new" ? undefined : (one.id ?? ids.at(-1));
          try {
            const part = await server.part(asked, one.kind === "new" ? 0 : one.index, one.caller);
            if (asked === undefined) {
              taken.set(one.caller, (taken.get(one.caller) ?? 0) + 1);
              ids = [...ids, part.id];
            }
          } catch (error) {
            expect((error as Error).name).toBe("SnapshotUnavailable");
            const reason = (error as { reason: string }).reason;
            expect(["busy", "gone"]).toContain(reason);
            expect(reads()).toBe(before);
            expect(server.positions()).toEqual(positions);
          }
        }
        const elapsed = clock.now();
        expect(reads()).toBeLessThanOrEqual(6 + Math.floor(elapsed / 2_000));
        for (const count of taken.values()) expect(count).toBeLessThanOrEqual(3 + Math.floor(elapsed / 10_000));
      }),
      { numRuns: 150 },
    );
  });

  it("a stranger asking in a loop through the object's door: three snapshots read, then busy (retryable) for it, while another caller still gets one; ten seconds later it gets one more", async () => {
    const world = await comebackWorld({ to: 3 });
    await runUntil(world.clock, async () => ((await world.copy.load()).log?.position ?? 0) >= 1);
    const answers: Array<{ value?: { id: string }; error?: { name: string; message: string } }> = [];
    const ask = (place: string) =>
      world.end.receive(
        JSON.stringify({ type: "call", id: `c${answers.length}`, topic: "follow", method: "snapshot", args: [place] }),
        (frame) => void answers.push(JSON.parse(frame)),
        () => true,
      );
    for (let call = 0; call < 20; call++) await ask("stranger");
    expect(answers.filter((answer) => answer.value).length).toBe(3);
    expect(answers.slice(3).every((answer) => answer.error?.name === "SnapshotUnavailable" && /busy/.test(answer.error.message))).toBe(
      true,
    );
    await ask("phone");
    expect(answers.at(-1)!.value?.id).toBeTypeOf("string");
    world.clock.advance(10_000);
    await ask("stranger");
    expect(answers.at(-1)!.value?.id).toBeTypeOf("string");
    await world.tab.harness.close(ctx);
  });
  it("0058 property: parts of snapshots already taken stay within each caller's parts bucket and the object's; every refusal is SnapshotUnavailable and a busy one counts nothing (the accepted calls alone, replayed at the same times, are all accepted) (fast-check)", async () => {
    const limits = { partBurst: 4, partEveryMs: 1_000, totalPartBurst: 6, totalPartEveryMs: 300 };
    type PartStep = { kind: "part"; caller: string; which: number; index: number } | { kind: "wait"; ms: number };
    const partStep: fc.Arbitrary<PartStep> = fc.oneof(
      {
        weight: 6,
        arbitrary: fc.record({
          kind: fc.constant("part" as const),
          caller: fc.constantFrom("phone", "laptop", "stranger", ""),
          which: fc.integer({ min: 0, max: 2 }), // 2: an id the object never named
          index: fc.integer({ min: -1, max: 2 }),
        }),
      },
      { weight: 1, arbitrary: fc.record({ kind: fc.constant("wait" as const), ms: fc.integer({ min: 0, max: 3_000 }) }) },
    );
    /** Runs `steps` on a fresh server (two snapshots taken first, not counted as parts); the outcome of each part step. */
    const run = async (steps: readonly PartStep[]) => {
      const clock = createManualClock(0);
      const { storage, reads } = await countingCopy();
      const server = new SnapshotServer(storage, clock, limits);
      const ids = [(await server.part(undefined, 0, "setup")).id, (await server.part(undefined, 0, "setup")).id, "not-an-id"];
      const outcomes: Array<"served" | "busy" | "gone"> = [];
      const served = new Map<string, number>();
      for (const one of steps) {
        if (one.kind === "wait") {
          clock.advance(one.ms);
          continue;
        }
        const before = reads();
        try {
          const part = await server.part(ids[one.which], one.index, one.caller);
          expect(part.id).toBe(ids[one.which]);
          expect(part.text).toBeTypeOf("string"); // before: index -1 was served with no text
          outcomes.push("served");
          served.set(one.caller, (served.get(one.caller) ?? 0) + 1);
        } catch (error) {
          expect((error as Error).name).toBe("SnapshotUnavailable");
          const reason = (error as { reason: "busy" | "gone" }).reason;
          expect(["busy", "gone"]).toContain(reason);
          outcomes.push(reason);
        }
        expect(reads()).toBe(before); // a part never reads the copy
      }
      return { outcomes, served, elapsed: clock.now() };
    };
    await fc.assert(
      fc.asyncProperty(fc.array(partStep, { maxLength: 80 }), async (steps) => {
        const { outcomes, served, elapsed } = await run(steps);
        const total = [...served.values()].reduce((sum, count) => sum + count, 0);
        expect(total).toBeLessThanOrEqual(limits.totalPartBurst + Math.floor(elapsed / limits.totalPartEveryMs));
        for (const count of served.values()) expect(count).toBeLessThanOrEqual(limits.partBurst + Math.floor(elapsed / limits.partEveryMs));
        // A refused call changed nothing: without the refused calls (their waits kept), every accepted one is again.
        let next = 0;
        const kept = steps.filter((one) => one.kind === "wait" || outcomes[next++] === "served");
        const again = await run(kept);
        expect(again.outcomes.every((outcome) => outcome === "served")).toBe(true);
      }),
      { numRuns: 150 },
    );
  });

  it("0058: a stranger reading a part of its snapshot in a loop through the object's door gets two whole fetches' worth, then busy (retryable), while another caller still reads one; a second later it reads one more", async () => {
    const world = await comebackWorld({ to: 3 });
    await runUntil(world.clock, async () => ((await world.copy.load()).log?.position ?? 0) >= 1);
    const answers: Array<{ value?: { id: string }; error?: { name: string; message: string } }> = [];
    const ask = (place: string, args: Array<string | number>) =>
      world.end.receive(
        JSON.stringify({ type: "call", id: `c${answers.length}`, topic: "follow", method: "snapshot", args: [place, ...args] }),
        (frame) => void answers.push(JSON.parse(frame)),
        () => true,
      );
    await ask("stranger", []);
    const id = answers[0]!.value!.id;
    answers.length = 0;
    const burst = 2 * snapshotParts(world.copy.maxRowBytes === undefined ? MAX_SNAPSHOT_BYTES : MAX_OBJECT_SNAPSHOT_BYTES);
    for (let call = 0; call < burst + 20; call++) await ask("stranger", [id, 0]);
    expect(answers.filter((answer) => answer.value).length).toBe(burst); // before: every one, each a part of up to 1 MB
    expect(answers.slice(burst).every((answer) => answer.error?.name === "SnapshotUnavailable" && /busy/.test(answer.error.message))).toBe(
      true,
    );
    await ask("phone", [id, 0]);
    expect(answers.at(-1)!.value?.id).toBe(id);
    world.clock.advance(1_000);
    await ask("stranger", [id, 0]);
    expect(answers.at(-1)!.value?.id).toBe(id);
    await world.tab.harness.close(ctx);
  });
});
