import { describe, expect, it } from "vitest";
import { counterTask } from "../examples/counter-task.ts";
import { followObject } from "../src/browser/follow.ts";
import { LeaseBook, type LeaseRecord } from "../src/follow/arbiter.ts";
import { ObjectEnd } from "../src/follow/object-end.ts";
import { createHost } from "../src/host/host.ts";
import type { HarnessStatus } from "../src/host/protocol.ts";
import { createRegistry, defineExtension, Harness, type Storage } from "../src/index.ts";
import { openSqliteStorage } from "../src/storage/sqlite/open-storage.ts";
import { socketTo } from "./page-tools-follow-support.ts";
import { ctx } from "./support.ts";

// `client.runHere()` (decision 0038) as the worker serves it: the host's harness under the object's lease follows the
// object read-only; runHere asks for the lease back, opens the harness again under it, and the page's views move.

/** The object's end over an in-memory copy (60 s leases), a counter's prints recorded with the place that printed. */
async function countingObject() {
  const printed: Array<[string, string]> = [];
  const registry = (place: string) =>
    createRegistry().install(defineExtension({ name: "example", tasks: [counterTask((line) => void printed.push([place, line]))] }));
  let record: LeaseRecord = { epoch: 0 };
  const book = new LeaseBook({ clock: { now: () => Date.now() }, ttlMs: 60_000, load: () => record, save: (next) => void (record = next) });
  const end = await ObjectEnd.start({
    place: "object",
    storage: await openSqliteStorage({ vfs: "memory" }),
    book,
    clock: { now: () => Date.now(), setTimer: (ms, fire) => clearTimeout.bind(null, setTimeout(fire, ms)) },
    open: (storage: Storage, lease) => Harness.open(storage, { registry: registry("object"), lease, resume: true }, ctx),
  });
  return { printed, registry, end, record: () => record };
}

