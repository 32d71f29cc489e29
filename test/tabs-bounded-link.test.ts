/**
 * Decision 0141 (decision 0137's "Not done" and its reviews' older gap): a tabs link has bounds, and what arrives from
 * another page is checked against Web Locks before it is followed. A forged `leader` announcement is ignored where Web
 * Locks says who holds the database; one it cannot vouch for is given up when no `accepted` comes in `TAB_CONNECT_MS`; a
 * forger that wins the `accepted` race no longer makes the link deaf to the leader's `gone`, nor hands it a life lock of
 * its own; a call the leader does not answer is bounded by the leader's silence (`TAB_CALL_MS`) and fails `ConnectionLost`
 * (typed, retryable), a keyed one sent again with its key. Real `serveTabs` and `tabsEndpoint` over Node's
 * BroadcastChannel and the Web Locks stand-in, whose `client(id)` views name their holder in `query()` as Chromium does;
 * the follower's timers on a manual clock.
 */
import fc from "fast-check";
import { expect, it } from "vitest";
import { tabsEndpoint } from "../src/browser/tabs/follower.ts";
import { serveTabs } from "../src/browser/tabs/leader.ts";
import { leaderMark } from "../src/browser/tabs/leader-check.ts";
import { TAB_CONNECT_MS } from "../src/browser/tabs/link.ts";
import { TAB_CALL_MS } from "../src/browser/tabs/link-calls.ts";
import { ConnectionLost } from "../src/errors.ts";
import { HostClient } from "../src/host/client.ts";
import { createHost } from "../src/host/host.ts";
import type { HarnessService } from "../src/host/protocol.ts";
import { createRegistry, MemoryStorage } from "../src/index.ts";
import { createManualClock } from "../src/testing/clock.ts";
import { macrotask, tabsTestScope, until, waitingOwnWorker } from "./tabs-support.ts";

const { locks, cleanups } = tabsTestScope();
const settle = async () => {
  for (let i = 0; i < 20; i++) await macrotask();
};

type Frame = Record<string, unknown>;

/** Holds `name` in `manager` until the test ends. */
async function hold(manager: LockManager, name: string): Promise<void> {
  let release = () => {};
  await new Promise<void>(
    (granted) =>
      void manager.request(name, () => {
        granted();
        return new Promise<void>((resolve) => (release = resolve));
      }),
  );
  cleanups.push(() => release());
}

/**
 * A leader tab's worker: it holds the database's lock and a life lock in its own client (as `webLocksOwnership` does),
 * and serves the tabs. `checked`: its locks are asked of a client Web Locks names (else of the manager itself: `query()`
 * cannot say who holds them, as in a browser without client ids). `accepting(connection)`: the leader's `accepted` for
 * that connection waits for it (a forger that wins the race).
 */
async function leader(options: { checked?: boolean; accepting?: (connection: string) => Promise<void> } = {}) {
  const database = `bounded-link-${crypto.randomUUID()}`;
  const context = options.checked === false ? (locks as unknown as LockManager) : locks.client("leader");
  await hold(context, `pi-durable-web:${database}`);
  const life = `pi-durable-web:worker-life:${crypto.randomUUID()}`;
  await hold(context, life);
  const served = createHost({
    database,
    openStorage: async () => new MemoryStorage(),
    harness: { registry: createRegistry() },
    now: () => 0,
  });
  cleanups.push(() => served.service.close().catch(() => {}));
  let lastLock = "";
  const service = new Proxy(served.service, {
    get: (target, key) =>
      key === "lifeLock"
        ? async () => {
            const connection = lastLock.replace(/:life$/, "");
            await options.accepting?.(connection);
            return life;
          }
        : (Reflect.get(target, key) as (...args: unknown[]) => unknown)?.bind?.(target),
  }) as HarnessService;
  (globalThis as { navigator?: unknown }).navigator = {
    locks: {
      request: (name: string, ...rest: unknown[]) => {
        lastLock = name;
        return (context.request as (...args: unknown[]) => Promise<unknown>)(name, ...rest);
      },
      query: () => context.query(),
    },
  };
  serveTabs(service, database);
  (globalThis as { navigator?: unknown }).navigator = { locks };
  await served.ready;
  /** The connects posted on the database's channel, and the leader's id (from its first announcement). */
  const spy = new BroadcastChannel(`pi-durable-web:tabs:${database}`);
  const connects: Frame[] = [];
  let id: string | undefined;
  spy.onmessage = ({ data }) => {
    if (data?.type === "connect") connects.push(data);
    if (data?.type === "leader" && id === undefined) id = data.leader;
  };
  spy.postMessage({ type: "who-leads" });
  await until(() => id !== undefined, "the leader announced");
  cleanups.push(() => spy.close());
  return { database, served, spy, connects, id: id!, life };
}

