import fc from "fast-check";
import { describe, expect, it } from "vitest";
import { snapshotCallWorld } from "./snapshot-copy.ts";
import { ctx } from "./support.ts";

// Decision 0070 (issue 27; e2e/rebuild.e2e.ts's forked-offline case). The tab's FollowLink sends every unanswered call
// again every 2 s. The object answers a take still being answered once (decision 0058's review), but a resend that
// arrives after the answer left (the answer and the resend crossed: a take's round trip under load spans a resend)
// was a new take: it read the whole copy again and spent one of the caller's 3 takes, so the next load of a tab that
// rebuilt and reloaded in the middle found its take answered 'busy'. Now the object remembers the requests it answered
// a take to and answers a late resend with that take's first part again, while the take is kept.

const world = snapshotCallWorld;

describe("a take resent after its answer (decision 0070)", () => {
  it("0070 (0058): a take asked again under the id it was answered to is the same take's first part: no second read, none of the caller's takes spent", async () => {
    const { w, call, reads } = await world();
    const first = await call("take-1", ["phone"]);
    expect(first.value?.id).toBeTypeOf("string");
    // The resend crossed the answer: the same request again, three times.
    for (let resend = 0; resend < 3; resend++) {
      const again = await call("take-1", ["phone"]);
      expect(again.value?.id).toBe(first.value!.id); // before: a new take each (the third 'busy')
      expect(again.value?.index).toBe(0);
    }
    expect(reads()).toBe(1);
    // The caller's other two takes are still its own.
    for (const id of ["take-2", "take-3"]) expect((await call(id, ["phone"])).value?.id).toBeTypeOf("string");
    expect(reads()).toBe(3);
    expect((await call("take-4", ["phone"])).error?.message).toContain("busy");
    await w.tab.harness.close(ctx);
  });

  // A guard (the old code took every take anew): the memory never answers for a snapshot it no longer keeps.
  it("0070: a remembered take no longer kept (two newer takes displaced it) is taken again, not answered 'gone'", async () => {
    const { w, call, reads } = await world();
    const first = await call("take-1", ["phone"]);
    await call("take-2", ["laptop"], "bob");
    await call("take-3", ["tablet"], "carol");
    w.clock.advance(60_000); // alice's bucket refills
    const again = await call("take-1", ["phone"]);
    expect(again.value?.id).toBeTypeOf("string");
    expect(again.value?.id).not.toBe(first.value!.id);
    expect(reads()).toBe(4);
    await w.tab.harness.close(ctx);
  });

  it("0070 property: takes, resends and bogus parts from two callers match a model: a resent take is its kept snapshot's first part with no read, any other take a read or 'busy' by the caller's 3 (fast-check)", async () => {
    const { w, call, reads } = await world();
    let run = 0;
    const step = fc.record({
      caller: fc.constantFrom("alice", "bob"),
      id: fc.constantFrom("a", "b", "c", "d"),
      kind: fc.constantFrom("take", "take", "bogus part"),
    });
    await fc.assert(
      fc.asyncProperty(fc.array(step, { minLength: 1, maxLength: 12 }), async (steps) => {
        const prefix = `r${run++}-`;
        // The model: the snapshots kept (the last two taken), each request's answered take, each caller's takes left.
        const kept: string[] = [];
        const answered = new Map<string, string>();
        const left = new Map([
          ["alice", 3],
          ["bob", 3],
        ]);
        let expectedReads = reads();
        for (const { caller, id, kind } of steps) {
          const args = kind === "take" ? ["phone"] : ["phone", "no-such-snapshot", 1];
          const answer = await call(prefix + id, args, caller);
          expect(answer.id).toBe(prefix + id);
          if (kind === "bogus part") {
            expect(answer.error?.name).toBe("SnapshotUnavailable");
            continue;
          }
          const request = `${caller}:${id}`;
          const earlier = answered.get(request);
          if (earlier !== undefined && kept.includes(earlier)) {
            expect(answer.value).toMatchObject({ id: earlier, index: 0 });
          } else if (left.get(caller)! > 0) {
            left.set(caller, left.get(caller)! - 1);
            expectedReads++;
            expect(answer.value?.id).toBeTypeOf("string");
            answered.set(request, answer.value!.id);
            kept.push(answer.value!.id);
            if (kept.length > 2) kept.shift();
          } else {
            expect(answer.error?.message).toContain("busy");
          }
          expect(reads()).toBe(expectedReads);
        }
        w.clock.advance(60_000); // the buckets refill between runs
      }),
      { numRuns: 40 },
    );
    await w.tab.harness.close(ctx);
  });
});
