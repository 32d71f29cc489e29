/**
 * Decision 0148: no caller may hold unbounded subscriptions (or unbounded calls in flight) at a host. A caller is one
 * connection (`serveMessages`: a Durable Object's socket, a follower tab at the leader) or one page's comlink port
 * (`exposeHost`). Past its bound a subscribe is `TooManySubscriptions` (not retryable) and a call `TooManyCallsInFlight`
 * (retryable), each refused before anything is held or run, each crossing the wire as its own class.
 */
import { afterEach, describe, expect, it } from "vitest";
import { exposeHost, wrapHost } from "../src/browser/comlink.ts";
import { callerLimitsOf, DEFAULT_CALLER_LIMITS, settledCallerLimits } from "../src/host/caller-bounds.ts";
import { type HostEndpoint, hostEndpoint, remoteHost } from "../src/host/endpoint.ts";
import { createHost } from "../src/host/host.ts";
import { type HeldSubscription, type HostMessage, messageEndpoint, serveMessages } from "../src/host/messages.ts";
import { createRegistry, InvalidSetting, isRetryable, MemoryStorage, TooManyCallsInFlight, TooManySubscriptions } from "../src/index.ts";
import { flush } from "./support.ts";

const channels: MessageChannel[] = [];
afterEach(() => {
  for (const channel of channels.splice(0)) {
    channel.port1.close();
    channel.port2.close();
  }
});

/** A real host in memory, with an app method `hold` that answers once `release()` is called. */
async function realHost() {
  const holds: Array<() => void> = [];
  const served = createHost({
    database: `caller-bounds-${crypto.randomUUID()}`,
    openStorage: async () => new MemoryStorage(),
    harness: { registry: createRegistry() },
    methods: { hold: () => new Promise<string>((resolve) => holds.push(() => resolve("held"))) },
    now: () => 0,
  });
  await served.ready;
  const release = () => {
    for (const resolve of holds.splice(0)) resolve();
  };
  return { ...served, release };
}

/** A page over `serveMessages` (as a socket carries it), each frame through JSON both ways. */
function page(endpoint: HostEndpoint, limits = { maxSubscriptions: 3, maxCallsInFlight: 2 }) {
  let toPage: (message: HostMessage) => void = () => {};
  let held: HeldSubscription[] = [];
  const connection = serveMessages(endpoint, (message) => toPage(JSON.parse(JSON.stringify(message))), {
    limits,
    onSubscriptions: (now) => void (held = now),
  });
  const link = messageEndpoint((message) => connection.receive(JSON.parse(JSON.stringify(message))));
  toPage = link.receive;
  return { host: remoteHost(link.endpoint), connection, held: () => held };
}

const turns = async (count = 10) => {
  for (let i = 0; i < count; i++) await new Promise((resolve) => setImmediate(resolve));
};

