/**
 * Decision 0142, item 1 (0138's review, L2): a place that takes the page's status subscription (answers its id) and
 * never sends a status. The watch's ask is bounded until its first value, not its id: at `STATUS_ASK_MS` on the
 * endpoint's clock it is given up (the place unsubscribed), the status says `reconnecting` with a typed, retryable
 * `NotReady`, and it is asked again on the backoff. Before, the id cleared the bound: `again()` — and so `askAgain()` and
 * a `ready()` made after it — waited for good. The id may come before the first value (comlink): `again()` still
 * settles only at the value (the tried fix that settled at the id broke that; decision 0138's Review).
 */
import fc from "fast-check";
import { afterEach, expect, it, vi } from "vitest";
import { HarnessClient } from "../src/browser/client.ts";
import { exposeHost } from "../src/browser/comlink.ts";
import { STATUS_ASK_MS, watchStatus } from "../src/browser/tabs/own-status.ts";
import { AuthorizeFailed, NotAuthorized } from "../src/errors.ts";
import type { HostEndpoint } from "../src/host/endpoint.ts";
import { createHost } from "../src/host/host.ts";
import type { HarnessService, HarnessStatus } from "../src/host/protocol.ts";
import { createRegistry, MemoryStorage } from "../src/index.ts";
import { RETRYABLE } from "../src/retryable.ts";
import { createManualClock } from "../src/testing/clock.ts";
import { macrotask } from "./tabs-support.ts";

const settle = async () => {
  for (let i = 0; i < 10; i++) await macrotask();
};

/** Real macrotasks (not the faked timers) until `done`, at most `max` of them. */
async function immediate(done: () => boolean, max = 2000): Promise<void> {
  for (let i = 0; i < max && !done(); i++) await new Promise<void>((resolve) => setImmediate(resolve));
}

/** A place whose status asks answer as `script` says, in turn: refused, silent (an id, then nothing), or served later. */
function scriptedPlace(script: Array<"refuse" | "silent" | "id-then-ready">) {
  const place = { asks: 0, unsubscribed: [] as number[], emits: [] as Array<() => void> };
  const endpoint: HostEndpoint = {
    call: () => Promise.reject(new Error("no calls here")),
    subscribe: async (_method, _args, emit) => {
      const id = ++place.asks;
      const answer = script[id - 1] ?? "silent";
      await macrotask();
      if (answer === "refuse") throw new NotAuthorized("onStatus", "the hook said no.");
      // The id first, the value a macrotask later (as comlink may deliver them).
      if (answer === "id-then-ready") place.emits.push(() => emit({ kind: "ready", database: "d", role: "leader" }));
      return id;
    },
    unsubscribe: (id) => void place.unsubscribed.push(id),
  };
  return { place, endpoint };
}

afterEach(() => {
  vi.useRealTimers();
});

it("0142 (0138 review L2): askAgain() meeting a worker door that takes the status subscription and stays silent resolves `reconnecting` with a retryable NotReady at the bound on the page's timers, the subscription released (before: it waited for good)", async () => {
  // The page's timers are faked; comlink's MessagePort and `setImmediate` stay real.
  vi.useFakeTimers({ toFake: ["setTimeout", "clearTimeout"] });
  const served = createHost({
    database: `d-${crypto.randomUUID()}`,
    openStorage: async () => new MemoryStorage(),
    harness: { registry: createRegistry() },
    now: () => 0,
  });
  const door = { answer: "refuse" as "refuse" | "silent" | "serve", subscribed: 0, released: 0 };
  // The worker's service, whose status subscription the door takes and never answers while `silent`.
  const service: HarnessService = {
    ...served.service,
    onStatus(listener) {
      door.subscribed++;
      if (door.answer === "serve") return served.service.onStatus(listener);
      return () => void door.released++;
    },
  };
  const channel = new MessageChannel();
  exposeHost(service, channel.port1 as never, { authorize: (_caller, call) => call.method !== "onStatus" || door.answer !== "refuse" });
  const client = new HarnessClient(Object.assign(channel.port2, { terminate() {} }) as unknown as Worker);
  try {
    await immediate(() => client.status.kind === "failed");
    door.answer = "silent";
    let asked: HarnessStatus | "pending" = "pending";
    void client.askAgain().then((status) => (asked = status));
    let ready = "pending";
    client.ready().then(
      () => (ready = "ready"),
      (error: Error) => (ready = error.name),
    );
    await immediate(() => door.subscribed === 1);
    await immediate(() => false, 20); // the id has come back over the port: no answer yet
    expect(asked).toBe("pending");
    vi.advanceTimersByTime(STATUS_ASK_MS - 1);
    await immediate(() => false, 20);
    expect(asked).toBe("pending");
    vi.advanceTimersByTime(1);
    await immediate(() => asked !== "pending");
    expect(asked).toMatchObject({ kind: "reconnecting", error: { name: "NotReady" } });
    expect(RETRYABLE.NotReady).toBe(true);
    await immediate(() => door.released === 1); // given up at the worker
    expect(ready).toBe("pending"); // waits, as for any reconnecting: asked again on the backoff

    door.answer = "serve";
    vi.advanceTimersByTime(500);
    await immediate(() => ready !== "pending");
    expect(ready).toBe("ready");
    expect(client.status).toMatchObject({ kind: "ready", role: "leader" });
  } finally {
    client.terminate();
    channel.port1.close();
    channel.port2.close();
    vi.useRealTimers();
    await served.service.close().catch(() => {});
  }
});

