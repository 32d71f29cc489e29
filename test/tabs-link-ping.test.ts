/**
 * The review of decision 0141 (its probes, made tests). A real leader (serveTabs over a real host) whose app
 * `authorize` hook is slow for a while (an auth server outage: the hook awaits a fetch) — the calls already admitted
 * run on. The link's ask whether the leader is there was a `status` call through that hook (M1), so the live leader
 * was declared dead; now a `ping` the connection answers before the door. The follower's timers on a manual clock.
 */
import { expect, it } from "vitest";
import { tabsEndpoint } from "../src/browser/tabs/follower.ts";
import { serveTabs } from "../src/browser/tabs/leader.ts";
import { QUERY_MS } from "../src/browser/tabs/leader-check.ts";
import { TAB_CALL_MS } from "../src/browser/tabs/link-calls.ts";
import { ConnectionLost } from "../src/errors.ts";
import { HostClient } from "../src/host/client.ts";
import { createHost } from "../src/host/host.ts";
import type { HarnessService } from "../src/host/protocol.ts";
import { createRegistry, MemoryStorage } from "../src/index.ts";
import { isRetryable } from "../src/retryable.ts";
import { createManualClock } from "../src/testing/clock.ts";
import { macrotask, tabsTestScope, until, waitingOwnWorker } from "./tabs-support.ts";

const { locks, cleanups } = tabsTestScope();
const settle = async () => {
  for (let i = 0; i < 20; i++) await macrotask();
};

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

/** A leader whose hook waits on `outage` while one is on, and whose `method` waits on `slow` (a long call). */
async function leader(method: string, options: { markRefused?: boolean } = {}) {
  const database = `rev-0141-${crypto.randomUUID()}`;
  const context = locks.client("leader");
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
  let endSlow = () => {};
  const slow = new Promise<void>((resolve) => (endSlow = resolve));
  const ran: string[] = [];
  const results: unknown[] = [];
  const service = new Proxy(served.service, {
    get: (target, key) => {
      const real = (Reflect.get(target, key) as (...args: unknown[]) => unknown)?.bind?.(target);
      if (key === "lifeLock") return async () => life;
      if (key === method)
        return async (...args: unknown[]) => {
          ran.push(method);
          await slow;
          const value = await real!(...args);
          results.push(value);
          return value;
        };
      return real;
    },
  }) as HarnessService;
  let outage: Promise<void> | undefined;
  let endOutage = () => {};
  const hooked: string[] = [];
  let refuseStatus = false;
  const authorize = async (_caller: unknown, call: { method: string }) => {
    hooked.push(call.method);
    if (outage) await outage;
    return !(refuseStatus && call.method === "status");
  };
  // A lock manager that refuses the leader's mark (the browser failed the request): the leader announces anyway.
  const refusing = {
    request: (name: string, ...rest: unknown[]) =>
      options.markRefused && name.startsWith("pi-durable-web:tabs:")
        ? Promise.reject(new DOMException("refused", "AbortError"))
        : (context.request as (...args: unknown[]) => Promise<unknown>)(name, ...rest),
    query: () => context.query(),
  };
  (globalThis as { navigator?: unknown }).navigator = { locks: options.markRefused ? refusing : context };
  serveTabs(service, database, authorize);
  (globalThis as { navigator?: unknown }).navigator = { locks };
  await served.ready;
  return {
    database,
    served,
    ran,
    results,
    hooked,
    endSlow,
    refuseStatus: () => (refuseStatus = true),
    startOutage: () => (outage = new Promise<void>((resolve) => (endOutage = resolve))),
    endOutage: () => {
      outage = undefined;
      endOutage();
    },
  };
}

function follower(database: string) {
  const clock = createManualClock(0);
  (globalThis as { navigator?: unknown }).navigator = { locks: locks.client("follower") };
  const endpoint = tabsEndpoint(waitingOwnWorker(database), { clock });
  (globalThis as { navigator?: unknown }).navigator = { locks };
  cleanups.push(() => endpoint.close());
  const client = new HostClient(endpoint);
  const following = () => client.status.kind === "ready" && client.status.role === "follower";
  return { clock, client, following, endpoint };
}

