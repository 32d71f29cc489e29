import { describe, expect, it } from "vitest";
import { systemClock } from "../src/base/clock.ts";
import { exposeHost, wrapHost } from "../src/browser/comlink.ts";
import { followObject } from "../src/browser/follow.ts";
import { LeaseBook, type LeaseRecord } from "../src/follow/arbiter.ts";
import { ObjectEnd } from "../src/follow/object-end.ts";
import { HostClient } from "../src/host/client.ts";
import { hostEndpoint } from "../src/host/endpoint.ts";
import { createHost } from "../src/host/host.ts";
import { type HostMessage, serveMessages } from "../src/host/messages.ts";
import { createRegistry, Harness, type Storage } from "../src/index.ts";
import { openSqliteStorage } from "../src/storage/sqlite/open-storage.ts";
import { pageOf, socketTo } from "./page-tools-follow-support.ts";
import { ctx, settled } from "./support.ts";

// Decision 0107 (issue 27's seams left by 0103). A page's watch of a conversation a following copy has not received yet
// waits (0103). Two ends were missing: a waiting watch whose page went away stayed registered at the host until the
// holder's ids passed it (an idle holder: for good), and a watch made while the host reopened was answered at once and
// then, for a conversation that never came, was neither watched nor refused. Through the page's messages, as an app
// meets them.

async function tabAndPhone() {
  const clock = systemClock;
  let record: LeaseRecord = { epoch: 0 };
  const book = new LeaseBook({ clock, ttlMs: 60_000, load: () => record, save: (next) => void (record = next) });
  const end = await ObjectEnd.start({
    place: "object",
    storage: await openSqliteStorage({ vfs: "memory" }),
    book,
    clock,
    open: (storage: Storage, lease) => Harness.open(storage, { registry: createRegistry(), lease, resume: true }, ctx),
  });
  const closing: Array<() => unknown> = [];
  /** While set, the phone's rebuilds wait for it (the host's reopen stays under way). */
  let gate: Promise<void> | undefined;
  /** Told when a rebuild waits at the gate. */
  let atGate = () => {};
  const load = (place: string) => {
    const follow = followObject({ url: "ws://object/follow", place, rebuild: true, connect: () => socketTo(end) });
    let opened: Harness | undefined;
    const again: Array<() => void> = [];
    const host = createHost({
      database: place,
      openStorage: () => openSqliteStorage({ vfs: "memory" }),
      harness: { registry: createRegistry(), resume: true, lease: follow.lease, serverCalls: follow.serverCalls },
      onReady: (harness) => {
        opened = harness;
        follow.attach(harness);
      },
      // The follow's own rebuild, and one the test asks for (`rebuildNow`), each waiting for `gate` when set.
      rebuild: {
        when: (listener) => {
          follow.rebuild!.when(listener);
          again.push(listener);
        },
        run: async (storage) => {
          if (gate) atGate();
          await gate;
          await follow.rebuild!.run(storage);
        },
      },
      now: () => performance.now(),
    });
    closing.push(
      () => host.service.close(),
      () => follow.close(),
    );
    return {
      host,
      harness: () => opened!,
      rebuildNow: () => {
        for (const listener of again) listener();
      },
    };
  };
  const tab = load("tab");
  await tab.host.ready;
  const root = await tab.host.service.rootConversation();
  const phone = load("phone");
  await phone.host.ready;
  const phonePage = pageOf(phone.host.service, "phone-page");
  await expect.poll(async () => (await phonePage.listConversations()).map((c) => c.id), { timeout: 10_000 }).toEqual([root]);
  const close = async () => {
    for (const each of closing) await each();
    await (await end.harness)?.close(ctx);
  };
  const hold = () => {
    let open!: () => void;
    gate = new Promise<void>((resolve) => (open = resolve));
    const waiting = new Promise<void>((resolve) => (atGate = resolve));
    return {
      waiting,
      open: () => {
        gate = undefined;
        open();
      },
    };
  };
  return { tab, phone, phonePage, root, close, hold };
}

/** A raw page connection to `service`: its frames in and the host's answers out. */
function rawPage(service: Parameters<typeof hostEndpoint>[0]) {
  const answers: HostMessage[] = [];
  const connection = serveMessages(hostEndpoint(service), (message) => void answers.push(structuredClone(message)));
  return { connection, answers };
}