it("0142: the first status ask taken and never answered gives way to `reconnecting` (NotReady) at the bound and is asked again (before: `starting` for good)", async () => {
  const { place, endpoint } = scriptedPlace(["silent"]);
  const clock = createManualClock(0);
  const told: HarnessStatus[] = [];
  const watch = watchStatus(endpoint, (status) => told.push(status), { clock });
  await settle();
  clock.advance(STATUS_ASK_MS);
  await settle();
  expect(told).toEqual([
    expect.objectContaining({ kind: "reconnecting", attempt: 1, error: expect.objectContaining({ name: "NotReady" }) }),
  ]);
  expect(place.unsubscribed).toEqual([1]);
  clock.advance(500);
  await settle();
  expect(place.asks).toBe(2);
  watch.close();
  expect(clock.pending).toBe(0);
});

it("0142 (the order the tried fix broke): an id that comes before the first value does not settle again(); it resolves after that value is told", async () => {
  const { place, endpoint } = scriptedPlace(["refuse", "id-then-ready"]);
  const clock = createManualClock(0);
  const told: HarnessStatus[] = [];
  const watch = watchStatus(endpoint, (status) => told.push(status), { clock });
  await settle();
  expect(told.map((status) => status.kind)).toEqual(["failed"]);
  let resolvedWith: string | undefined;
  void watch.again().then(() => (resolvedWith = told.at(-1)?.kind));
  await settle(); // the id has come
  expect(resolvedWith).toBeUndefined();
  place.emits.shift()!();
  await settle();
  expect(resolvedWith).toBe("ready");
  watch.close();
});

it("0142 (property, hostile places): whatever each status ask meets — refused, thrown, taken and silent, served late or at once — again() settles by the ask's bound on the clock, and close() leaves no timer (fails before: a silent ask left again() pending)", async () => {
  type Answer = "refuse" | "throw" | "silent" | "late" | "sync";
  await fc.assert(
    fc.asyncProperty(
      fc.array(fc.constantFrom<Answer>("refuse", "throw", "silent", "late", "sync"), { minLength: 1, maxLength: 6 }),
      async (script) => {
        let asks = 0;
        const endpoint: HostEndpoint = {
          call: () => Promise.reject(new Error("no calls here")),
          subscribe: async (_method, _args, emit) => {
            const answer = script[asks++] ?? "sync";
            const ready = () => emit({ kind: "ready", database: "d", role: "leader" });
            if (answer === "sync") ready();
            await macrotask();
            if (answer === "refuse") throw new NotAuthorized("onStatus", "the hook said no.");
            if (answer === "throw") throw new AuthorizeFailed("onStatus");
            if (answer === "late") setTimeout(ready, 1);
            return asks;
          },
          unsubscribe: () => {},
        };
        const clock = createManualClock(0);
        const watch = watchStatus(endpoint, () => {}, { clock });
        for (let step = 0; step < script.length; step++) {
          let settled = false;
          void watch.again().then(() => (settled = true));
          await settle();
          if (!settled) clock.advance(STATUS_ASK_MS);
          await settle();
          expect(settled).toBe(true);
        }
        watch.close();
        expect(clock.pending).toBe(0);
      },
    ),
    { numRuns: 60 },
  );
}, 120_000);
