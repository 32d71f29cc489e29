import { describe, expect, it } from "vitest";
import { systemClock } from "../src/base/clock.ts";
import { followObject } from "../src/browser/follow.ts";
import { LeaseBook, type LeaseRecord } from "../src/follow/arbiter.ts";
import { ObjectEnd } from "../src/follow/object-end.ts";
import { createHost } from "../src/host/host.ts";
import { createRegistry, Harness, type Storage } from "../src/index.ts";
import { openSqliteStorage } from "../src/storage/sqlite/open-storage.ts";
import { pageOf, recordingRebuild, socketTo } from "./page-tools-follow-support.ts";
import { ctx } from "./support.ts";

// Decision 0103 (issue 27's loose ends, found by decision 0099's newcomer). A second device's copy, rebuilt from the
// object's snapshot while a tab holds the lease, said its last stop was a crash (the snapshot carries the holder's
// lifecycle document, "open"); and its page's watch of a conversation the copy had not received yet failed with
// NotFound at once. Both through the page's client (`HostClient`), as an app meets them.

async function tabAndPhone() {
  const clock = systemClock;
  let record: LeaseRecord = { epoch: 0 };
  const book = new LeaseBook({ clock, ttlMs: 60_000, load: () => record, save: (next) => void (record = next) });
  const end = await ObjectEnd.start({
    place: "object",
    storage: await openSqliteStorage({ vfs: "memory" }),
    book,
    clock,
    // The feed keeps almost nothing in memory: a new device's empty copy cannot follow from the start and rebuilds.
    roundBytes: 1,
    open: (storage: Storage, lease) => Harness.open(storage, { registry: createRegistry(), lease, resume: true }, ctx),
  });
  const closing: Array<() => unknown> = [];
  const load = (place: string, rebuild: boolean) => {
    const follow = followObject({ url: "ws://object/follow", place, rebuild, connect: () => socketTo(end) });
    const outcomes: string[] = [];
    let opened: Harness | undefined;
    const host = createHost({
      database: place,
      openStorage: () => openSqliteStorage({ vfs: "memory" }),
      harness: { registry: createRegistry(), resume: true, lease: follow.lease, serverCalls: follow.serverCalls },
      onReady: (harness) => {
        opened = harness;
        follow.attach(harness);
      },
      ...(follow.rebuild ? { rebuild: recordingRebuild({ when: follow.rebuild.when, run: follow.rebuild.run }, outcomes) } : {}),
      now: () => performance.now(),
    });
    closing.push(
      () => host.service.close(),
      () => follow.close(),
    );
    return { host, outcomes, harness: () => opened!, page: pageOf(host.service, `${place}-page`) };
  };
  const tab = load("tab", false);
  await tab.host.ready;
  const root = await tab.host.service.rootConversation();
  // The phone joins as a new device: its copy is rebuilt from the object's snapshot (the tab's pushes are trimmed from
  // the object's durable tail as they are applied, decision 0090), then it follows.
  const phone = load("phone", true);
  await phone.host.ready;
  await expect.poll(() => phone.outcomes, { timeout: 10_000 }).toEqual(["rebuilt"]);
  await expect.poll(async () => (await phone.page.listConversations()).map((c) => c.id), { timeout: 10_000 }).toEqual([root]);
  const close = async () => {
    for (const each of closing) await each();
    await (await end.harness)?.close(ctx);
  };
  return { tab, phone, root, close };
}

describe("a new device's copy (decision 0103)", () => {
  it("S4/0103: rebuilt from the object's snapshot, its status says the copy was rebuilt, not that something crashed there", async () => {
    const { phone, close } = await tabAndPhone();
    await expect.poll(() => phone.page.status.kind).toBe("ready");
    // Before: { stop: "crash", tasks: [] } — nothing ran or stopped on the phone.
    expect(phone.page.status).toMatchObject({ kind: "ready", runs: "elsewhere", recovery: { stop: "rebuilt", tasks: [] } });
    expect((await phone.page.inspect()).recovery).toEqual({ stop: "rebuilt", tasks: [] });
    await close();
  }, 30_000);

  it("S1/0103: its page's watch of a conversation the copy has not received yet waits for it (before: NotFound at once); an id the holder draws for something else is NotFound", async () => {
    const { tab, phone, root, close } = await tabAndPhone();
    // The id the tab's next conversation gets (one id space, S1): not yet on the phone.
    const expected = tab.harness().nextId;
    expect(phone.harness().nextId).toBeLessThanOrEqual(expected);
    const seen: number[] = [];
    let outcome: string | undefined;
    const watching = phone.page.watchConversation(expected, (view) => void seen.push(view.conversationId));
    watching.then(
      () => (outcome = "watching"),
      (error: Error) => (outcome = error.name),
    );
    await new Promise((resolve) => setTimeout(resolve, 50));
    expect(outcome).toBeUndefined(); // before: NotFound
    expect(await tab.host.service.createConversation()).toBe(expected);
    const stop = await watching;
    expect(outcome).toBe("watching");
    expect(seen).toEqual([expected]);
    stop();
    // An id the copy has not reached, which the holder then draws for a submission: NotFound once the copy has it.
    const next = tab.harness().nextId;
    const refused = phone.page.watchConversation(next, () => {});
    await tab.host.service.submit(root, { type: "input", content: "hello", requestId: "r1" });
    await expect(refused).rejects.toMatchObject({
      name: "NotFound",
      message: `Conversation ${next} does not exist (${next} is a submission's id).`,
    });
    // An id the copy has passed that names no conversation: NotFound at once, as before.
    expect(phone.harness().nextId).toBeGreaterThan(next);
    await expect(phone.page.watchConversation(next, () => {})).rejects.toMatchObject({ name: "NotFound" });
    await close();
  }, 30_000);
});
