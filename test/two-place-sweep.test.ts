import fc from "fast-check";
import { describe, expect, it } from "vitest";
import type { LinkAction } from "../src/testing/two-places/link.ts";
import { twoPlaceSweep } from "../src/testing/two-places/sweep.ts";
import { toolTurn } from "./two-place-support.ts";

// Issue 27 item 6's first part (decision 0029): an agent turn with an unsafe and a safe tool starts in the tab,
// which hands over to the object while the tools run; the object finishes it. A crash at every commit of both
// places and at every hand-over message, over reliable and lossy links: one transaction per position, one result
// per tool call, the unsafe tool at most once, nothing lost.

describe("the two-place crash sweep (issue 27 item 6, decision 0029)", { timeout: 600_000 }, () => {
  it("a crash at every commit of the tab and the object and at every hand-over message, on a reliable link", async () => {
    const result = await twoPlaceSweep(toolTurn);
    expect(result.commits.tab).toBeGreaterThan(3);
    expect(result.commits.object).toBeGreaterThan(3);
    expect(result.messages).toBeGreaterThanOrEqual(3); // push, ack, release (the object is done before `taken` lands)
    console.log(`two-place sweep, reliable link: ${JSON.stringify(result)}`);
  });

  it("the same on links that lose, duplicate and reorder (fast-check schedules)", async () => {
    const schedules = fc.sample(
      fc.array(fc.record({ pick: fc.nat(5), action: fc.constantFrom<LinkAction>("deliver", "deliver", "drop", "duplicate") }), {
        minLength: 4,
        maxLength: 24,
      }),
      { numRuns: 8, seed: 27 },
    );
    for (const schedule of schedules) {
      const result = await twoPlaceSweep(toolTurn, { schedule });
      console.log(`two-place sweep, lossy link: ${JSON.stringify(result)}`);
    }
  });
});
