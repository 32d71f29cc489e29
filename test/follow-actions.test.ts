import { describe, expect, it } from "vitest";
import { systemClock } from "../src/base/clock.ts";
import { followObject } from "../src/browser/follow.ts";
import { writesThroughObject } from "../src/browser/follow-writes.ts";
import { TAB_FOLLOW_ACTIONS, WATCH_FOLLOW_ACTIONS } from "../src/cloudflare/index.ts";
import { LeaseBook, type LeaseRecord } from "../src/follow/arbiter.ts";
import { ObjectEnd } from "../src/follow/object-end.ts";
import type { FollowAction } from "../src/follow/object-end-options.ts";
import { encodeFollowMessage } from "../src/follow/wire.ts";
import { createHost } from "../src/host/host.ts";
import { createRegistry, Harness, type Storage } from "../src/index.ts";
import { openSqliteStorage } from "../src/storage/sqlite/open-storage.ts";
import { ctx } from "./support.ts";

// Decision 0107: an app whose follow.authorize lists actions by name allows `TAB_FOLLOW_ACTIONS` (pi-durable-web/
// cloudflare) instead of copying names, so a new one (lease.leaving, decision 0101) is not refused by a list written
// before it. This checks that the list names every action a tab and a second device ask in a whole journey: take the
// lease, push, a new device rebuilt and following, its submit and decision through the object, the page's leaving,
// the hand-over, and the lease taken back.

/** An in-memory follow socket to `end` whose every frame asks `authorize`, each on a later turn. */
function recordingSocket(end: ObjectEnd, asked: Set<FollowAction>) {
  const listeners: Record<string, Array<(event?: { data: unknown }) => void>> = { open: [], message: [], close: [], error: [] };
  let open = true;
  const connection = {};
  const fire = (type: string, event?: { data: unknown }) => {
    for (const listener of listeners[type]!) listener(event);
  };
  const toTab = (frame: string) => setTimeout(() => open && fire("message", { data: frame }), 0);
  setTimeout(() => fire("open"), 0);
  const authorize = (action: FollowAction) => {
    asked.add(action);
    return true;
  };
  return {
    send: (frame: string) => setTimeout(() => open && void end.receive(frame, toTab, authorize, connection), 0),
    close() {
      if (!open) return;
      open = false;
      end.drop(connection);
      fire("close");
    },
    addEventListener(type: string, listener: (event?: { data: unknown }) => void) {
      listeners[type]!.push(listener);
    },
  };
}

describe("TAB_FOLLOW_ACTIONS (decision 0107)", () => {
  it("names every action a tab and a following device ask of follow.authorize in a whole journey", async () => {
    const asked = new Set<FollowAction>();
    let record: LeaseRecord = { epoch: 0 };
    const book = new LeaseBook({ clock: systemClock, ttlMs: 60_000, load: () => record, save: (next) => void (record = next) });
    const end = await ObjectEnd.start({
      place: "object",
      storage: await openSqliteStorage({ vfs: "memory" }),
      book,
      clock: systemClock,
      roundBytes: 1, // a new device rebuilds from the snapshot
      open: (storage: Storage, lease) => Harness.open(storage, { registry: createRegistry(), lease, resume: true }, ctx),
    });
    const load = (place: string) => {
      const follow = followObject({ url: "ws://object/follow", place, rebuild: true, connect: () => recordingSocket(end, asked) as never });
      const host = createHost({
        database: place,
        openStorage: () => openSqliteStorage({ vfs: "memory" }),
        harness: { registry: createRegistry(), resume: true, lease: follow.lease, serverCalls: follow.serverCalls },
        onReady: (harness) => follow.attach(harness),
        rebuild: follow.rebuild!,
        leave: follow.leave,
        takeBack: follow.takeBack,
        now: () => performance.now(),
      });
      return { host, follow };
    };
    const tab = load("tab");
    await tab.host.ready;
    const root = await tab.host.service.rootConversation();
    const phone = load("phone");
    await phone.host.ready;
    await expect.poll(async () => (await phone.host.service.listConversations()).length, { timeout: 10_000 }).toBe(1);
    // Its page's writes through the object (this ObjectEnd forwards none: the door is asked first all the same).
    const phonePage = writesThroughObject(phone.host.service, phone.follow); // as the tab's worker serves its page
    await phonePage.submit(root, { type: "input", content: "hello", requestId: "r1" }).catch(() => {});
    await phonePage.decide(root, "no-such-call", { approved: true }).catch(() => {});
    // The page's word that it leaves (decision 0101), on a socket of its own, then the worker's hand-over.
    const epoch = record.epoch;
    const page = recordingSocket(end, asked);
    page.send(encodeFollowMessage({ type: "call", id: "l1", topic: "lease", method: "leaving", args: ["tab", epoch, 0] }));
    await tab.host.service.leave();
    await expect.poll(() => record.holder, { timeout: 10_000 }).toBe("object");
    await tab.host.service.runHere(); // the lease taken back
    expect(record.holder).toBe("tab");
    const outside = [...asked].filter((action) => !(TAB_FOLLOW_ACTIONS as readonly string[]).includes(action));
    expect(outside).toEqual([]);
    for (const action of [
      "push",
      "release",
      "lease.acquire",
      "lease.leaving",
      "lease.handBack",
      "copy.submit",
      "copy.decide",
      ...WATCH_FOLLOW_ACTIONS,
    ])
      expect(asked, action).toContain(action);
    page.close();
    for (const each of [phone, tab]) {
      await each.host.service.close();
      each.follow.close();
    }
    await (await end.harness)?.close(ctx);
  }, 30_000);
});
