import { describe, expect, it } from "vitest";
import { counterTask } from "../examples/counter-task.ts";
import { systemClock } from "../src/base/clock.ts";
import { followObject } from "../src/browser/follow.ts";
import { LeaseBook, type LeaseRecord } from "../src/follow/arbiter.ts";
import { ObjectEnd } from "../src/follow/object-end.ts";
import { createHost } from "../src/host/host.ts";
import { createRegistry, defineExtension, Harness, type Storage } from "../src/index.ts";
import { openSqliteStorage } from "../src/storage/sqlite/open-storage.ts";
import { objectTakesOverTheCount, recordingRebuild, socketTo } from "./page-tools-follow-support.ts";
import { ctx } from "./support.ts";

// Decision 0070 (issue 27; e2e/rebuild.e2e.ts's forked-offline case, 1 failure in 4 under load): each load of a tab
// whose copy cannot follow its object takes a new snapshot, and the object gives one caller 3 takes, one more every
// 10 s (decision 0053). Reloads in the middle of a rebuild spend them (a take resent by the link as its answer crossed
// it spends one more); the next load's take is answered `busy`. Before, that rebuild failed for good: the worker asked
// again only after its link reconnected, and with the link up the copy stayed as it was until the next load. Now the
// worker asks again on a timer (1 s, doubling to 30 s) and rebuilds once the object has a take for it.

describe("a worker whose rebuild the object refused as busy (decision 0070)", () => {
  it("0070 (0053): a load whose snapshot take is answered busy (the place's takes spent by an earlier load) rebuilds by itself once a take is free, with its link up all along", async () => {
    const registry = (_place: string) => createRegistry().install(defineExtension({ name: "example", tasks: [counterTask(() => {})] }));
    let record: LeaseRecord = { epoch: 0 };
    const clock = systemClock; // real time: the worker's retry timer and the object's take refill run on it
    const book = new LeaseBook({ clock, ttlMs: 60_000, load: () => record, save: (next) => void (record = next) });
    const copy = await openSqliteStorage({ vfs: "memory" });
    const end = await ObjectEnd.start({
      place: "object",
      storage: copy,
      book,
      clock,
      keepLog: 4,
      // One take per caller, one more every 1.5 s: the second load finds its place's take spent.
      snapshotLimits: { burst: 1, everyMs: 1_500 },
      open: (storage: Storage, lease) => Harness.open(storage, { registry: registry("object"), lease, resume: true }, ctx),
    });
    const loads: Array<{ close(): void }> = [];
    /** A worker's host on `storage`, following the object as `place` (a page load); `taken` counts its takes. */
    const load = (place: string, storage: Storage, rebuild?: boolean) => {
      const follow = followObject({
        url: "ws://object/follow",
        place,
        ...(rebuild === undefined ? {} : { rebuild }),
        connect: () => socketTo(end),
      });
      const outcomes: string[] = [];
      const host = createHost({
        database: place,
        openStorage: async () => storage,
        harness: { registry: registry(place), resume: true, lease: follow.lease, serverCalls: follow.serverCalls },
        onReady: (harness) => follow.attach(harness),
        leave: (handedOver) => follow.leave(handedOver),
        ...(follow.rebuild ? { rebuild: recordingRebuild({ when: follow.rebuild.when, run: follow.rebuild.run }, outcomes) } : {}),
        now: () => performance.now(),
      });
      loads.push({ close: () => follow.close() });
      return { follow, host, service: host.service, outcomes };
    };
    // The first tab counts and leaves: the object takes over, counts on and trims its log.
    const tab = load("tab", await openSqliteStorage({ vfs: "memory" }), false);
    await tab.host.ready;
    const taskId = await objectTakesOverTheCount(tab.service, end, copy, () => tab.follow.close());

    // A phone's first load rebuilds (its place's one take), then goes (a reload).
    const first = load("phone", await openSqliteStorage({ vfs: "memory" }));
    await first.host.ready;
    await expect.poll(() => first.outcomes, { timeout: 10_000 }).toEqual(["rebuilt"]);
    await first.service.close();
    first.follow.close();

    // Its next load, at once: the take is answered busy. It rebuilds by itself once the object has a take again.
    const phoneStorage = await openSqliteStorage({ vfs: "memory" });
    const next = load("phone", phoneStorage);
    await next.host.ready;
    await expect.poll(() => next.outcomes[0], { timeout: 10_000 }).toBe("SnapshotUnavailable");
    await expect.poll(() => next.outcomes.at(-1), { timeout: 15_000, message: "the busy load rebuilt by itself" }).toBe("rebuilt");
    expect(next.outcomes.filter((outcome) => outcome === "rebuilt")).toHaveLength(1);
    // Its copy is the object's: the task is there, and it follows live.
    await expect.poll(async () => (await next.service.getTask(taskId))?.id, { timeout: 5_000 }).toBe(taskId);
    expect(next.service.status()).toMatchObject({ kind: "ready", runs: "elsewhere" });
    await next.service.close();
    for (const each of loads) each.close();
    await (await end.harness)?.close(ctx);
  }, 60_000);
});
