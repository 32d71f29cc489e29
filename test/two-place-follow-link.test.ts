import fc from "fast-check";
import { describe, expect, it } from "vitest";
import type { LinkAction } from "../src/testing/two-places/link.ts";
import { twoPlaceSweep } from "../src/testing/two-places/sweep.ts";
import { leavingTurn, mirroredTurn, toolTurn } from "./two-place-support.ts";

// Issue 27 item 6 (decision 0040): the two-place sweep driving the product's follow link — the tab's real FollowLink,
// remoteArbiter and Mirror, the object's real ObjectEnd, their text frames on a link that loses, duplicates and
// reorders — with a crash at every commit of both places and at every frame delivered. Zero violations: one
// transaction per position, one result per tool call, unsafe tools at most once, nothing lost.

describe("the two-place sweep over the real follow link (Mirror + ObjectEnd, issue 27 item 6)", { timeout: 900_000 }, () => {
  it("S4/S8: the tab hands over while the unsafe tool runs (drained), a crash at every commit of both places and at every frame", async () => {
    const result = await twoPlaceSweep(toolTurn, { followLink: true });
    expect(result.commits.tab).toBeGreaterThan(3);
    expect(result.commits.object).toBeGreaterThan(3);
    expect(result.messages).toBeGreaterThan(6); // lease calls and answers, pushes, acks, release
    console.log(`two-place sweep, follow link, drained hand-over: ${JSON.stringify(result)}`);
  });

  it("S4/S8: the tab leaves as a closing page's worker does (no drain, the rest and the release at once)", async () => {
    const result = await twoPlaceSweep(toolTurn, { followLink: true, leaveAtOnce: true });
    expect(result.commits.object).toBeGreaterThan(3);
    console.log(`two-place sweep, follow link, leave at once: ${JSON.stringify(result)}`);
  });

  it("S4/S8, decision 0101: the closing page also says lease.leaving at the acknowledged head before its worker's rest and release: a crash at every commit and at every frame, that one included", async () => {
    const result = await twoPlaceSweep(toolTurn, { followLink: true, leaveAtOnce: true, pageLeaving: true });
    expect(result.commits.object).toBeGreaterThan(3);
    const without = await twoPlaceSweep(toolTurn, { followLink: true, leaveAtOnce: true });
    expect(result.messages).toBeGreaterThan(without.messages); // the leaving and its answer are delivered frames too
    console.log(`two-place sweep, follow link, the page's leaving then the worker's: ${JSON.stringify(result)}`);
  });

  it("S4/S8, decision 0101: the page says lease.leaving and its worker never releases (killed, the tab stays away): the object takes over a grace later at what its copy holds; a crash at every commit and at every frame, zero violations, the tab's unpushed stretch a counted fork", async () => {
    const alone = { followLink: true, leaveAtOnce: true, pageLeaving: true, stayAway: true, workerNeverReleases: true };
    const result = await twoPlaceSweep(leavingTurn, alone);
    expect(result.commits.object).toBeGreaterThan(3);
    // The path is exercised: in most worlds the object took the lease before the tab's whole lease ran out, with no
    // release from its worker (0 when LeaseBook.leaving does nothing).
    expect(result.takenAtLeaving).toBeGreaterThan(result.worlds / 3);
    console.log(`two-place sweep, follow link, the page's leaving alone: ${JSON.stringify(result)}`);
    for (const schedule of lossySchedules(2, 42)) {
      const lossy = await twoPlaceSweep(leavingTurn, { ...alone, schedule });
      console.log(`two-place sweep, follow link, the page's leaving alone, lossy link: ${JSON.stringify(lossy)}`);
    }
  });

  it("S4/S8, decision 0101: the page's leaving then the worker's rest and release, the tab staying away after any crash: zero violations", async () => {
    const result = await twoPlaceSweep(leavingTurn, { followLink: true, leaveAtOnce: true, pageLeaving: true, stayAway: true });
    expect(result.forks).toBeGreaterThan(0); // a tab that crashed with unpushed commits and stayed away
    console.log(`two-place sweep, follow link, the page's leaving, the tab stays away after a crash: ${JSON.stringify(result)}`);
  });

  it("the same on links that lose, duplicate and reorder frames (fast-check schedules), both ways of leaving", async () => {
    for (const [index, schedule] of lossySchedules(6, 40).entries()) {
      const result = await twoPlaceSweep(toolTurn, { followLink: true, leaveAtOnce: index % 2 === 0, schedule });
      console.log(`two-place sweep, follow link, lossy link: ${JSON.stringify(result)}`);
    }
  });

  it("decision 0032 over the real Mirror: a tab that crashes at any commit and reloads at once takes a new epoch and finishes with the object following", async () => {
    const result = await twoPlaceSweep(mirroredTurn, { followLink: true });
    expect(result.forks).toBe(0);
    console.log(`two-place sweep, follow link, the tab reloads: ${JSON.stringify(result)}`);
  });

  it("decision 0032 over the real Mirror: a tab that crashes at any commit and stays away past the expiry; nothing with an effect is lost", async () => {
    const result = await twoPlaceSweep(mirroredTurn, { followLink: true, stayAway: true });
    expect(result.commits.tab).toBeGreaterThan(5);
    expect(result.forks).toBeGreaterThan(0);
    console.log(`two-place sweep, follow link, the tab stays away: ${JSON.stringify(result)}`);
  });

  it("the same on lossy links (fast-check schedules)", async () => {
    for (const schedule of lossySchedules(3, 41)) {
      const result = await twoPlaceSweep(mirroredTurn, { followLink: true, stayAway: true, schedule });
      console.log(`two-place sweep, follow link, the tab stays away, lossy link: ${JSON.stringify(result)}`);
    }
  });

  it("a partition in the takeover mode from a fast-check-chosen turn: the tab stops at its expiry, the object takes over", async () => {
    for (const from of fc.sample(fc.integer({ min: 4, max: 14 }), { numRuns: 2, seed: 40 })) {
      const result = await twoPlaceSweep(mirroredTurn, { followLink: true, partition: { from, to: from + 110 } });
      expect(result.forks).toBeGreaterThan(0); // the tab went on past the last acknowledgement: its stretch is a fork
      console.log(`two-place sweep, follow link, partition from turn ${from}, takeover lease: ${JSON.stringify(result)}`);
    }
  });

  it("a partition in the pinned mode: the tab finishes alone, the object's copy catches up", async () => {
    const result = await twoPlaceSweep(mirroredTurn, {
      followLink: true,
      ttlMs: Number.POSITIVE_INFINITY,
      partition: { from: 6, to: 120 },
    });
    console.log(`two-place sweep, follow link, partition, pinned lease: ${JSON.stringify(result)}`);
  });
});

/** Link schedules drawn by fast-check: which in-flight frame to act on, and whether it is delivered, lost or doubled. */
function lossySchedules(count: number, seed: number): Array<Array<{ pick: number; action: LinkAction }>> {
  return fc.sample(
    fc.array(fc.record({ pick: fc.nat(5), action: fc.constantFrom<LinkAction>("deliver", "deliver", "drop", "duplicate") }), {
      minLength: 4,
      maxLength: 24,
    }),
    { numRuns: count, seed },
  );
}
