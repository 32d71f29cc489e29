/**
 * The review of decision 0132 (/work notes review-0132: M1, L1, L3, L4), on real `serveTabs` and `tabsEndpoint` over
 * Node's BroadcastChannel and the Web Locks stand-in, the follower's timers on a manual clock (./tabs-bounded-clock.ts
 * tells a status ask's bound from the backoff's waits). What the tabs' endpoint itself tells is read at the endpoint, not
 * through `HostClient` (which hides a status equal to the one shown).
 */
import { expect, it } from "vitest";
import { tabsEndpoint } from "../src/browser/tabs/follower.ts";
import { serveTabs } from "../src/browser/tabs/leader.ts";
import { STATUS_ASK_MS } from "../src/browser/tabs/own-status.ts";
import { HostClient } from "../src/host/client.ts";
import type { HostEndpoint } from "../src/host/endpoint.ts";
import { createHost } from "../src/host/host.ts";
import type { HarnessStatus } from "../src/host/protocol.ts";
import { createRegistry, MemoryStorage } from "../src/index.ts";
import { type BoundedClock, boundedClock } from "./tabs-bounded-clock.ts";
import { macrotask, tabsTestScope, until, waitingOwnWorker } from "./tabs-support.ts";

const { cleanups } = tabsTestScope();
const settle = async () => {
  for (let i = 0; i < 30; i++) await macrotask();
};
const shown = (status: HarnessStatus) =>
  status.kind === "failed"
    ? `failed ${status.error.name}`
    : status.kind === "reconnecting"
      ? `reconnecting ${status.attempt}${status.error ? ` ${status.error.name}` : ""}`
      : status.kind;

/** The leader tab's worker: its hook answers the n-th `onStatus` ask (1-based) with `hook(n)`; `asks` says when. */
async function leader(database: string, clock: BoundedClock, hook: (n: number) => Promise<boolean> | boolean) {
  const served = createHost({
    database,
    openStorage: async () => new MemoryStorage(),
    harness: { registry: createRegistry() },
    now: () => 0,
  });
  const asks: number[] = [];
  serveTabs(served.service, database, {
    authorize: (_caller, call) => {
      if (call.method !== "onStatus") return true;
      asks.push(clock.now());
      return hook(asks.length);
    },
  });
  cleanups.push(() => served.service.close().catch(() => {}));
  await served.ready;
  return asks;
}

/** A follower tab: its own worker waits for the lock; `raw` is what the tabs' endpoint itself tells. */
function follower(database: string, clock: BoundedClock) {
  const own = waitingOwnWorker(database);
  const endpoint = tabsEndpoint(own, { clock });
  cleanups.push(() => endpoint.close());
  const raw: string[] = [];
  void endpoint.subscribe("onStatus", [], (status) => raw.push(shown(status as HarnessStatus)));
  const client = new HostClient(endpoint);
  const following = () => client.status.kind === "ready" && client.status.role === "follower";
  return { endpoint, client, raw, following };
}

it("0132 review M1: a hook that alternates false and a throw backs off on both — at most 12 asks in 120 s on the clock, reset only once served (fails before: 44, refuse→5 s→throw→0.5 s for good)", async () => {
  const database = `refused-review-${crypto.randomUUID()}`;
  const clock = boundedClock(0);
  const asks = await leader(database, clock, (n) => {
    if (n % 2 === 0) throw new Error("the session store is down");
    return false;
  });
  const { raw } = follower(database, clock);
  await until(() => asks.length === 1 && clock.waiting, "refused");
  for (;;) {
    const n = asks.length;
    clock.next();
    if (clock.now() > 120_000) break;
    await until(() => asks.length === n + 1 && clock.waiting, `ask ${n + 1}`);
  }
  expect(asks.length).toBeLessThanOrEqual(12);
  // Both waits keep growing: 5, 10, 20 s refused; 0.5, 1, 2 s after a throw.
  expect(asks.slice(0, 7)).toEqual([0, 5_000, 5_500, 15_500, 16_500, 36_500, 38_500]);
  expect(raw.slice(0, 6)).toEqual([
    "waiting-for-lock",
    "failed NotAuthorized",
    "reconnecting 1 AuthorizeFailed",
    "failed NotAuthorized",
    "reconnecting 2 AuthorizeFailed",
    "failed NotAuthorized",
  ]);
}, 20_000);

it("0132 review L1: the tabs' endpoint itself tells failed once per refused stretch — four refusals, one failed (fails with the guard removed: four)", async () => {
  const database = `refused-review-${crypto.randomUUID()}`;
  const clock = boundedClock(0);
  const asks = await leader(database, clock, () => false);
  const { raw } = follower(database, clock);
  await until(() => asks.length === 1 && clock.waiting, "refused");
  for (let n = 2; n <= 4; n++) {
    clock.next();
    await until(() => asks.length === n && clock.waiting, `ask ${n}`);
  }
  await settle();
  expect(raw).toEqual(["waiting-for-lock", "failed NotAuthorized"]);
}, 15_000);

