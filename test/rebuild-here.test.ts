import { describe, expect, it } from "vitest";
import { counterTask } from "../examples/counter-task.ts";
import { followObject } from "../src/browser/follow.ts";
import { LeaseBook, type LeaseRecord } from "../src/follow/arbiter.ts";
import { ObjectEnd } from "../src/follow/object-end.ts";
import { createHost } from "../src/host/host.ts";
import { createRegistry, defineExtension, Harness, type Storage } from "../src/index.ts";
import { openSqliteStorage } from "../src/storage/sqlite/open-storage.ts";
import { socketTo } from "./page-tools-follow-support.ts";
import { ctx } from "./support.ts";

// `serveHarness({ follow: { url, rebuild: true } })` (decision 0047) as the worker serves it: a host whose copy cannot
// follow the object — here a new device's, behind the object's trimmed log — rebuilds it from the object's snapshot by
// itself, opens its harness again and follows the object live; its page sees the conversation.

describe("a worker that rebuilds its copy by itself (issue 27, decision 0047)", () => {
  it("0047: a new device's worker with follow.rebuild, behind the object's trimmed log, rebuilds from the snapshot, follows the object live and its page reads the conversation", async () => {
    const registry = (_place: string) => createRegistry().install(defineExtension({ name: "example", tasks: [counterTask(() => {})] }));
    let record: LeaseRecord = { epoch: 0 };
    const clock = { now: () => Date.now(), setTimer: (ms: number, fire: () => void) => clearTimeout.bind(null, setTimeout(fire, ms)) };
    const book = new LeaseBook({ clock, ttlMs: 60_000, load: () => record, save: (next) => void (record = next) });
    const copy = await openSqliteStorage({ vfs: "memory" });
    const end = await ObjectEnd.start({
      place: "object",
      storage: copy,
      book,
      clock,
      keepLog: 4,
      open: (storage: Storage, lease) => Harness.open(storage, { registry: registry("object"), lease, resume: true }, ctx),
    });
    /** A worker's host on `storage`, following the object as `place` (a page load). */
    const load = (place: string, storage: Storage, rebuild?: boolean, gate?: { started(): void; open: Promise<void> }) => {
      const follow = followObject({
        url: "ws://object/follow",
        place,
        ...(rebuild === undefined ? {} : { rebuild }),
        connect: () => socketTo(end),
      });
      const rebuilding = follow.rebuild && {
        when: follow.rebuild.when,
        closesCopy: true,
        // Passes `closeCopy` on and says so, as worker.ts does (`closesCopy`; a run that does not say it has the copy closed
        // first: the review of decision 0132, L2).
        run: async (storage: Storage, closeCopy: () => Promise<void>) => {
          gate?.started();
          await gate?.open;
          return follow.rebuild!.run(storage, closeCopy);
        },
      };
      const host = createHost({
        database: place,
        openStorage: async () => storage,
        harness: { registry: registry(place), resume: true, lease: follow.lease, serverCalls: follow.serverCalls },
        onReady: (harness) => follow.attach(harness),
        leave: (handedOver) => follow.leave(handedOver),
        takeBack: () => follow.takeBack(),
        ...(rebuilding ? { rebuild: rebuilding } : {}),
        now: () => performance.now(),
      });
      return { follow, host, service: host.service };
    };
    // The first tab counts and leaves at tick 2: the object takes over, counts on and trims its log.
    const tab = load("tab", await openSqliteStorage({ vfs: "memory" }), false);
    await tab.host.ready;
    const taskId = await tab.service.createTask("example.counter", { to: 40 });
    await expect
      .poll(async () => ((await tab.service.getTask(taskId))?.state as { checkpoint?: { n: number } } | undefined)?.checkpoint?.n ?? 0, {
        timeout: 5_000,
      })
      .toBeGreaterThanOrEqual(3);
    tab.service.leave();
    await expect.poll(() => end.harness !== undefined, { timeout: 5_000 }).toBe(true);
    tab.follow.close();
    const object = (await end.harness)!;
    await expect.poll(async () => ((await copy.readLog(0, 1))[0]?.fence.position ?? 0) > 2, { timeout: 10_000 }).toBe(true);

    // A new device: an empty database, behind the trim. It rebuilds by itself (the default now, decision 0053) and
    // follows.
    const phoneStorage = await openSqliteStorage({ vfs: "memory" });
    let started = () => {};
    const rebuildStarted = new Promise<void>((resolve) => (started = resolve));
    let open = () => {};
    const phone = load("phone", phoneStorage, undefined, { started, open: new Promise<void>((resolve) => (open = resolve)) });
    await phone.host.ready;
    expect(phone.service.status()).toMatchObject({ kind: "ready", runs: "elsewhere" });
    // The page's first calls land while the host rebuilds: a write (the root conversation) and a watch wait for the copy
    // it opens next instead of failing with "not open" (seen in Chromium: the demo's first steps failed on a new
    // device); a read answers from the copy still open, as it was (empty here: decision 0127).
    await rebuildStarted;
    const seen: number[] = [];
    const root = phone.service.rootConversation();
    const counted = phone.service.query("SELECT COUNT(*) AS n FROM tasks");
    const stopWatching = phone.service.watchConversation(1, () => void seen.push(1));
    expect(await counted).toEqual([{ n: 0 }]);
    open();
    await expect.poll(() => phone.service.query("SELECT COUNT(*) AS n FROM tasks"), { timeout: 5_000 }).toEqual([{ n: 1 }]);
    (await stopWatching)();
    await expect.poll(async () => (await phone.service.getTask(taskId))?.state.status, { timeout: 15_000 }).toBe("terminal");
    expect((await phone.service.getTask(taskId))?.state).toMatchObject({ outcome: { status: "completed", result: "counted to 40" } });
    await expect.poll(async () => (await phoneStorage.load()).log?.position, { timeout: 5_000 }).toBe(object.lease!.position);
    expect(phone.service.status()).toMatchObject({ kind: "ready", runs: "elsewhere" });
    expect(await root).toBe(await (await object.root(ctx)).id);
    await phone.service.close();
    phone.follow.close();
    await object.close(ctx);
  }, 40_000);
});