/** A follower tab (its worker waits for the database) in the client `clientId` (none: the manager itself). */
function follower(database: string, clientId: string | undefined = "follower") {
  const clock = createManualClock(0);
  (globalThis as { navigator?: unknown }).navigator = { locks: clientId ? locks.client(clientId) : locks };
  const endpoint = tabsEndpoint(waitingOwnWorker(database), { clock });
  (globalThis as { navigator?: unknown }).navigator = { locks };
  cleanups.push(() => endpoint.close());
  const client = new HostClient(endpoint);
  const following = () => client.status.kind === "ready" && client.status.role === "follower";
  return { clock, endpoint, client, following };
}

/** Whether `promise` settles within `until`'s wait. */
async function settles(promise: Promise<unknown>): Promise<boolean> {
  let done = false;
  void promise.then(
    () => (done = true),
    () => (done = true),
  );
  try {
    await until(() => done, "settled");
    return true;
  } catch {
    return false;
  }
}

/** Fires the follower's timers in turn (who leads asked again, the bounds) until it follows, at most `rounds` times. */
async function drive(clock: ReturnType<typeof createManualClock>, following: () => boolean, rounds = 30) {
  for (let i = 0; i < rounds; i++) {
    await settle();
    if (following() || !clock.next()) break;
  }
  await until(following, "following");
}

it("0141: a forged leader announcement — another id, its mark held in the forger's own client — is ignored: the follower keeps the real leader, no connect to the forged id, a call answered (fails before: it left the real leader and connected to the forged id for good, the call never answered)", async () => {
  const real = await leader();
  const { client, following } = follower(real.database);
  await until(following, "following");
  const forger = locks.client("forger");
  const forged = crypto.randomUUID();
  await hold(forger, leaderMark(real.database, forged));
  real.spy.postMessage({ type: "leader", leader: forged });
  await settle();
  expect(real.connects.map((connect) => connect.leader)).toEqual([real.id]);
  expect(following()).toBe(true);
  expect(await settles(client.listConversations())).toBe(true);
});

it("0141: an announcement Web Locks cannot vouch for (no client ids) that nobody accepts is given up after TAB_CONNECT_MS on the clock — who leads asked again on the backoff, the real leader followed again and a call answered (fails before: connecting for good, the tab waiting for the lock)", async () => {
  const real = await leader({ checked: false });
  const { clock, client, following } = follower(real.database, undefined);
  await until(following, "following");
  real.spy.postMessage({ type: "leader", leader: "nobody-accepts-this" });
  await until(() => real.connects.length === 2, "connected to the forged id");
  await settle();
  expect(following()).toBe(false);
  clock.advance(TAB_CONNECT_MS - 1);
  await settle();
  expect(real.connects).toHaveLength(2); // nothing before the bound
  clock.advance(1); // the connect's bound: given up
  await settle();
  clock.advance(500); // who leads, asked again on the endpoint's backoff
  await until(following, "following the real leader again");
  expect(real.connects.map((connect) => connect.leader)).toEqual([real.id, "nobody-accepts-this", real.id]);
  expect(await settles(client.listConversations())).toBe(true);
});

