import { describe, expect, it } from "vitest";
import { twoPlaceSweep } from "../src/testing/two-places/sweep.ts";
import { counterTurn } from "./two-place-counter.ts";

// Decisions 0101, 0113 (issue 27): the two-place sweep over the real follow link with S12's counter, whose prints are
// what a user sees. A crash at every commit of both places and before and after every delivered frame. Each tick is
// printed at most once over both places when its print is a declared effect (the sweep's built-in "effects at most
// once" over the world's `once`), no tab print ever follows one of the object's, and a tab whose worker hears its page's
// word but never releases prints and stores nothing from a grace after it.

const followLink = { followLink: true, leaveAtOnce: true, pageLeaving: true } as const;
const lostRelease = { ...followLink, stayAway: true, workerNeverReleases: true } as const;

describe("the two-place sweep with a counter that prints (S12, decisions 0101, 0113)", { timeout: 120_000 }, () => {
  it("S12/S4: a declared print, the page's leaving then the worker's rest and release: every tick at most once over both places, one place at a time", async () => {
    const result = await twoPlaceSweep(counterTurn(true), followLink);
    console.log(`two-place counter, declared print, release: ${JSON.stringify(result)}`);
    expect(result.commits.object).toBeGreaterThan(3);
  });

  it("S12/S4, decision 0101: a declared print, the release lost (the worker dies after its page's word, the tab stays away): every tick at most once", async () => {
    const result = await twoPlaceSweep(counterTurn(true), lostRelease);
    console.log(`two-place counter, declared print, release lost: ${JSON.stringify(result)}`);
    expect(result.takenAtLeaving).toBeGreaterThan(result.worlds / 3);
  });

  it("S12/S4, decision 0113: the worker hears its page's word, never releases and runs on: it stores and prints nothing from a grace after the word; the object takes over", async () => {
    for (const declared of [true, false]) {
      const result = await twoPlaceSweep(counterTurn(declared), { ...lostRelease, workerStaysAlive: true });
      console.log(`two-place counter, ${declared ? "declared" : "plain"} print, the worker stays alive: ${JSON.stringify(result)}`);
      expect(result.takenAtLeaving).toBeGreaterThan(result.worlds / 3);
    }
  });

  it("S12/S4, decision 0113 after review: a pinned lease is not handed over by the page's word — a declared print, the release lost (the worker dies, or stays alive and runs on): every tick at most once, no world taken at the leaving", async () => {
    for (const workerStaysAlive of [false, true]) {
      const result = await twoPlaceSweep(counterTurn(true), { ...lostRelease, workerStaysAlive, ttlMs: Number.POSITIVE_INFINITY });
      console.log(
        `two-place counter, declared print, a pinned lease, the worker ${workerStaysAlive ? "stays alive" : "dies"}: ${JSON.stringify(result)}`,
      );
      expect(result.takenAtLeaving).toBe(0);
      expect(result.worlds).toBeGreaterThan(20);
    }
  });
});
