/**
 * Decision 0148 at the leading tab: the leader carries every follower tab's subscriptions and calls through its one
 * endpoint, so a bound must be per follower — one tab at its bound stops no other tab. Frame by frame on the wire
 * `tabs/wire.ts` describes (Node's BroadcastChannel, the Web Locks stand-in), against `serveTabs` over a real host.
 */
import { describe, expect, it } from "vitest";
import { serveTabs } from "../src/browser/tabs/leader.ts";
import { channelName, followerLock } from "../src/browser/tabs/wire.ts";
import { createHost } from "../src/host/host.ts";
import { createRegistry, MemoryStorage } from "../src/index.ts";
import { tabsTestScope } from "./tabs-support.ts";

const { locks, cleanups } = tabsTestScope();

const turns = async (count = 20) => {
  for (let i = 0; i < count; i++) await new Promise((resolve) => setImmediate(resolve));
};

type Frame = { type: string; id?: unknown; error?: { name: string; message: string } };

/** A follower tab at the wire: asks who leads, connects holding its life lock, then posts frames. */
async function follower(database: string) {
  const broker = new BroadcastChannel(channelName(database));
  const leading = new Promise<string>((resolve) => {
    broker.onmessage = ({ data }) => data?.type === "leader" && resolve(data.leader);
  });
  broker.postMessage({ type: "who-leads" });
  const leaderId = await leading;
  const connection = `pi-durable-web:tab:test-${crypto.randomUUID()}`;
  const port = new BroadcastChannel(connection);
  const frames: Frame[] = [];
  port.onmessage = ({ data }) => frames.push(data as Frame);
  let release = () => {};
  void locks.request(followerLock(connection), () => new Promise<void>((resolve) => (release = resolve)));
  broker.postMessage({ type: "connect", leader: leaderId, connection });
  for (let i = 0; i < 50 && !frames.some((frame) => frame.type === "accepted"); i++) await turns(1);
  cleanups.push(() => {
    port.postMessage({ type: "bye" });
    release();
    port.close();
    broker.close();
  });
  let nextId = 0;
  /** Sends `frame` under a new id; the answer under it (a result or an error). */
  const send = async (frame: { type: "subscribe" | "call" | "unsubscribe"; method?: string; id?: number }) => {
    const id = frame.id ?? ++nextId;
    port.postMessage({ args: [], ...frame, id });
    if (frame.type === "unsubscribe") return { id, answer: undefined };
    for (let i = 0; i < 50 && !frames.some((answer) => answer.id === id && answer.type !== "event"); i++) await turns(1);
    return { id, answer: frames.find((answer) => answer.id === id && answer.type !== "event") };
  };
  return { send };
}

describe("the leading tab bounds each follower tab alone (decision 0148)", () => {
  it("0148: a follower at its bound is refused TooManySubscriptions; another follower subscribes as usual; the first unsubscribes one and subscribes again", async () => {
    const database = `tabs-caller-bounds-${crypto.randomUUID()}`;
    const served = createHost({
      database,
      openStorage: async () => new MemoryStorage(),
      harness: { registry: createRegistry() },
      now: () => 0,
    });
    serveTabs(served.service, database, undefined, { maxSubscriptions: 2, maxCallsInFlight: 8 });
    cleanups.push(() => served.service.close().catch(() => {}));
    await served.ready;
    const hostile = await follower(database);
    const other = await follower(database);
    const listeners = served.listenerCount();
    const first = await hostile.send({ type: "subscribe", method: "watchTasks" });
    expect(first.answer).toMatchObject({ type: "result" });
    expect((await hostile.send({ type: "subscribe", method: "onReport" })).answer).toMatchObject({ type: "result" });
    const refused = await hostile.send({ type: "subscribe", method: "watchTasks" });
    expect(refused.answer).toMatchObject({ type: "error", error: { name: "TooManySubscriptions" } });
    expect(refused.answer?.error?.message).toMatch(/unsubscribe one first/);
    expect(served.listenerCount()).toBe(listeners + 2);
    // The other tab is its own caller: its subscriptions are served while the first one is at its bound.
    expect((await other.send({ type: "subscribe", method: "watchTasks" })).answer).toMatchObject({ type: "result" });
    expect((await other.send({ type: "subscribe", method: "onReport" })).answer).toMatchObject({ type: "result" });
    expect(served.listenerCount()).toBe(listeners + 4);
    // Unsubscribing frees a place for the first tab.
    await hostile.send({ type: "unsubscribe", id: first.id });
    expect((await hostile.send({ type: "subscribe", method: "onStatus" })).answer).toMatchObject({ type: "result" });
  });
});