describe("runHere: the agent moves back to the tab (issue 27 item 3, decision 0038)", () => {
  it("S4/S12: the page's view moves while the object counts; runHere takes the lease back and the tab counts to the end, every tick once", async () => {
    const { printed, registry, end, record } = await countingObject();
    const tabStorage = await openSqliteStorage({ vfs: "memory" });
    /** A worker's host on the tab's storage, following the object (a page load). */
    const load = (storage: Storage = tabStorage) => {
      const follow = followObject({ url: "ws://object/follow", connect: () => socketTo(end) });
      const host = createHost({
        database: "tab",
        openStorage: async () => storage,
        harness: { registry: registry("tab"), resume: true, lease: follow.lease, serverCalls: follow.serverCalls },
        onReady: (harness) => follow.attach(harness),
        leave: (handedOver) => follow.leave(handedOver),
        takeBack: () => follow.takeBack(),
        now: () => performance.now(),
      });
      return { follow, host, service: host.service };
    };
    // The tab runs the counter and leaves at tick 2 (its pagehide): the object takes over.
    // The first page's worker dies with its page: its host's close may not close the storage the next load opens.
    const first = load(
      new Proxy(tabStorage, {
        get: (target, key) =>
          key === "close" ? async () => {} : ((v) => (typeof v === "function" ? v.bind(target) : v))(Reflect.get(target, key)),
      }),
    );
    await first.host.ready;
    const taskId = await first.service.createTask("example.counter", { to: 12 });
    await expect.poll(() => printed.length, { timeout: 5_000 }).toBeGreaterThanOrEqual(2);
    await first.service.leave();
    expect(end.harness).toBeDefined();
    // The closed page's worker is gone with it: its harness, open again read-only after the hand-over, closes.
    await first.service.close();
    first.follow.close();
    // The page comes back: read-only, the agent elsewhere; its view of the conversation moves with the object.
    const back = load();
    await back.host.ready;
    const statuses: HarnessStatus[] = [];
    back.service.onStatus((status) => statuses.push(status));
    expect(back.service.status()).toMatchObject({ kind: "ready", runs: "elsewhere" });
    const root = await back.service.rootConversation();
    let views = 0;
    back.service.watchConversation(root, () => void views++);
    const checkpoint = async () => (await back.service.getTask(taskId))?.state;
    await expect
      .poll(async () => ((await checkpoint()) as { checkpoint?: { n: number } }).checkpoint?.n ?? 0, { timeout: 5_000 })
      .toBeGreaterThanOrEqual(5);
    // Run here: the tab takes the lease back and counts on.
    await back.service.runHere();
    const before = views;
    expect(back.service.status()).toMatchObject({ kind: "ready", runs: "here" });
    await expect.poll(async () => (await checkpoint())?.status, { timeout: 10_000 }).toBe("terminal");
    expect(printed.map(([, line]) => line)).toEqual(Array.from({ length: 12 }, (_, index) => `tick ${index + 1}`));
    const places = printed.map(([place]) => place);
    const returned = places.indexOf("tab", 2);
    expect(places.slice(2, returned).every((place) => place === "object")).toBe(true);
    expect(places.slice(returned).every((place) => place === "tab")).toBe(true);
    expect(record()).toMatchObject({ epoch: 3, holder: "tab" });
    // The view the page held before runHere went on after it (moved to the reopened harness).
    expect(views).toBeGreaterThan(before);
    expect(statuses.some((status) => status.kind === "ready" && status.runs === "here")).toBe(true);
    await back.service.close();
    back.follow.close();
    await (await end.harness)?.close(ctx);
  }, 30_000);

  it("S4/S5: a page that stays after leave() follows the object live (read-only, the epoch moves) and runHere brings the count back; every tick once (decision 0045)", async () => {
    const { printed, registry, end } = await countingObject();
    const follow = followObject({ url: "ws://object/follow", connect: () => socketTo(end) });
    const host = createHost({
      database: "tab",
      openStorage: () => openSqliteStorage({ vfs: "memory" }),
      harness: { registry: registry("tab"), resume: true, lease: follow.lease, serverCalls: follow.serverCalls },
      onReady: (harness) => follow.attach(harness),
      leave: (handedOver) => follow.leave(handedOver),
      takeBack: () => follow.takeBack(),
      now: () => performance.now(),
    });
    const service = host.service;
    await host.ready;
    expect(service.status()).toMatchObject({ kind: "ready", runs: "here", epoch: 1 });
    const taskId = await service.createTask("example.counter", { to: 12 });
    const n = async () => ((await service.getTask(taskId))?.state as { checkpoint?: { n: number } } | undefined)?.checkpoint?.n ?? 0;
    await expect.poll(() => printed.length, { timeout: 5_000 }).toBeGreaterThanOrEqual(2);
    // Move to the object: once the object took the lease the same page's harness is open again, read-only.
    await service.leave();
    expect(service.status()).toMatchObject({ kind: "ready", runs: "elsewhere" });
    const left = printed.length;
    // It follows live: the object's checkpoints arrive, and the status names the object's epoch.
    await expect.poll(n, { timeout: 5_000 }).toBeGreaterThanOrEqual(left + 3);
    expect(service.status()).toMatchObject({ kind: "ready", runs: "elsewhere", epoch: 2 });
    expect(printed.slice(left).every(([place]) => place === "object")).toBe(true);
    // And back: run here takes epoch 3 and the tab counts to the end.
    await service.runHere();
    expect(service.status()).toMatchObject({ kind: "ready", runs: "here", epoch: 3 });
    await expect.poll(async () => (await service.getTask(taskId))?.state.status, { timeout: 10_000 }).toBe("terminal");
    expect(printed.map(([, line]) => line)).toEqual(Array.from({ length: 12 }, (_, index) => `tick ${index + 1}`));
    expect(printed.at(-1)).toEqual(["tab", "tick 12"]);
    await service.close();
    follow.close();
    await (await end.harness)?.close(ctx);
  }, 30_000);
});
