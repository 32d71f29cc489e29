/**
 * Decision 0117, after review (H1, M2): over comlink (a worker and its page) the page's `lost` is told the host's error
 * as the library's class — NotFound stays NotFound on the page — and a subscribe the worker's door refuses releases
 * both of the page's proxies (its listener and its `lost`), once.
 */
import { afterEach, describe, expect, it } from "vitest";
import { exposeHost, wrapHost } from "../src/browser/comlink.ts";
import { tabsEndpoint } from "../src/browser/tabs/follower.ts";
import { NotFound } from "../src/errors.ts";
import { HostClient } from "../src/host/client.ts";
import { remoteHost } from "../src/host/endpoint.ts";
import { createHost } from "../src/host/host.ts";
import { createRegistry, MemoryStorage } from "../src/index.ts";
import { rebuildingHost } from "./rebuilding-host-support.ts";
import { settle } from "./socket-support.ts";

const channels: MessageChannel[] = [];
afterEach(() => {
  for (const channel of channels.splice(0)) {
    channel.port1.close();
    channel.port2.close();
  }
});

/** Counts MessagePort.close() calls (comlink closes both ends of a proxy's port when it is released). */
function countCloses() {
  const proto = MessagePort.prototype as { close(): void };
  const original = proto.close;
  let closes = 0;
  proto.close = function (this: MessagePort) {
    closes += 1;
    return original.call(this);
  };
  return {
    get closes() {
      return closes;
    },
    restore: () => void (proto.close = original),
  };
}

describe("decision 0117 after review: lost over comlink, proxies released at a refusal", () => {
  it("H1: the host ends a watch it moved (a rebuild without A): the page's lost is told a NotFound, once, and both proxies are released", async () => {
    const { host, rebuildWithout } = await rebuildingHost();
    const a = await host.service.createConversation();
    const channel = new MessageChannel();
    channels.push(channel);
    const served = exposeHost(host.service, channel.port1 as never);
    const remote = remoteHost(wrapHost(channel.port2 as never));
    const told: unknown[] = [];
    await remote.watchConversation(
      a,
      () => {},
      (error) => told.push(error),
    );
    expect(served.subscriptions).toBe(1);
    const counter = countCloses();
    try {
      await rebuildWithout(a);
      await settle();
      expect(told).toHaveLength(1);
      expect(told[0]).toBeInstanceOf(NotFound);
      expect((told[0] as NotFound).message).toContain(String(a));
      expect(served.subscriptions).toBe(0);
      expect(counter.closes).toBe(2); // the listener's proxy and lost's
    } finally {
      counter.restore();
      await host.service.close();
    }
  });

  it("H1: a worker's page as HarnessClient builds it (HostClient over tabsEndpoint over wrapHost): the view of a conversation the rebuild lost is told NotFound", async () => {
    const { host, rebuildWithout } = await rebuildingHost();
    const a = await host.service.createConversation();
    const channel = new MessageChannel();
    channels.push(channel);
    exposeHost(host.service, channel.port1 as never);
    const tabs = tabsEndpoint(wrapHost(channel.port2 as never));
    const client = new HostClient(tabs, "page-1");
    await client.ready();
    const view = await client.openConversation(a);
    const told: Error[] = [];
    view.onLost((error) => told.push(error));
    await rebuildWithout(a);
    await settle();
    expect(view.lost).toBeInstanceOf(NotFound);
    expect(told).toHaveLength(1);
    expect(told[0]).toBeInstanceOf(NotFound);
    tabs.close();
    await host.service.close();
  });

  it("M2: a subscribe the worker's door refuses releases the page's listener and lost proxies (two ports closed per subscribe), as an answered one does at its unsubscribe", async () => {
    const host = createHost({
      database: "db",
      openStorage: async () => new MemoryStorage(),
      harness: { registry: createRegistry(), resume: true },
      now: () => 0,
    });
    await host.ready;
    const channel = new MessageChannel();
    channels.push(channel);
    exposeHost(host.service, channel.port1 as never, (_caller, call) => call.method !== "watchTasks");
    const remote = remoteHost(wrapHost(channel.port2 as never));
    const counter = countCloses();
    try {
      for (let i = 0; i < 5; i++)
        await expect(
          remote.watchTasks(
            () => {},
            () => {},
          ),
        ).rejects.toThrow(/authorize hook refused/);
      await settle();
      const refused = counter.closes;
      for (let i = 0; i < 5; i++) {
        const stop = await remote.onReport(
          () => {},
          () => {},
        );
        stop();
      }
      await remote.inspect();
      await settle();
      expect({ refused, answered: counter.closes - refused }).toEqual({ refused: 10, answered: 10 });
      // Without a lost: one proxy, one port, released once (no double release throws in the worker).
      const before = counter.closes;
      for (let i = 0; i < 5; i++) await expect(remote.watchTasks(() => {})).rejects.toThrow(/authorize hook refused/);
      await settle();
      expect(counter.closes - before).toBe(5);
    } finally {
      counter.restore();
      await host.service.close();
    }
  });
});
