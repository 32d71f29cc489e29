import { describe, expect, it } from "vitest";
import { type LeaseBook, memoryArbiter } from "../src/follow/arbiter.ts";
import { BACKGROUND_CONTEXT as ctx, Harness } from "../src/index.ts";
import { type CrashScenario, crashSweep } from "../src/testing/index.ts";
import { twoPlaceSweep } from "../src/testing/two-places/sweep.ts";
import { counterCounted, counterRegistry, startCounter, ticksInOrder } from "./counter-scenario.ts";
import { deferringBackend } from "./deferred-support.ts";
import { mirroredTurn, toolTurn } from "./two-place-support.ts";

// Decision 0081: the two-place sweep (issue 27, decisions 0029 and 0032) on SQLite with the fenced steps' task rows
// waiting in memory, crashed through the database's own image (what waited is lost with the process; the next open
// replays the log). Every commit of both places is a crash point: nothing acknowledged is lost (S4), one transaction
// per position, the unsafe tool at most once. Each run also counts the crashes that found rows waiting.

describe("the two-place crash sweep with deferred task rows (decision 0081)", { timeout: 600_000 }, () => {
  it("S4: a crash at every commit of the tab and the object and at every hand-over message, on a reliable link", async () => {
    const backend = deferringBackend();
    const result = await twoPlaceSweep(toolTurn, { storage: backend });
    expect(result.commits.tab).toBeGreaterThan(3);
    expect(backend.seen.behind).toBeGreaterThan(0);
    console.log(`two-place sweep, deferring, reliable link: ${JSON.stringify(result)}, images ${JSON.stringify(backend.seen)}`);
  });

  it("S4: a tab with a live mirror that crashes at any commit and reloads at once, writing what waited every third commit", async () => {
    const backend = deferringBackend({ flushEvery: 3 });
    const result = await twoPlaceSweep(mirroredTurn, { storage: backend, mirror: true });
    expect(result.forks).toBe(0);
    expect(backend.seen.behind).toBeGreaterThan(0);
    console.log(
      `two-place sweep, deferring, live mirror, the tab reloads: ${JSON.stringify(result)}, images ${JSON.stringify(backend.seen)}`,
    );
  });

  it("S4: a tab with a live mirror that crashes at any commit and stays away past the expiry: the object takes over, nothing with an effect lost", async () => {
    const backend = deferringBackend();
    const result = await twoPlaceSweep(mirroredTurn, { storage: backend, mirror: true, stayAway: true });
    expect(result.forks).toBeGreaterThan(0);
    expect(backend.seen.behind).toBeGreaterThan(0);
    console.log(
      `two-place sweep, deferring, live mirror, the tab stays away: ${JSON.stringify(result)}, images ${JSON.stringify(backend.seen)}`,
    );
  });
});

/** S12's counter (test/counter-scenario.ts, Example 12) under a lease: each memo write is a fenced step that defers. */
function leasedCounter(): CrashScenario<{ clock?: { now(): number }; arbiter?: LeaseBook }> {
  return {
    name: "Example 12 under a lease",
    world: () => ({}),
    open: (storage, clock, world) => {
      const state = world.state;
      state.clock = clock; // the arbiter keeps its record across crashes, on the current process's clock
      state.arbiter ??= memoryArbiter({ clock: { now: () => state.clock!.now() }, ttlMs: 600_000 });
      return Harness.open(storage, { registry: counterRegistry(world), clock, lease: { place: "tab", arbiter: state.arbiter } }, ctx);
    },
    start: startCounter,
    invariants: [counterCounted, ticksInOrder],
  };
}

describe("the crash sweep of a fenced counter with deferred task rows (decision 0081)", { timeout: 600_000 }, () => {
  it("S12/S4: Example 12 under a lease, its memo writes deferred: crashed at every commit boundary (and again during recovery), every tick once and in order", async () => {
    const backend = deferringBackend();
    const result = await crashSweep(leasedCounter(), { storage: backend, double: { sample: 30, seed: 81 } });
    expect(result.commits).toBeGreaterThan(10);
    expect(backend.seen.behind).toBeGreaterThan(0);
    console.log(
      `crashSweep Example 12 under a lease, deferring: ${result.commits} commits, ${result.worlds} worlds, images ${JSON.stringify(backend.seen)}`,
    );
  });
});