it("0141: a forger that wins the accepted race (its own session, a free life lock) neither loses the link at once nor makes it deaf to the leader's gone — after a bye with the leader's overheard session the leader says gone, the follower connects again and a call is answered (fails before: the leader's gone ignored, the call never answered)", async () => {
  const ports: BroadcastChannel[] = [];
  const heard: Frame[][] = [];
  const posted = new Map<string, () => void>();
  const real = await leader({
    accepting: (connection) => new Promise<void>((resolve) => (ports.length > 0 ? resolve() : posted.set(connection, resolve))),
  });
  const forger = new BroadcastChannel(`pi-durable-web:tabs:${real.database}`);
  forger.onmessage = ({ data }) => {
    if (data?.type !== "connect") return;
    const port = new BroadcastChannel(data.connection);
    const frames: Frame[] = [];
    port.onmessage = ({ data: frame }) => frames.push(frame);
    ports.push(port);
    heard.push(frames);
    if (ports.length === 1) port.postMessage({ type: "accepted", session: "the-forgers", lifeLock: "a-lock-nobody-holds" });
    setTimeout(() => posted.get(data.connection)?.(), 1); // then the leader's accepted
  };
  cleanups.push(() => {
    forger.close();
    for (const port of ports) port.close();
  });
  const { clock, client, following } = follower(real.database);
  await until(following, "following");
  await settle();
  expect(real.connects).toHaveLength(1); // the forged life lock did not drop the link
  const session = heard[0]!.find((frame) => frame.type === "accepted" && frame.session !== "the-forgers")?.session;
  expect(typeof session).toBe("string");
  ports[0]!.postMessage({ type: "bye", session });
  await until(() => heard[0]!.some((frame) => frame.type === "gone"), "the leader's gone");
  await settle();
  clock.advance(500);
  await until(() => real.connects.length === 2 && following(), "following again");
  expect(await settles(client.listConversations())).toBe(true);
});

/** A leader that announces itself, accepts, serves the status subscription `ready`, then answers calls only when told. */
function silentLeader(database: string, probes: { answered: boolean }) {
  const channel = new BroadcastChannel(`pi-durable-web:tabs:${database}`);
  const ports: BroadcastChannel[] = [];
  const calls: Frame[] = [];
  channel.onmessage = ({ data }) => {
    if (data?.type === "who-leads") channel.postMessage({ type: "leader", leader: "silent" });
    if (data?.type !== "connect" || data.leader !== "silent") return;
    const port = new BroadcastChannel(data.connection);
    ports.push(port);
    port.onmessage = ({ data: frame }) => {
      if (frame?.type === "subscribe") {
        port.postMessage({ type: "result", id: frame.id, value: null });
        port.postMessage({ type: "event", id: frame.id, value: { kind: "ready", database } });
      } else if (frame?.type === "call") {
        calls.push(frame);
        if (frame.method === "status" && probes.answered)
          port.postMessage({ type: "result", id: frame.id, value: { kind: "ready", database } });
      }
    };
    port.postMessage({ type: "accepted", session: "silent-session" });
  };
  cleanups.push(() => {
    channel.close();
    for (const port of ports) port.close();
  });
  return { calls, answer: (frame: Frame, value: unknown) => ports.at(-1)!.postMessage({ type: "result", id: frame.id, value }) };
}

it("0141: a call the leader does not answer — the leader silent to the ask whether it is there too — fails ConnectionLost (typed, retryable) TAB_CALL_MS after that ask, not before; asked once (fails before: never settled)", async () => {
  const database = `bounded-call-${crypto.randomUUID()}`;
  const silent = silentLeader(database, { answered: false });
  const { clock, client, following } = follower(database, undefined);
  await until(following, "following the silent leader");
  let outcome: unknown;
  void client.armCrashPoint("after-intent").then(
    () => (outcome = "resolved"),
    (error: unknown) => (outcome = error),
  );
  await until(() => silent.calls.length === 1, "the call sent");
  clock.advance(TAB_CALL_MS);
  await settle();
  expect(silent.calls.map((call) => call.method)).toEqual(["armCrashPoint", "status"]);
  clock.advance(TAB_CALL_MS - 1);
  await settle();
  expect(outcome).toBeUndefined();
  clock.advance(1);
  await until(() => outcome !== undefined, "the call failed");
  expect(outcome).toBeInstanceOf(ConnectionLost);
  expect((outcome as ConnectionLost).name).toBe("ConnectionLost");
  expect(silent.calls.filter((call) => call.method === "armCrashPoint")).toHaveLength(1); // never sent again
});

