import { describe, expect, it } from "vitest";
import { counterTask } from "../examples/counter-task.ts";
import { systemClock } from "../src/base/clock.ts";
import { followObject } from "../src/browser/follow.ts";
import { LeaseBook, type LeaseRecord } from "../src/follow/arbiter.ts";
import { ObjectEnd } from "../src/follow/object-end.ts";
import { createHost } from "../src/host/host.ts";
import { createRegistry, defineExtension, Harness, type Storage } from "../src/index.ts";
import { openSqliteStorage } from "../src/storage/sqlite/open-storage.ts";
import { createManualClock } from "../src/testing/clock.ts";
import { objectTakesOverTheCount, recordingRebuild, socketTo } from "./page-tools-follow-support.ts";
import { ctx } from "./support.ts";

// Decision 0078 (after decision 0070): a worker whose rebuild fails on something that passes by itself asks again on
// a timer, 1 s doubling to 30 s. Before, the timer had no bound: a copy the object never served (here: a take limit
// of 0) asked every 30 s for as long as the page stayed open, and the page was never told. Now it stops after
// REBUILD_TRIES failures in a row (or the app's follow.rebuildTries), the ready status says so (`rebuild: { kind: "stopped", tries, error }`), and the
// page's `retryRebuild()` tries again. The worker's clock is a manual one: the test moves it past every retry.

/** The phone's `follow.rebuildTries` (the default, REBUILD_TRIES, is test/rebuild-tries-option.test.ts's). */
const TRIES = 3;

const settle = () => new Promise((resolve) => setTimeout(resolve, 25));

describe("the rebuild retry is bounded (decision 0078)", () => {
  it("0078 (0070): a rebuild the object keeps refusing as busy stops after follow.rebuildTries tries, the status says so, and retryRebuild() tries again", async () => {
    const registry = () => createRegistry().install(defineExtension({ name: "example", tasks: [counterTask(() => {})] }));
    let record: LeaseRecord = { epoch: 0 };
    const book = new LeaseBook({ clock: systemClock, ttlMs: 60_000, load: () => record, save: (next) => void (record = next) });
    const copy = await openSqliteStorage({ vfs: "memory" });
    const end = await ObjectEnd.start({
      place: "object",
      storage: copy,
      book,
      clock: systemClock,
      keepLog: 4,
      snapshotLimits: { burst: 0 }, // every take answered busy: the object never serves this copy
      open: (storage: Storage, lease) => Harness.open(storage, { registry: registry(), lease, resume: true }, ctx),
    });
    const follows: Array<{ close(): void }> = [];
    const load = (place: string, storage: Storage, clock = systemClock as typeof systemClock, rebuild?: boolean, rebuildTries?: number) => {
      const follow = followObject(
        {
          url: "ws://object/follow",
          place,
          ...(rebuild === undefined ? {} : { rebuild }),
          ...(rebuildTries === undefined ? {} : { rebuildTries }),
          connect: () => socketTo(end),
        },
        clock,
      );
      follows.push(follow);
      const outcomes: string[] = [];
      const host = createHost({
        database: place,
        openStorage: async () => storage,
        harness: { registry: registry(), resume: true, lease: follow.lease, serverCalls: follow.serverCalls },
        onReady: (harness) => follow.attach(harness),
        leave: (handedOver) => follow.leave(handedOver),
        ...(follow.rebuild ? { rebuild: recordingRebuild(follow.rebuild, outcomes) } : {}),
        now: () => performance.now(),
      });
      return { host, service: host.service, outcomes };
    };
    // A first tab counts and leaves: the object takes over, counts on and trims its log past a new device's copy.
    const tab = load("tab", await openSqliteStorage({ vfs: "memory" }), systemClock, false);
    await tab.host.ready;
    await objectTakesOverTheCount(tab.service, end, copy, () => follows[0]!.close());

    // A new device, its worker on a manual clock and told to stop after TRIES failures: its first rebuild is refused
    // at once.
    const clock = createManualClock(0);
    const phone = load("phone", await openSqliteStorage({ vfs: "memory" }), clock, undefined, TRIES);
    await phone.host.ready;
    await expect.poll(() => phone.outcomes.length, { timeout: 10_000 }).toBe(1);
    // Each retry waits 1 s doubling to 30 s: move the worker's clock a second at a time (each step gives the link's
    // frames a real moment, so no call outlives its 15 s timeout on the moved clock) for 2 minutes, far past the last.
    for (let second = 0; second < 120; second++) {
      clock.advance(1_000);
      await settle();
    }
    await expect.poll(() => phone.service.status().kind, { timeout: 10_000 }).toBe("ready");
    expect(phone.outcomes).toEqual(Array(TRIES).fill("SnapshotUnavailable"));
    expect(phone.service.status()).toMatchObject({
      kind: "ready",
      runs: "elsewhere",
      rebuild: { kind: "stopped", tries: TRIES, error: { name: "SnapshotUnavailable" } },
    });

    // The page asks again: one more try at once, and the timer's count starts afresh.
    await phone.service.retryRebuild();
    expect(phone.outcomes).toHaveLength(TRIES + 1);
    await expect.poll(() => phone.service.status().kind, { timeout: 10_000 }).toBe("ready");
    expect(phone.service.status()).not.toHaveProperty("rebuild"); // one failure: retrying by itself again
    clock.advance(1_000);
    await expect.poll(() => phone.outcomes.length, { timeout: 10_000 }).toBe(TRIES + 2);

    await phone.service.close();
    for (const each of follows) each.close();
    await (await end.harness)?.close(ctx);
  }, 90_000);
});
