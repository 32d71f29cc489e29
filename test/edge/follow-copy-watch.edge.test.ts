import { afterAll, beforeAll, describe, expect, it } from "vitest";
import { HarnessClient } from "../../src/browser/client.ts";
import { BACKGROUND_CONTEXT as ctx } from "../../src/index.ts";
import { settled } from "../support.ts";
import { openAgentTab, openDevice } from "./follow-copy-support.ts";
import { until } from "./follow-support.ts";
import { type Edge, edgeSocket, pause, startEdge } from "./support.ts";

// Decision 0107 in workerd: a device's page on the object's copy (`?edge=`, the object serves its copy while a tab
// holds the lease) watches a conversation the tab has not pushed yet. It waits for it, as a following tab's copy does
// (decision 0103); before, the object's copy said NotFound at once. A waiting watch whose socket closed holds nothing,
// and one still waiting at the takeover is answered by the object's own harness.

describe("a device's watch of a conversation the object's copy has not received yet (decision 0107)", () => {
  let edge: Edge;
  beforeAll(async () => {
    edge = await startEdge();
  }, 120_000);
  afterAll(async () => {
    await edge?.dispose();
  });
  const listeners = async (name: string) => (await edge.json<{ listeners: number }>("follow", name, "/listeners")).listeners;

  it("S1/0107: it waits and starts with the push that brings it (before: NotFound at once); an id the tab drew for something else is NotFound; a waiting watch whose socket closed holds nothing", async () => {
    const name = "copy-watch-waits";
    const tab = await openAgentTab(edge, name);
    const root = await tab.harness.root(ctx);
    await until("the root acknowledged", () => tab.mirror.acknowledged >= tab.harness.lease!.position);
    const device = openDevice(edge, name);
    await device.ready();
    // The id the tab's next conversation gets (one id space, S1): the object's copy has not reached it.
    const expected = tab.harness.nextId;
    const seen: number[] = [];
    const watching = device.watchConversation(expected, (view) => void seen.push(view.conversationId));
    const first = settled(watching);
    await pause(100);
    expect(first.outcome).toBeUndefined(); // before: NotFound
    expect((await tab.harness.createConversation({}, ctx)).id).toBe(expected);
    const stop = await watching;
    expect(seen).toEqual([expected]);
    stop();
    // An id the copy has not reached, which the tab then draws for a submission: NotFound once the copy has it.
    const next = tab.harness.nextId;
    const refused = settled(device.watchConversation(next, () => {}));
    await pause(100);
    expect(refused.outcome).toBeUndefined();
    await (await tab.harness.root(ctx)).submit({ type: "input", content: "hello", requestId: "r1" }, ctx);
    await until("the watch refused", () => refused.outcome);
    expect(refused.error).toMatchObject({
      name: "NotFound",
      message: `Conversation ${next} does not exist (${next} is a submission's id).`,
    });
    // Passed by the copy: NotFound at once, as before.
    await expect(device.watchConversation(next, () => {})).rejects.toMatchObject({ name: "NotFound" });
    expect(root.id).toBeLessThan(next);
    // A second device whose watch waits, then its socket closes: the object holds no listener of it any more.
    const base = await listeners(name);
    const phone = openDevice(edge, name, "bob");
    await phone.ready();
    const withPhone = await listeners(name); // its status
    const gone = settled(phone.watchConversation(tab.harness.nextId, () => {}));
    await until("the phone's watch registered", async () => (await listeners(name)) === withPhone + 1);
    phone.terminate();
    await until("nothing of the phone is left", async () => (await listeners(name)) === base); // before: its watch stayed
    expect(gone.outcome).not.toBe("watching");
    // A page that gives its wait up (the README's race with a timer): `cancel()` over the socket, nothing left.
    const givenUp = device.watchConversation(tab.harness.nextId, () => {});
    const cancelled = settled(givenUp);
    await until("the watch registered", async () => (await listeners(name)) === base + 1);
    givenUp.cancel();
    await until("the given-up watch is gone", async () => (await listeners(name)) === base);
    await until("the given-up watch refused", () => cancelled.outcome);
    expect(cancelled.outcome).toBe("NotFound");
    device.terminate();
    await tab.harness.close(ctx);
    tab.socket.stop();
  });

  it("S4/0107: a watch still waiting on the copy at the takeover is answered by the object's harness (it holds no such conversation: NotFound), not left waiting on the copy the takeover closed", async () => {
    const name = "copy-watch-takeover";
    const tab = await openAgentTab(edge, name);
    await tab.harness.root(ctx);
    await until("the root acknowledged", () => tab.mirror.acknowledged >= tab.harness.lease!.position);
    const device = openDevice(edge, name);
    await device.ready();
    const base = await listeners(name);
    const waiting = settled(device.watchConversation(tab.harness.nextId + 5, () => {}));
    await until("the watch registered", async () => (await listeners(name)) === base + 1);
    await tab.mirror.handOver(ctx); // the object takes the lease and runs the conversation from here
    await until("the watch answered", () => waiting.outcome, 800);
    expect(waiting.error).toMatchObject({ name: "NotFound" });
    await until("the watch holds nothing", async () => (await listeners(name)) <= base);
    device.terminate();
    tab.socket.stop();
  });

  it("S4/0111: a watch waiting on the copy while the object is evicted (its sockets stay) is answered by the instance that wakes, when the tab's push brings the conversation (before: never answered)", async () => {
    const name = "long-lease-copy-watch-evicted"; // a 60 s lease: the tab renews every 20 s, so the object can go idle
    const tab = await openAgentTab(edge, name);
    await tab.harness.root(ctx);
    await until("the root acknowledged", () => tab.mirror.acknowledged >= tab.harness.lease!.position);
    let sockets = 0;
    const device = new HarnessClient({
      url: `ws://edge/follow/${name}`,
      connect: () => {
        sockets += 1;
        return edgeSocket(edge, "follow", name, { "x-caller": "bob" });
      },
    });
    await device.ready();
    const expected = tab.harness.nextId;
    const seen: number[] = [];
    const waiting = settled(device.watchConversation(expected, (view) => void seen.push(view.conversationId)));
    const instance = async () => (await edge.json<{ instance: string }>("follow", name, "/instance")).instance;
    const first = await instance();
    // workerd lets an object with nothing to do go after about ten seconds; its hibernatable sockets stay. Wait in
    // silence, then ask, until a new instance answers.
    let woken = first;
    for (let round = 0; round < 5 && woken === first; round++) {
      await pause(11_000);
      woken = await instance();
    }
    expect(woken).not.toBe(first);
    expect(sockets).toBe(1); // the device's socket outlived the instance: its attachment is all the new one has
    expect(waiting.outcome).toBeUndefined();
    expect((await tab.harness.createConversation({}, ctx)).id).toBe(expected);
    await until("the watch answered", () => waiting.outcome); // before: never
    expect(waiting.outcome).toBe("watching");
    expect(seen).toEqual([expected]);
    device.terminate();
    await tab.harness.close(ctx);
    tab.socket.stop();
  }, 120_000);
});