it("0141: a long call (waitForTask) is not failed while the leader answers the ask whether it is there — past three bounds it still waits, and its answer is taken", async () => {
  const database = `bounded-call-${crypto.randomUUID()}`;
  const silent = silentLeader(database, { answered: true });
  const { clock, client, following } = follower(database, undefined);
  await until(following, "following the leader");
  let outcome: unknown;
  void client.waitForTask(7).then(
    (value) => (outcome = value),
    (error: unknown) => (outcome = error),
  );
  await until(() => silent.calls.length === 1, "the call sent");
  for (let i = 0; i < 3; i++) {
    clock.advance(TAB_CALL_MS);
    await settle();
  }
  expect(outcome).toBeUndefined();
  expect(silent.calls.filter((call) => call.method === "status")).toHaveLength(3);
  silent.answer(silent.calls[0]!, { id: 7, done: true });
  await until(() => outcome !== undefined, "answered");
  expect(outcome).toEqual({ id: 7, done: true });
});

/** What a forger that listens posts: on the database's channel, and on each connection before the leader's accepted. */
const announcement = fc.record({ id: fc.oneof(fc.uuid(), fc.string()), marked: fc.boolean() });
const early = fc.oneof(
  fc.record(
    {
      type: fc.constant("accepted"),
      session: fc.option(fc.oneof(fc.uuid(), fc.string()), { nil: undefined }),
      lifeLock: fc.option(fc.oneof(fc.constant("forger-held"), fc.string()), { nil: undefined }),
    },
    { requiredKeys: ["type"] },
  ),
  fc.record(
    { type: fc.constantFrom("gone", "bye"), session: fc.option(fc.oneof(fc.string(), fc.uuid()), { nil: undefined }) },
    { requiredKeys: ["type"] },
  ),
  // Answers under the ids a follower uses first (1, 2, 3…): a forged status, result or error.
  fc.record({
    type: fc.constantFrom("result", "error", "event"),
    id: fc.integer({ min: 1, max: 6 }),
    value: fc.oneof(fc.jsonValue(), fc.constant({ kind: "ready", database: "x" }), fc.constant({ kind: "closed" })),
    error: fc.constant({ name: "ConnectionLost", message: "forged" }),
  }),
  fc.jsonValue(),
);
const late = fc.oneof(
  early.map((post) => ({ post })),
  fc.constantFrom("gone", "bye").map((overheard) => ({ overheard })),
  announcement.map((announce) => ({ announce })),
  fc.nat().map((replay) => ({ replay })),
);

