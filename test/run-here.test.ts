import { describe, expect, it } from "vitest";
import { counterTask } from "../examples/counter-task.ts";
import { followObject } from "../src/browser/follow.ts";
import type { SocketLike } from "../src/browser/socket.ts";
import { LeaseBook, type LeaseRecord } from "../src/follow/arbiter.ts";
import { ObjectEnd } from "../src/follow/object-end.ts";
import { createHost } from "../src/host/host.ts";
import type { HarnessStatus } from "../src/host/protocol.ts";
import { createRegistry, defineExtension, Harness, type Storage } from "../src/index.ts";
import { openSqliteStorage } from "../src/storage/sqlite/open-storage.ts";
import { ctx } from "./support.ts";

// `client.runHere()` (decision 0038) as the worker serves it: the host's harness under the object's lease follows the
// object read-only; runHere asks for the lease back, opens the harness again under it, and the page's views move.

/** An in-memory socket from a tab's follow link to `end`: each frame on a later turn, in order. */
function socketTo(end: ObjectEnd): SocketLike {
  const listeners: Record<string, Array<(event?: { data: unknown }) => void>> = { open: [], message: [], close: [], error: [] };
  const toTab = (frame: string) =>
    setTimeout(() => {
      for (const listener of listeners.message!) listener({ data: frame });
    }, 0);
  const connection = {};
  setTimeout(() => {
    for (const listener of listeners.open!) listener();
  }, 0);
  return {
    send: (frame: string) => setTimeout(() => void end.receive(frame, toTab, () => true, connection), 0),
    close() {},
    addEventListener(type: string, listener: (event?: { data: unknown }) => void) {
      listeners[type]!.push(listener);
    },
  } as SocketLike;
}

describe("runHere: the agent moves back to the tab (issue 27 item 3, decision 0038)", () => {
  it("S4/S12: the page's view moves while the object counts; runHere takes the lease back and the tab counts to the end, every tick once", async () => {
    const printed: Array<[string, string]> = [];
    const registry = (place: string) =>
      createRegistry().install(defineExtension({ name: "example", tasks: [counterTask((line) => void printed.push([place, line]))] }));
    let record: LeaseRecord = { epoch: 0 };
    const book = new LeaseBook({
      clock: { now: () => Date.now() },
      ttlMs: 60_000,
      load: () => record,
      save: (next) => void (record = next),
    });
    const end = await ObjectEnd.start({
      place: "object",
      storage: await openSqliteStorage({ vfs: "memory" }),
      book,
      clock: { now: () => Date.now(), setTimer: (ms, fire) => clearTimeout.bind(null, setTimeout(fire, ms)) },
      open: (storage: Storage, lease) => Harness.open(storage, { registry: registry("object"), lease, resume: true }, ctx),
    });
    const tabStorage = await openSqliteStorage({ vfs: "memory" });
    /** A worker's host on the tab's storage, following the object (a page load). */
    const load = () => {
      const follow = followObject({ url: "ws://object/follow", connect: () => socketTo(end) });
      const host = createHost({
        database: "tab",
        openStorage: async () => tabStorage,
        harness: { registry: registry("tab"), resume: true, lease: follow.lease, serverCalls: follow.serverCalls },
        onReady: (harness) => follow.attach(harness),
        leave: () => follow.leave(),
        takeBack: () => follow.takeBack(),
        now: () => performance.now(),
      });
      return { follow, host, service: host.service };
    };
    // The tab runs the counter and leaves at tick 2 (its pagehide): the object takes over.
    const first = load();
    await first.host.ready;
    const taskId = await first.service.createTask("example.counter", { to: 12 });
    await expect.poll(() => printed.length, { timeout: 5_000 }).toBeGreaterThanOrEqual(2);
    first.service.leave();
    await expect.poll(() => end.harness !== undefined, { timeout: 5_000 }).toBe(true);
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
    expect(record).toMatchObject({ epoch: 3, holder: "tab" });
    // The view the page held before runHere went on after it (moved to the reopened harness).
    expect(views).toBeGreaterThan(before);
    expect(statuses.some((status) => status.kind === "ready" && status.runs === "here")).toBe(true);
    await back.service.close();
    back.follow.close();
    await (await end.harness)?.close(ctx);
  }, 30_000);
});
