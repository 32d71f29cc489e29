import { describe, expect, it } from "vitest";
import { counterTask } from "../examples/counter-task.ts";
import { type LeaseBook, memoryArbiter } from "../src/follow/arbiter.ts";
import { createRegistry, BACKGROUND_CONTEXT as ctx, defineExtension, Harness } from "../src/index.ts";
import { type CrashScenario, crashSweep } from "../src/testing/index.ts";
import { twoPlaceSweep } from "../src/testing/two-places/sweep.ts";
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

/** S12's counter (test/crash-sweep.test.ts's Example 12) under a lease: each memo write is a fenced step that defers. */
function leasedCounter(): CrashScenario<{ clock?: { now(): number }; arbiter?: LeaseBook }> {
  const registry = (world: { once(key: string): void; log(line: string): void }) =>
    createRegistry().install(
      defineExtension({
        name: "example",
        tasks: [
          counterTask((line) => {
            world.once(line);
            world.log(line);
          }),
        ],
      }),
    );
  return {
    name: "Example 12 under a lease",
    world: () => ({}),
    open: (storage, clock, world) => {
      const state = world.state;
      state.clock = clock; // the arbiter keeps its record across crashes, on the current process's clock
      state.arbiter ??= memoryArbiter({ clock: { now: () => state.clock!.now() }, ttlMs: 600_000 });
      return Harness.open(storage, { registry: registry(world), clock, lease: { place: "tab", arbiter: state.arbiter } }, ctx);
    },
    start: async (harness) => {
      const root = await harness.root(ctx);
      if ((await harness.storage.listTasks()).length === 0)
        await root.commit(
          (tx) =>
            tx.createTask(
              counterTask(() => {}),
              { to: 5 },
            ),
          ctx,
        );
      harness.resume();
    },
    invariants: [
      async ({ storage }) => {
        const [task] = await storage.listTasks();
        if (task?.state.status !== "terminal" || (task.state.outcome as { result?: unknown }).result !== "counted to 5")
          return `the counter ended ${JSON.stringify(task?.state)}`;
      },
      ({ lines }) => {
        const ticks = lines.map((line) => Number(line.slice(5)));
        if (ticks.some((n, i) => i > 0 && n <= ticks[i - 1]!)) return `ticks out of order or repeated: ${lines.join(", ")}`;
      },
    ],
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