/** A leader whose connection says it answers pings, answers the status subscription `ready`, and then nothing at all. */
function mute(database: string) {
  const channel = new BroadcastChannel(`pi-durable-web:tabs:${database}`);
  const ports: BroadcastChannel[] = [];
  const frames: Record<string, unknown>[] = [];
  channel.onmessage = ({ data }) => {
    if (data?.type === "who-leads") channel.postMessage({ type: "leader", leader: "mute" });
    if (data?.type !== "connect" || data.leader !== "mute") return;
    const port = new BroadcastChannel(data.connection);
    ports.push(port);
    port.onmessage = ({ data: frame }) => {
      frames.push(frame);
      if (frame?.type === "subscribe") {
        port.postMessage({ type: "result", id: frame.id, value: null });
        port.postMessage({ type: "event", id: frame.id, value: { kind: "ready", database } });
      }
    };
    port.postMessage({ type: "accepted", session: "mute-session", ping: true });
  };
  cleanups.push(() => {
    channel.close();
    for (const port of ports) port.close();
  });
  return { frames };
}

it("0141 review M1 (S6): an authorize outage of 30 s (the hook waits) does not make a follower drop its live leader mid-call — a waitForTask admitted before it is answered once, over the same link, sent once (fails before: the status ask waited in the hook, the link was declared dead at 2 × TAB_CALL_MS)", async () => {
  const real = await leader("waitForTask");
  const { clock, client, following } = follower(real.database);
  await until(following, "following");
  let outcome: unknown;
  void client.waitForTask(1).then(
    (value) => (outcome = { value }),
    (error: unknown) => (outcome = error),
  );
  await until(() => real.ran.length === 1, "the call admitted and running");
  real.startOutage();
  clock.advance(TAB_CALL_MS);
  await settle();
  clock.advance(TAB_CALL_MS);
  await settle();
  const stillFollowing = following();
  real.endOutage();
  real.endSlow();
  await settle();
  // Answered by the host over the same link (no task 1: NotFound), not ConnectionLost.
  expect({ stillFollowing, outcome: outcome instanceof Error ? outcome.name : outcome }).toEqual({
    stillFollowing: true,
    outcome: "NotFound",
  });
  expect(real.ran).toEqual(["waitForTask"]);
  expect(real.hooked.filter((m) => m === "status")).toEqual([]); // the ask never reached the app's hook
});

it("0141 review M2 (S8): a never-retried write (createConversation) admitted at a live leader during an authorize outage is not answered with a retryable ConnectionLost while it goes on to run there (fails before: ConnectionLost, isRetryable, and the conversation created anyway — an app that retries makes two)", async () => {
  const real = await leader("createConversation");
  const { clock, client, following } = follower(real.database);
  await until(following, "following");
  let outcome: unknown;
  void client.createConversation().then(
    (value) => (outcome = { value }),
    (error: unknown) => (outcome = error),
  );
  await until(() => real.ran.length === 1, "the write admitted and running");
  real.startOutage();
  clock.advance(TAB_CALL_MS);
  await settle();
  clock.advance(TAB_CALL_MS);
  await settle();
  real.endOutage();
  real.endSlow();
  await settle();
  const created = (await real.served.service.listConversations()).length;
  const failedRetryable = outcome instanceof Error && isRetryable(outcome);
  expect({ created, failedRetryable }).toEqual({ created: 1, failedRetryable: false });
  expect(outcome).toHaveProperty("value"); // answered, over the same link
});