it("0141 (property, a forger that listens and sends anything): forged announcements (its marks held in its own client), accepted frames that win the race, answers under the follower's ids, gones and byes with overheard sessions, replays — the follower reaches the real leader (every connect after the forgery settles goes to it), a call is answered, and a createConversation sent through it (never sent again) runs once at the real leader (fails with any of 0141's parts reverted: the announcement check, the sessions of every accepted, the calls' bound, the status filter)", async () => {
  await fc.assert(
    fc.asyncProperty(
      fc.array(announcement, { maxLength: 3 }),
      fc.array(early, { maxLength: 5 }),
      fc.array(late, { maxLength: 8 }),
      async (announced, before, after) => {
        try {
          const ports: BroadcastChannel[] = [];
          const heard: Frame[][] = [];
          const posted = new Map<string, () => void>();
          let forging = true;
          const real = await leader({
            accepting: (connection) =>
              new Promise<void>((resolve) => (!forging || posted.has(connection) ? resolve() : posted.set(connection, resolve))),
          });
          const forgerLocks = locks.client("forger");
          await hold(forgerLocks, "forger-held");
          const forger = new BroadcastChannel(`pi-durable-web:tabs:${real.database}`);
          let closed = false;
          const announce = async ({ id, marked }: { id: string; marked: boolean }) => {
            if (marked) await hold(forgerLocks, leaderMark(real.database, id));
            if (!closed) forger.postMessage({ type: "leader", leader: id });
          };
          forger.onmessage = ({ data }) => {
            if (data?.type === "who-leads") for (const each of announced) void announce(each);
            if (data?.type !== "connect") return;
            const port = new BroadcastChannel(data.connection);
            const frames: Frame[] = [];
            port.onmessage = ({ data: frame }) => frames.push(frame);
            ports.push(port);
            heard.push(frames);
            if (ports.length === 1) for (const frame of before) port.postMessage(frame); // it may drop each: see 0137
            const release = posted.get(data.connection);
            if (release) release();
            else posted.set(data.connection, () => {});
          };
          cleanups.push(() => {
            closed = true;
            forger.close();
            for (const port of ports) port.close();
          });
          for (const each of announced) await announce(each);
          const { clock, client, following } = follower(real.database);
          await drive(clock, following);
          for (const frame of after) {
            const port = ports.at(-1);
            const frames = heard.at(-1) ?? [];
            const session = frames.find((each) => each.type === "accepted" && each.session !== undefined)?.session;
            if ("announce" in frame) await announce(frame.announce);
            else if ("overheard" in frame) port?.postMessage({ type: frame.overheard, session });
            else if ("replay" in frame) frames.length > 0 && port?.postMessage(frames[frame.replay % frames.length]);
            else port?.postMessage(frame.post);
          }
          await settle();
          // The forgery settles: what follows is between the follower and the real leader.
          forger.onmessage = null;
          forging = false;
          for (const release of posted.values()) release();
          const settledAt = real.connects.length;
          await drive(clock, following);
          // A creation, driven through the bounds and reconnects until answered.
          const created = client.createConversation();
          let done = false;
          void created.then(
            () => (done = true),
            () => (done = true),
          );
          for (let i = 0; i < 40 && !done; i++) {
            await settle();
            if (!done && !clock.next()) break;
          }
          expect(done).toBe(true);
          await drive(clock, following);
          expect(real.connects.slice(settledAt).every((connect) => connect.leader === real.id)).toBe(true);
          expect(await real.served.service.listConversations()).toHaveLength(1); // ran once at the real leader
          expect(await settles(client.listConversations())).toBe(true);
        } finally {
          for (const cleanup of cleanups.splice(0).reverse()) await cleanup();
        }
      },
    ),
    { numRuns: 40, endOnFailure: true },
  );
}, 240_000);

it("0141 review L2: a forger that posts MAX_ACCEPTED (4) accepted frames before the leader's fills the link's sessions — after a bye with the leader's overheard session the leader's gone is still taken and the follower connects again — the session of an accepted Web Locks vouches for is always taken (fails before: the leader's accepted was the 5th, its session never taken, the link stayed 'ready' and deaf)", async () => {
  const ports: BroadcastChannel[] = [];
  const heard: Frame[][] = [];
  const posted = new Map<string, () => void>();
  const real = await leader({
    accepting: (connection) => new Promise<void>((resolve) => (ports.length > 0 ? resolve() : posted.set(connection, resolve))),
  });
  const forger = new BroadcastChannel(`pi-durable-web:tabs:${real.database}`);
  forger.onmessage = ({ data }) => {
    if (data?.type !== "connect") return;
    const port = new BroadcastChannel(data.connection);
    const frames: Frame[] = [];
    port.onmessage = ({ data: frame }) => frames.push(frame);
    ports.push(port);
    heard.push(frames);
    if (ports.length === 1) for (let i = 0; i < 4; i++) port.postMessage({ type: "accepted", session: `forged-${i}` });
    setTimeout(() => posted.get(data.connection)?.(), 1); // then the leader's accepted
  };
  cleanups.push(() => {
    forger.close();
    for (const port of ports) port.close();
  });
  const { clock, following } = follower(real.database);
  await until(following, "following");
  await settle();
  const session = heard[0]!.find((frame) => frame.type === "accepted" && !String(frame.session).startsWith("forged-"))?.session;
  expect(typeof session).toBe("string");
  ports[0]!.postMessage({ type: "bye", session });
  await until(() => heard[0]!.some((frame) => frame.type === "gone"), "the leader's gone");
  await settle();
  clock.advance(500);
  await settle();
  expect({ connects: real.connects.length }).toEqual({ connects: 2 });
});