for (const late of [true, false]) {
  it(`0132 review L3: a status ask the hook never answers is given up at ${STATUS_ASK_MS / 1000} s on the clock (reconnecting, NotReady) and asked again on the backoff; its late answer (${late ? "allow" : "refuse"}) is told nothing and restarts nothing (fails before: no timer, waiting for good)`, async () => {
    const database = `refused-review-${crypto.randomUUID()}`;
    const clock = boundedClock(0);
    let answerLate: (allowed: boolean) => void = () => {};
    const asks = await leader(database, clock, (n) =>
      n === 1 ? new Promise<boolean>((resolve) => (answerLate = resolve)) : n === 2 ? new Promise<boolean>(() => {}) : true,
    );
    const { raw, following, client } = follower(database, clock);
    await until(() => asks.length === 1 && clock.asking, "asked");
    clock.advance(STATUS_ASK_MS - 1);
    await settle();
    expect(clock.now()).toBe(STATUS_ASK_MS - 1);
    expect(raw).toEqual(["waiting-for-lock"]);
    clock.advance(1);
    expect(raw).toEqual(["waiting-for-lock", "reconnecting 1 NotReady"]);
    expect(client.status.kind === "reconnecting" && client.status.error?.message).toContain("had no answer in 15 s");
    answerLate(late); // the first ask's answer arrives after its bound
    await settle();
    expect(raw).toEqual(["waiting-for-lock", "reconnecting 1 NotReady"]);
    expect(asks).toHaveLength(1);
    expect(clock.waiting).toBe(true); // one wait: the late answer scheduled nothing
    clock.next(); // 500 ms: asked again; this one hangs too
    await until(() => asks.length === 2 && clock.asking, "asked again");
    expect(asks).toEqual([0, STATUS_ASK_MS + 500]);
    clock.next();
    expect(raw.at(-1)).toBe("reconnecting 2 NotReady");
    clock.next();
    await until(following, "following");
    expect(asks).toHaveLength(3);
    expect(raw.filter((one) => one.startsWith("failed"))).toEqual([]);
    expect(raw.filter((one) => one === "ready")).toHaveLength(1);
    await settle();
    expect(clock.pending).toBe(0);
  }, 15_000);
}

it("0132 review L3: this tab's own worker's status ask that never settles is bounded too: reconnecting, asked again, and its late answer is dropped (unsubscribed)", async () => {
  const clock = boundedClock(0);
  let asked = 0;
  const unsubscribed: number[] = [];
  let late: (() => void) | undefined;
  const own: HostEndpoint = {
    call: () => new Promise(() => {}),
    subscribe: (_method, _args, emit) => {
      const id = ++asked;
      if (id === 1)
        return new Promise<number>((resolve) => {
          late = () => {
            emit({ kind: "opening", database: "late" } satisfies HarnessStatus);
            resolve(id);
          };
        });
      emit({ kind: "opening", database: "own" } satisfies HarnessStatus);
      return Promise.resolve(id);
    },
    unsubscribe: (id) => {
      unsubscribed.push(id);
    },
  };
  const endpoint = tabsEndpoint(own, { clock });
  cleanups.push(() => endpoint.close());
  const raw: string[] = [];
  void endpoint.subscribe("onStatus", [], (status) => raw.push(shown(status as HarnessStatus)));
  expect(clock.asking).toBe(true);
  clock.next();
  expect(raw).toEqual(["starting", "reconnecting 1 NotReady"]);
  late!();
  await settle();
  expect(raw).toEqual(["starting", "reconnecting 1 NotReady"]);
  expect(unsubscribed).toEqual([1]);
  clock.next();
  await settle();
  expect(raw).toEqual(["starting", "reconnecting 1 NotReady", "opening"]);
  expect(asked).toBe(2);
  expect(clock.pending).toBe(0);
});

it("0132 review L4: a repeated or forged accepted on the follower's connection (its name is posted in clear) restarts nothing — no ask past the refused backoff, failed told once (fails before: 21 asks with no clock move)", async () => {
  const database = `refused-review-${crypto.randomUUID()}`;
  const clock = boundedClock(0);
  let connection: string | undefined;
  const spy = new BroadcastChannel(`pi-durable-web:tabs:${database}`);
  spy.onmessage = ({ data }) => {
    if (data?.type === "connect") connection = data.connection;
  };
  cleanups.push(() => spy.close());
  const asks = await leader(database, clock, () => false);
  const { raw, client } = follower(database, clock);
  await until(() => client.status.kind === "failed" && clock.waiting && connection !== undefined, "refused");
  const forger = new BroadcastChannel(connection!);
  cleanups.push(() => forger.close());
  for (let i = 0; i < 20; i++) forger.postMessage({ type: "accepted" });
  forger.postMessage({ type: "accepted", lifeLock: 42 });
  await settle();
  expect(asks).toEqual([0]);
  expect(clock.waiting).toBe(true);
  expect(raw).toEqual(["waiting-for-lock", "failed NotAuthorized"]);
  clock.next(); // the backoff still asks, at 5 s
  await until(() => asks.length === 2 && clock.waiting, "asked at 5 s");
  expect(asks).toEqual([0, 5_000]);
}, 15_000);