it("0141 review: closing the follower mid-ask (a call at its bound, its ping unanswered) leaves no timer on its clock, and the call fails ConnectionLost", async () => {
  const database = `rev-0141-${crypto.randomUUID()}`;
  const leader = mute(database);
  const { clock, client, following, endpoint } = follower(database);
  await until(following, "following the mute leader");
  let outcome: unknown;
  void client.armCrashPoint("after-intent").catch((error: unknown) => (outcome = error));
  await until(() => leader.frames.some((f) => f?.type === "call"), "the call sent");
  clock.advance(TAB_CALL_MS);
  await settle();
  expect(leader.frames.filter((f) => f?.type === "ping")).toHaveLength(1);
  endpoint.close();
  await settle();
  expect(clock.pending).toBe(0);
  expect(outcome).toBeInstanceOf(ConnectionLost);
});

it("0141 review M1: a hook that refuses status (an allowlist without it) is never asked by the link's ask — a long waitForTask keeps its link past three bounds (before: each bound asked the hook a status the app never made)", async () => {
  const real = await leader("waitForTask");
  const { clock, client, following } = follower(real.database);
  await until(following, "following");
  real.refuseStatus();
  let outcome: unknown;
  void client.waitForTask(1).then(
    (value) => (outcome = { value }),
    (error: unknown) => (outcome = error),
  );
  await until(() => real.ran.length === 1, "running");
  for (let i = 0; i < 3; i++) {
    clock.advance(TAB_CALL_MS);
    await settle();
  }
  expect({ following: following(), outcome }).toEqual({ following: true, outcome: undefined });
  expect(real.hooked.filter((m) => m === "status").length).toBe(0);
});

it("0141 review M1: a leader that says it answers pings and then answers nothing — a call (never sent again) fails ConnectionLost TAB_CALL_MS after the ping, not before; a ping was sent, no status call", async () => {
  const database = `rev-0141-${crypto.randomUUID()}`;
  const leader = mute(database);
  const { clock, client, following } = follower(database);
  await until(following, "following the mute leader");
  let outcome: unknown;
  void client.armCrashPoint("after-intent").then(
    () => (outcome = "resolved"),
    (error: unknown) => (outcome = error),
  );
  await until(() => leader.frames.some((f) => f?.type === "call"), "the call sent");
  clock.advance(TAB_CALL_MS);
  await settle();
  expect(leader.frames.filter((f) => f?.type === "ping")).toHaveLength(1);
  clock.advance(TAB_CALL_MS - 1);
  await settle();
  expect(outcome).toBeUndefined();
  clock.advance(1);
  await until(() => outcome !== undefined, "the call failed");
  expect(outcome).toBeInstanceOf(ConnectionLost);
  expect(leader.frames.filter((f) => f?.type === "call" && f.method === "status")).toHaveLength(0);
});

it("0141 review: a leader whose mark's lock request is refused still announces itself — the follower (Web Locks cannot vouch: unknown) follows it and a call is answered (fails before: it never announced, the tab waited for the lock)", async () => {
  const real = await leader("waitForTask", { markRefused: true });
  const { clock, client, following } = follower(real.database);
  for (let i = 0; i < 20 && !following(); i++) {
    await settle();
    if (!following() && !clock.next()) break;
  }
  expect(following()).toBe(true);
  expect(Array.isArray(await client.listConversations())).toBe(true);
});

it("0141 review L1: a follower whose locks.query() never settles still follows the real leader within QUERY_MS on its clock, and leaves no query bound pending (fails before: every announcement waited on the query, the tab waited for the lock for good)", async () => {
  const real = await leader("waitForTask");
  const clock = createManualClock(0);
  const view = locks.client("follower");
  (globalThis as { navigator?: unknown }).navigator = {
    locks: { request: view.request.bind(view), query: () => new Promise(() => {}) },
  };
  const endpoint = tabsEndpoint(waitingOwnWorker(real.database), { clock });
  (globalThis as { navigator?: unknown }).navigator = { locks };
  cleanups.push(() => endpoint.close());
  const client = new HostClient(endpoint);
  await settle();
  expect(client.status.kind).not.toBe("ready");
  clock.advance(QUERY_MS); // the announcement's check given up as unknown: followed
  await settle();
  expect(client.status.kind).toBe("ready");
  clock.advance(QUERY_MS); // the accepted's life lock check given up too: the link kept
  await settle();
  expect(client.status.kind).toBe("ready");
});
