import fc from "fast-check";
import { describe, expect, it } from "vitest";
import { candidateIds } from "../src/tasks/pass.ts";

/**
 * Decision 0129: a scheduling pass's candidates are `ids` and what its reconcile added, ascending and each once — as
 * the set of both, sorted, gave before. The first pass after an open (every live id, ascending, nothing added) takes
 * `ids` itself: no set of every live id and no copy or sort of it in front of the first resumed step.
 */
describe("a pass's candidates (decision 0129)", () => {
  it("are the ids and the added ones, ascending and each once, whatever the order or repeats (fast-check)", () => {
    const id = fc.integer({ min: 1, max: 60 });
    fc.assert(
      fc.property(fc.array(id, { maxLength: 40 }), fc.uniqueArray(id, { maxLength: 8 }), fc.boolean(), (raw, added, sort) => {
        const ids = sort ? [...new Set(raw)].sort((a, b) => a - b) : raw;
        const before = [...new Set([...ids, ...added])].sort((a, b) => a - b);
        expect(candidateIds([...ids], new Set(added))).toEqual(before);
      }),
      { numRuns: 500, seed: 129 },
    );
  });

  it("takes the ids themselves when they are ascending and nothing was added (the first pass after an open)", () => {
    const ids = Array.from({ length: 10_000 }, (_, at) => at + 1);
    expect(candidateIds(ids, new Set())).toBe(ids);
    expect(candidateIds(ids, new Set([3]))).not.toBe(ids);
    expect(candidateIds([2, 1], new Set())).toEqual([1, 2]);
    expect(candidateIds([1, 1, 2], new Set())).toEqual([1, 2]);
  });
});
