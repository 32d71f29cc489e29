import fc from "fast-check";
import { describe, expect, it } from "vitest";
import { comebackWorld } from "./comeback-support.ts";
import { ctx, runUntil } from "./support.ts";

// Review of decision 0058 (one take at a time) against the link's resends. A tab's FollowLink sends an unanswered call
// again every resendMs (2 s) under the same request id, and the object answers follow.snapshot without remembering
// ids. A take that waited (a large copy, or behind other callers' takes in the new queue) was therefore taken again
// by every resend: each counted in the caller's bucket and queued one more read of the whole copy, the duplicates
// evicted the caller's own kept snapshot (two are kept) before it fetched its parts, and once its three takes were
// spent the next resend was answered 'busy' under the very id the tab was waiting on: the tab's call failed while
// its take was still queued.

describe("follow.snapshot resent while its take waits (decisions 0047, 0053, 0058)", () => {
  it("0058: the same request id sent four times while the take waits is one take, one read, one answer: the snapshot, never busy", async () => {
    const world = await comebackWorld({ to: 3 });
    await runUntil(world.clock, async () => ((await world.copy.load()).log?.position ?? 0) >= 1);
    let reads = 0;
    let open!: () => void;
    const gate = new Promise<void>((resolve) => (open = resolve));
    const read = world.copy.readSnapshotRows.bind(world.copy);
    world.copy.readSnapshotRows = async (head, row) => {
      reads++;
      await gate;
      return read(head, row);
    };
    const answers: Array<{ id: string; value?: { id: string }; error?: { name: string; message: string } }> = [];
    const frame = JSON.stringify({ type: "call", id: "take-1", topic: "follow", method: "snapshot", args: ["phone"] });
    const sent: Array<Promise<void>> = [];
    for (let resend = 0; resend < 4; resend++) {
      sent.push(
        world.end.receive(
          frame,
          (answer) => void answers.push(JSON.parse(answer)),
          () => true,
        ),
      );
      await new Promise((resolve) => setTimeout(resolve, 0));
    }
    expect(answers).toEqual([]); // nothing answered while the one take waits (before: the fourth was 'busy')
    open();
    await Promise.all(sent);
    expect(reads).toBe(1); // before: 3 (one per counted resend)
    expect(answers.length).toBe(1);
    expect(answers[0]!.id).toBe("take-1");
    expect(answers[0]!.value?.id).toBeTypeOf("string");
    // The caller's takes were not spent by the resends: two more new snapshots are still its own.
    for (const id of ["take-2", "take-3"]) {
      await world.end.receive(
        JSON.stringify({ type: "call", id, topic: "follow", method: "snapshot", args: ["phone"] }),
        (answer) => void answers.push(JSON.parse(answer)),
        () => true,
      );
      expect(answers.at(-1)!.value?.id).toBeTypeOf("string");
    }
    await world.tab.harness.close(ctx);
  });

  it("0058 property: random snapshot calls and resends at the door while takes wait: every answer is one of the ids sent, typed, each (place, id) answered at most as often as it was sent and at least once, and no more reads than distinct calls (fast-check)", async () => {
    const world = await comebackWorld({ to: 3 });
    await runUntil(world.clock, async () => ((await world.copy.load()).log?.position ?? 0) >= 1);
    let reads = 0;
    let gate: Promise<void> = Promise.resolve();
    const read = world.copy.readSnapshotRows.bind(world.copy);
    world.copy.readSnapshotRows = async (head, row) => {
      reads++;
      await gate;
      return read(head, row);
    };
    const call = fc.record({
      place: fc.oneof({ weight: 4, arbitrary: fc.constantFrom("phone", "laptop") }, fc.constant("object"), fc.string({ maxLength: 6 })),
      id: fc.constantFrom("a", "b", "a\nb"),
      args: fc.oneof(
        { weight: 3, arbitrary: fc.constant([]) },
        fc.tuple(fc.oneof(fc.string({ maxLength: 8 }), fc.constant(undefined)), fc.integer({ min: -2, max: 3 })),
      ),
    });
    await fc.assert(
      fc.asyncProperty(fc.array(call, { minLength: 1, maxLength: 12 }), async (calls) => {
        reads = 0;
        let open!: () => void;
        gate = new Promise<void>((resolve) => (open = resolve));
        const answers: Array<{ type: string; id: string; value?: unknown; error?: { name: string } }> = [];
        const sent = calls.map(({ place, id, args }) =>
          world.end.receive(
            JSON.stringify({ type: "call", id, topic: "follow", method: "snapshot", args: [place, ...args] }),
            (answer) => void answers.push(JSON.parse(answer)),
            () => true,
          ),
        );
        open();
        await Promise.all(sent);
        const keys = new Set(calls.map(({ place, id }) => JSON.stringify([place, id])));
        expect(reads).toBeLessThanOrEqual(keys.size);
        for (const answer of answers) {
          expect(answer.type).toBe("answer");
          expect(calls.some(({ id }) => id === answer.id)).toBe(true);
          if (!("value" in answer)) expect(answer.error?.name).toMatch(/^[A-Z][A-Za-z]+$/);
        }
        const ids = new Set(calls.map(({ id }) => id));
        for (const id of ids) {
          const count = answers.filter((answer) => answer.id === id).length;
          expect(count).toBeGreaterThanOrEqual(1);
          expect(count).toBeLessThanOrEqual(calls.filter((one) => one.id === id).length);
        }
        world.clock.advance(60_000); // the buckets refill between runs
      }),
      { numRuns: 40 },
    );
    await world.tab.harness.close(ctx);
  });
});
