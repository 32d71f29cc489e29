import fc from "fast-check";
import { describe, expect, it } from "vitest";
import { snapshotCallWorld } from "./snapshot-copy.ts";
import { ctx } from "./support.ts";

// Decision 0064 (issue 27 item 2): the snapshot limits counted per place name, and the place name is the caller's
// own argument. A caller the door lets use many places (or one whose door checks nothing per place) had a bucket per
// name: it could take the object's whole budget of new snapshots (and drain the object-wide parts bucket), starving a
// new device. With the caller the platform authenticated (ObjectEnd.receive's `caller`), every place it names shares
// that caller's one bucket; another caller keeps its own.

async function world() {
  const { w, call, reads } = await snapshotCallWorld();
  const take = (id: string, place: unknown, caller: string) => call(id, [place], caller);
  return { w, take, reads };
}

describe("snapshot limits per authenticated caller (decision 0064)", () => {
  it("0064: one caller naming four places gets its three takes, the fourth is busy and reads nothing; another caller still gets its own", async () => {
    const { w, take, reads } = await world();
    const answers = [];
    for (const [n, place] of ["phone", "laptop", "tablet", "watch"].entries()) answers.push(await take(`t${n}`, place, "alice"));
    expect(answers.slice(0, 3).every((answer) => typeof answer.value?.id === "string")).toBe(true);
    expect(answers[3]!.error?.name).toBe("SnapshotUnavailable"); // before: a fourth take under a new place name
    expect(answers[3]!.error?.message).toContain("busy");
    expect(reads()).toBe(3); // the refused call read nothing
    expect((await take("b1", "phone", "bob")).value?.id).toBeTypeOf("string");
    await w.tab.harness.close(ctx);
  });

  it("0064 property: hostile place names from one caller never get more than its three takes, and each refusal reads nothing (fast-check)", async () => {
    const { w, take, reads } = await world();
    let caller = 0;
    await fc.assert(
      fc.asyncProperty(
        fc.array(fc.oneof(fc.string({ maxLength: 30 }), fc.integer(), fc.constant(null)), { minLength: 1, maxLength: 8 }),
        async (places) => {
          const who = `c${caller++}`;
          const before = reads();
          let served = 0;
          for (const [n, place] of places.entries()) {
            const answer = await take(`${who}-${n}`, place, who);
            if (answer.value) served++;
            else expect(answer.error?.name).toMatch(/^(SnapshotUnavailable|NotAuthorized|FollowMessageRefused)$/);
          }
          expect(served).toBeLessThanOrEqual(3);
          expect(reads() - before).toBe(served);
          w.clock.advance(60_000); // the object-wide bucket refills between runs
        },
      ),
      { numRuns: 25 },
    );
    await w.tab.harness.close(ctx);
  });
});