describe("a caller's subscriptions at a host are bounded (decision 0148)", () => {
  it("0148: over serveMessages the subscribe past the bound is TooManySubscriptions (its class on the page, not retryable), nothing is held for it; unsubscribing frees a place; another caller on the same host is unaffected", async () => {
    const served = await realHost();
    const endpoint = hostEndpoint(served.service);
    const hostile = page(endpoint);
    const other = page(endpoint);
    const listeners = served.listenerCount();
    const stops = [await hostile.host.watchTasks(() => {}), await hostile.host.onReport(() => {}), await hostile.host.onStatus(() => {})];
    expect(served.listenerCount()).toBe(listeners + 3);
    const refused = await hostile.host.watchTasks(() => {}).catch((error: unknown) => error);
    expect(refused).toBeInstanceOf(TooManySubscriptions);
    expect(refused).toMatchObject({ name: "TooManySubscriptions", method: "watchTasks", limit: 3 });
    expect((refused as Error).message).toMatch(/unsubscribe one first/);
    expect(isRetryable(refused)).toBe(false);
    expect(served.listenerCount()).toBe(listeners + 3); // nothing held for the refused one
    expect(hostile.held()).toHaveLength(3);
    // Another caller of the same host subscribes as it would alone.
    const others = [await other.host.watchTasks(() => {}), await other.host.onReport(() => {})];
    expect(served.listenerCount()).toBe(listeners + 5);
    // Unsubscribing frees a place at once.
    stops[0]!();
    const again = await hostile.host.watchTasks(() => {});
    expect(served.listenerCount()).toBe(listeners + 5);
    // A closed connection holds nothing.
    hostile.connection.close();
    await turns();
    expect(served.listenerCount()).toBe(listeners + 2);
    for (const stop of [...others, again]) stop();
  });

  it("0148: a subscribe waiting for its answer takes a place (held + waiting ≤ bound); given up, it frees it once its host answers it (the review of 0148, M1: before, at once, while the slow door went on)", async () => {
    const served = await realHost();
    const endpoint = hostEndpoint(served.service);
    // Its host answers each subscribe once `answer()` is called (a watch waiting for its conversation, a slow door).
    let answer!: () => void;
    const gate = new Promise<void>((resolve) => (answer = resolve));
    const slow: HostEndpoint = {
      call: (method, args) => endpoint.call(method, args),
      subscribe: (method, args, emit, lost) => gate.then(() => endpoint.subscribe(method, args, emit, lost)),
      unsubscribe: (id) => endpoint.unsubscribe(id),
    };
    const waiting = page(slow, { maxSubscriptions: 2, maxCallsInFlight: 2 });
    const first = waiting.host.watchTasks(() => {});
    first.catch(() => {});
    const second = waiting.host.onReport(() => {});
    const third = await waiting.host.onStatus(() => {}).catch((error: unknown) => error);
    expect(third).toBeInstanceOf(TooManySubscriptions); // two in flight: the bound counts them
    // Given up before its answer (its cancel sends the unsubscribe frame): its place stays taken while its host still
    // works on it, and is free once the host answered it.
    (first as unknown as { cancel(): void }).cancel();
    const fourth = await waiting.host.onStatus(() => {}).catch((error: unknown) => error);
    expect(fourth).toBeInstanceOf(TooManySubscriptions);
    answer();
    await second;
    await flush();
    await waiting.host.onStatus(() => {});
    expect(waiting.held().map(({ method }) => method)).toEqual(["onReport", "onStatus"]);
    waiting.connection.close();
  });

  it("0148: a hibernation restore past the bound (a bound lowered by a deploy) keeps the first ones and ends the rest with TooManySubscriptions (the page told through lost, the attachment without them)", async () => {
    const served = await realHost();
    const endpoint = hostEndpoint(served.service);
    const frames: HostMessage[] = [];
    let held: HeldSubscription[] = [];
    const connection = serveMessages(endpoint, (message) => void frames.push(JSON.parse(JSON.stringify(message))), {
      limits: { maxSubscriptions: 2, maxCallsInFlight: 2 },
      onSubscriptions: (now) => void (held = now),
    });
    const earlier: HeldSubscription[] = [
      { id: 1, method: "watchTasks", args: [] },
      { id: 2, method: "onReport", args: [] },
      { id: 3, method: "onStatus", args: [] },
      { id: 4, method: "watchTasks", args: [] },
    ];
    const listeners = served.listenerCount();
    connection.restore(earlier);
    await turns();
    expect(served.listenerCount()).toBe(listeners + 2);
    expect(held.map(({ id }) => id)).toEqual([1, 2]);
    const ended = frames.filter((frame) => frame.type === "error");
    expect(ended.map(({ id }) => id)).toEqual([3, 4]);
    expect(ended.map((frame) => (frame as { error: { name: string } }).error.name)).toEqual([
      "TooManySubscriptions",
      "TooManySubscriptions",
    ]);
    // On the page, such a frame under an answered subscription's id ends it with the typed error (decision 0114).
    const told: unknown[] = [];
    const link = messageEndpoint(() => {});
    const answered = link.endpoint.subscribe(
      "onStatus",
      [],
      () => {},
      (error) => told.push(error),
    );
    link.receive({ type: "result", id: 1, value: null });
    await answered;
    link.receive({ ...(ended[0] as HostMessage), id: 1 });
    expect(told[0]).toBeInstanceOf(TooManySubscriptions);
    connection.close();
  });
});

