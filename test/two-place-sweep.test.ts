import fc from "fast-check";
import { describe, expect, it } from "vitest";
import type { LinkAction } from "../src/testing/two-places/link.ts";
import { twoPlaceSweep } from "../src/testing/two-places/sweep.ts";
import { mirroredTurn, toolTurn } from "./two-place-support.ts";

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
    for (const schedule of lossySchedules(8, 27)) {
      const result = await twoPlaceSweep(toolTurn, { schedule });
      console.log(`two-place sweep, lossy link: ${JSON.stringify(result)}`);
    }
  });
});

describe("the two-place sweep with a live mirror (issue 27 items 3 and 4, decision 0032)", { timeout: 600_000 }, () => {
  it("a tab that crashes at any commit and reloads at once: it takes a new epoch and finishes the turn with the object following", async () => {
    const result = await twoPlaceSweep(mirroredTurn, { mirror: true });
    expect(result.forks).toBe(0);
    console.log(`two-place sweep, live mirror, the tab reloads: ${JSON.stringify(result)}`);
  });

  it("a tab that crashes at any commit and stays away past the expiry: the object takes over and nothing with an effect is lost", async () => {
    const result = await twoPlaceSweep(mirroredTurn, { mirror: true, stayAway: true });
    expect(result.commits.tab).toBeGreaterThan(5);
    expect(result.forks).toBeGreaterThan(0); // worlds where the tab came back holding work the object never got
    console.log(`two-place sweep, live mirror, the tab stays away: ${JSON.stringify(result)}`);
  });

  it("the same on links that lose, duplicate and reorder (fast-check schedules)", async () => {
    for (const schedule of lossySchedules(3, 32)) {
      const result = await twoPlaceSweep(mirroredTurn, { mirror: true, stayAway: true, schedule });
      console.log(`two-place sweep, live mirror, the tab stays away, lossy link: ${JSON.stringify(result)}`);
    }
  });

  it("a partition in the takeover mode, starting anywhere in the turn (fast-check): effect-free steps go on, effects wait, the tab stops at the expiry and the object takes over (a crash at every commit)", async () => {
    for (const from of fc.sample(fc.integer({ min: 2, max: 34 }), { numRuns: 3, seed: 32 })) {
      const result = await twoPlaceSweep(mirroredTurn, { mirror: true, partition: { from, to: from + 110 } });
      expect(result.forks).toBeGreaterThan(0); // the tab went on past the last acknowledgement: its stretch is a fork
      console.log(`two-place sweep, live mirror, partition from turn ${from}, takeover lease: ${JSON.stringify(result)}`);
    }
  });

  it("a partition in the pinned mode: the tab finishes alone, effects do not wait, and the object's copy catches up once the link is back", async () => {
    const result = await twoPlaceSweep(mirroredTurn, { mirror: true, ttlMs: Number.POSITIVE_INFINITY, partition: { from: 6, to: 120 } });
    console.log(`two-place sweep, live mirror, partition, pinned lease: ${JSON.stringify(result)}`);
  });
});

/** Link schedules drawn by fast-check: which in-flight message to act on, and whether it is delivered, lost or doubled. */
function lossySchedules(count: number, seed: number): Array<Array<{ pick: number; action: LinkAction }>> {
  return fc.sample(
    fc.array(fc.record({ pick: fc.nat(5), action: fc.constantFrom<LinkAction>("deliver", "deliver", "drop", "duplicate") }), {
      minLength: 4,
      maxLength: 24,
    }),
    { numRuns: count, seed },
  );
}
