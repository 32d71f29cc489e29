/**
 * The review of decision 0148, M1 and L2: a subscribe a caller gives up before the host answered it keeps its place in
 * the caller's bound until the host answers it, over both transports (`serveMessages`: an object's socket, a follower
 * tab; `exposeHost`: a page's comlink port). Cancelling does not stop a door's `authorize` hook that waits, nor a watch's
 * wait for the host's open; before, `serveMessages` freed the place at once, so a caller looping subscribe/unsubscribe
 * started hooks (and waits) without end: 5,000 pending at a bound of 2. Once the host answers, the place is free again:
 * a page is refused only while its own give-ups are still being decided.
 */
import { afterEach, describe, expect, it } from "vitest";
import { exposeHost, wrapHost } from "../src/browser/comlink.ts";
import { guardEndpoint } from "../src/host/doors.ts";
import { hostEndpoint } from "../src/host/endpoint.ts";
import { createHost } from "../src/host/host.ts";
import { type HostMessage, serveMessages } from "../src/host/messages.ts";
import { isPending } from "../src/host/pending-subscription.ts";
import { createRegistry, MemoryStorage, type Storage } from "../src/index.ts";
import { flush, settled } from "./support.ts";

const limits = { maxSubscriptions: 2, maxCallsInFlight: 2 };
const closing: Array<() => void> = [];
afterEach(() => {
  for (const close of closing.splice(0)) close();
});

async function servedHost(openStorage: () => Promise<Storage> = async () => new MemoryStorage()) {
  const served = createHost({
    database: `review-0148-${crypto.randomUUID()}`,
    openStorage,
    harness: { registry: createRegistry() },
    now: () => 0,
  });
  return served;
}

/** An `authorize` hook that waits until `answerAll()`: the app's auth server is slow. */
function waitingHook() {
  const waiting: Array<(allowed: boolean) => void> = [];
  return {
    authorize: () => new Promise<boolean>((resolve) => void waiting.push(resolve)),
    started: () => waiting.length,
    answerAll: () => {
      for (const answer of waiting.splice(0)) answer(true);
    },
  };
}

const refusedFrames = (frames: HostMessage[]) =>
  frames.filter(
    (frame): frame is Extract<HostMessage, { type: "error" }> => frame.type === "error" && frame.error.name === "TooManySubscriptions",
  );

describe("a given-up subscribe keeps its place until the host answers it (review of 0148, M1/L2)", () => {
  it("0148 review M1 (S8): over serveMessages, 100 subscribe+unsubscribe pairs at a bound of 2 while the door's authorize hook waits start 2 hooks and are refused 98 times, the message saying a give-up keeps its place until answered; once the hooks answer, nothing is held and the caller subscribes again (before: 100 hooks started, none refused)", async () => {
    const served = await servedHost();
    await served.ready;
    const hook = waitingHook();
    const door = guardEndpoint(hostEndpoint(served.service), "hostile", { authorize: hook.authorize });
    const frames: HostMessage[] = [];
    const connection = serveMessages(door, (frame) => void frames.push(frame), { limits });
    closing.push(() => connection.close());
    const before = served.listenerCount();
    for (let id = 1; id <= 100; id++) {
      connection.receive({ type: "subscribe", id, method: "watchTasks", args: [] });
      connection.receive({ type: "unsubscribe", id });
    }
    await flush();
    expect(hook.started()).toBe(2);
    const refused = refusedFrames(frames);
    expect(refused.map((frame) => frame.id)).toEqual(Array.from({ length: 98 }, (_, i) => i + 3));
    expect(refused[0]!.error.message).toContain("one given up before its answer keeps its place until the host answers it");
    // The hooks answer: the given-up ones are subscribed and ended at once, and their places are free again.
    hook.answerAll();
    await flush();
    expect(served.listenerCount()).toBe(before);
    connection.receive({ type: "subscribe", id: 200, method: "watchTasks", args: [] });
    connection.receive({ type: "subscribe", id: 201, method: "watchTasks", args: [] });
    await flush();
    hook.answerAll();
    await flush();
    expect(frames.filter((frame) => frame.id >= 200 && frame.type === "result").map((frame) => frame.id)).toEqual([200, 201]);
    expect(frames.filter((frame) => frame.id >= 200 && frame.type === "error")).toEqual([]);
  });

  it("0148 review M1/L2: over comlink (exposeHost) the same: 20 subscribes each given up while the hook waits start 2 hooks and are refused 18 times, told a give-up keeps its place until answered; once the hooks answer the page subscribes again — both transports alike", async () => {
    const served = await servedHost();
    await served.ready;
    const hook = waitingHook();
    const channel = new MessageChannel();
    closing.push(
      () => channel.port1.close(),
      () => channel.port2.close(),
    );
    exposeHost(served.service, channel.port1 as never, { authorize: hook.authorize }, limits);
    const page = wrapHost(channel.port2 as never);
    const outcomes: Array<{ outcome?: string; error?: unknown }> = [];
    for (let i = 0; i < 20; i++) {
      const subscribing = page.subscribe("watchTasks", [], () => {});
      outcomes.push(settled(subscribing));
      if (isPending(subscribing)) subscribing.cancel();
      await flush(2);
    }
    await flush();
    expect(hook.started()).toBe(2);
    const refused = outcomes.filter(({ outcome }) => outcome === "TooManySubscriptions");
    expect(refused).toHaveLength(18);
    // L2: the page is told why a give-up still counts (before: only "unsubscribe one first", though it held none).
    expect((refused[0]!.error as Error).message).toContain("one given up before its answer keeps its place until the host answers it");
    hook.answerAll();
    await flush(10);
    const again = settled(page.subscribe("watchTasks", [], () => {}));
    await flush(5);
    hook.answerAll();
    await expect.poll(() => again.outcome).toBe("watching");
  });

  it("0148 review M1 (S8): a watchConversation given up while the host opens keeps its place until the open answers it (its wait ends with the open; before, freed at once: 50 pairs left 50 waits, none refused); after the open its place is free", async () => {
    let openNow!: () => void;
    const gate = new Promise<void>((resolve) => (openNow = resolve));
    const served = await servedHost(async () => {
      await gate;
      return new MemoryStorage();
    });
    const frames: HostMessage[] = [];
    const connection = serveMessages(hostEndpoint(served.service), (frame) => void frames.push(frame), { limits });
    closing.push(() => connection.close());
    for (let id = 1; id <= 50; id++) {
      connection.receive({ type: "subscribe", id, method: "watchConversation", args: [1] });
      connection.receive({ type: "unsubscribe", id });
    }
    await flush();
    expect(refusedFrames(frames).map((frame) => frame.id)).toEqual(Array.from({ length: 48 }, (_, i) => i + 3));
    openNow();
    await served.ready;
    await flush();
    // The two given up are answered (refused: no longer watched), and the caller has its places again.
    expect(frames.filter((frame) => frame.id <= 2).map((frame) => frame.type)).toEqual(["error", "error"]);
    connection.receive({ type: "subscribe", id: 100, method: "watchTasks", args: [] });
    connection.receive({ type: "subscribe", id: 101, method: "watchTasks", args: [] });
    await flush();
    expect(frames.filter((frame) => frame.id >= 100 && frame.type !== "event")).toEqual([
      { type: "result", id: 100, value: null },
      { type: "result", id: 101, value: null },
    ]);
  });
});