describe("a waiting watch ends with its caller and with the reopen (decision 0107)", () => {
  it("0107: a waiting watch whose page closed, or that the page unsubscribed before its answer, holds nothing at the host (before: registered until the holder's ids passed it)", async () => {
    const { tab, phone, close } = await tabAndPhone();
    const base = phone.host.listenerCount();
    const waited = tab.harness().nextId; // not reached by the phone's copy, and the idle tab draws nothing
    // A page that closes while its watch waits.
    const leaving = pageOf(phone.host.service, "leaving-page");
    await leaving.ready();
    const withPage = phone.host.listenerCount(); // the page's status
    const watch = settled(leaving.watchConversation(waited, () => {}));
    await expect.poll(() => phone.host.listenerCount()).toBe(withPage + 1);
    leaving.disconnect();
    await expect.poll(() => phone.host.listenerCount()).toBe(base); // before: base + 1, until the tab's ids passed `waited`
    expect(watch.outcome).toBeUndefined(); // its page is gone: no answer reaches it
    // A page that subscribes and unsubscribes before the answer (its frames as they come over a socket).
    const { connection, answers } = rawPage(phone.host.service);
    connection.receive({ type: "subscribe", id: 7, method: "watchConversation", args: [waited] });
    await expect.poll(() => phone.host.listenerCount()).toBe(base + 1);
    connection.receive({ type: "unsubscribe", id: 7 });
    expect(phone.host.listenerCount()).toBe(base);
    // The subscribe gets its answer: refused, naming why (the page asked for it and may be waiting).
    await expect
      .poll(() => answers)
      .toEqual([
        {
          type: "error",
          id: 7,
          error: expect.objectContaining({ name: "NotFound", message: `Conversation ${waited} is no longer watched.` }),
        },
      ]);
    // Many pages that come and go while the tab is idle leave nothing behind.
    for (let i = 0; i < 50; i++) {
      const page = pageOf(phone.host.service, `page-${i}`);
      void page.watchConversation(waited + i, () => {}).catch(() => {});
      await Promise.resolve();
      page.disconnect();
    }
    await new Promise((resolve) => setTimeout(resolve, 20));
    expect(phone.host.listenerCount()).toBe(base);
    connection.close();
    await close();
  }, 30_000);

  it("S1/0107: a watch made while the copy reopens is answered after the reopen: NotFound for an id the copy passed that names no conversation (before: the host answered the subscription at once and sent nothing more, so the page's watch never settled); one the tab makes later starts", async () => {
    const { tab, phone, phonePage, root, close, hold } = await tabAndPhone();
    const submission = await tab.host.service.submit(root, { type: "input", content: "hello", requestId: "r1" });
    await expect.poll(() => phone.harness().nextId > submission, { timeout: 10_000 }).toBe(true);
    const { waiting: reopening, open } = hold();
    phone.rebuildNow();
    await reopening; // the phone's harness is closed, its rebuild waits
    // Made during the reopen: an id the copy passed (a submission's), and the id the tab's next conversation gets.
    const refused = settled(phonePage.watchConversation(submission, () => {}));
    const later = tab.harness().nextId;
    const seen: number[] = [];
    const waiting = phonePage.watchConversation(later, (view) => void seen.push(view.conversationId));
    const started = settled(waiting);
    await new Promise((resolve) => setTimeout(resolve, 50));
    expect(refused.outcome).toBeUndefined(); // not answered while the host reopens
    open();
    await expect.poll(() => refused.outcome, { timeout: 10_000 }).toBe("NotFound"); // before: undefined for good
    expect(started.outcome).toBeUndefined();
    expect(await tab.host.service.createConversation()).toBe(later);
    const stop = await waiting;
    expect(seen).toEqual([later]);
    stop();
    await close();
  }, 30_000);

  it("0107: a page that gives its wait up (`cancel()`, the README's race with a timer) leaves nothing at the host, over a socket's messages and over comlink; the conversation made later reaches neither", async () => {
    const { tab, phone, close } = await tabAndPhone();
    const waited = tab.harness().nextId;
    const overMessages = pageOf(phone.host.service, "socket-page");
    const channel = new MessageChannel();
    exposeHost(phone.host.service, channel.port1 as never);
    const overComlink = new HostClient(wrapHost(channel.port2 as never));
    const seen: string[] = [];
    for (const [name, page] of [
      ["messages", overMessages],
      ["comlink", overComlink],
    ] as const) {
      await page.ready();
      const before = phone.host.listenerCount();
      const watch = page.watchConversation(waited, () => void seen.push(name));
      const outcome = settled(watch);
      await expect.poll(() => phone.host.listenerCount()).toBe(before + 1);
      watch.cancel();
      await expect.poll(() => phone.host.listenerCount(), { message: name }).toBe(before); // before 0107: no cancel at all
      await expect.poll(() => outcome.outcome).toBe("NotFound");
    }
    expect(await tab.host.service.createConversation()).toBe(waited);
    await expect.poll(async () => (await phone.host.service.listConversations()).map((c) => c.id)).toContain(waited);
    expect(seen).toEqual([]);
    // Cancelled after it started, a watch stops as its unsubscribe would — over comlink too (before: the worker had
    // forgotten the ticket once it answered, so the watch stayed).
    for (const [name, page] of [
      ["messages", overMessages],
      ["comlink", overComlink],
    ] as const) {
      const base = phone.host.listenerCount();
      const started = page.watchConversation(waited, () => {});
      await started;
      expect(phone.host.listenerCount(), name).toBe(base + 1);
      started.cancel();
      await expect.poll(() => phone.host.listenerCount(), { message: name }).toBe(base);
    }
    overMessages.disconnect();
    channel.port1.close();
    channel.port2.close();
    await close();
  }, 30_000);
});