describe("a caller's calls in flight at a host are bounded (decision 0148)", () => {
  it("0148: over serveMessages the call past the bound is TooManyCallsInFlight (retryable), not run; an answer frees a place; another caller's calls run", async () => {
    const served = await realHost();
    const endpoint = hostEndpoint(served.service);
    const hostile = page(endpoint);
    const other = page(endpoint);
    const held = [hostile.host.call("hold"), hostile.host.call("hold")];
    const refused = await hostile.host.createConversation().catch((error: unknown) => error);
    expect(refused).toBeInstanceOf(TooManyCallsInFlight);
    expect(refused).toMatchObject({ method: "createConversation", limit: 2 });
    expect(isRetryable(refused)).toBe(true);
    const before = (await served.service.listConversations()).length;
    // The other caller's calls run meanwhile.
    await expect(other.host.createConversation()).resolves.toEqual(expect.any(Number));
    expect((await served.service.listConversations()).length).toBe(before + 1);
    served.release();
    await expect(Promise.all(held)).resolves.toEqual(["held", "held"]);
    await expect(hostile.host.createConversation()).resolves.toEqual(expect.any(Number));
  });
});

describe("a page's comlink port is one caller (decision 0148)", () => {
  it("0148: exposeHost refuses the subscribe past the page's bound with TooManySubscriptions (its class on the page) and the call past it with TooManyCallsInFlight; unsubscribing and answers free places", async () => {
    const served = await realHost();
    const channel = new MessageChannel();
    channels.push(channel);
    exposeHost(served.service, channel.port1 as never, undefined, { maxSubscriptions: 2, maxCallsInFlight: 1 });
    const host = remoteHost(wrapHost(channel.port2 as never));
    const listeners = served.listenerCount();
    const stop = await host.watchTasks(() => {});
    await host.onReport(() => {});
    const refused = await host.onStatus(() => {}).catch((error: unknown) => error);
    expect(refused).toBeInstanceOf(TooManySubscriptions);
    expect(refused).toMatchObject({ method: "onStatus", limit: 2 });
    expect(served.listenerCount()).toBe(listeners + 2);
    stop();
    await expect.poll(() => served.listenerCount()).toBe(listeners + 1);
    await expect(host.onStatus(() => {})).resolves.toEqual(expect.any(Function));
    const holding = host.call("hold");
    await turns();
    const busy = await host.listConversations().catch((error: unknown) => error);
    expect(busy).toBeInstanceOf(TooManyCallsInFlight);
    served.release();
    await expect(holding).resolves.toBe("held");
    await expect(host.listConversations()).resolves.toEqual(expect.any(Array));
  });
});

describe("callerLimits are checked (decision 0148)", () => {
  it("0148: a positive whole number each, defaults 1,024; anything else is InvalidSetting", () => {
    expect(callerLimitsOf(undefined)).toEqual({ maxSubscriptions: 1_024, maxCallsInFlight: 1_024 });
    expect(callerLimitsOf({ maxSubscriptions: 5 })).toEqual({ ...DEFAULT_CALLER_LIMITS, maxSubscriptions: 5 });
    for (const bad of [0, -1, 1.5, Number.NaN, Number.POSITIVE_INFINITY, "10", null])
      expect(() => callerLimitsOf({ maxSubscriptions: bad })).toThrow(InvalidSetting);
    expect(() => callerLimitsOf({ maxSubscription: 5 })).toThrow(InvalidSetting);
    expect(() => callerLimitsOf(5)).toThrow(InvalidSetting);
    // Served with a bad value, the host serves the defaults and its open fails with the refusal (the status says why).
    const settled = settledCallerLimits({ maxCallsInFlight: 0 });
    expect(settled.limits).toBe(DEFAULT_CALLER_LIMITS);
    expect(settled.refused).toBeInstanceOf(InvalidSetting);
  });
});
