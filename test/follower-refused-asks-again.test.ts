/**
 * Decision 0132 (issue 27, the seam 0123's review left): a follower tab whose leader's `authorize` hook refused its
 * status subscription (`false`: `NotAuthorized`) stayed `failed` until another tab led — nothing asked again, though the
 * app's answer may change (a sign-in). Now `failed` is told once, with the library's typed refusal, and the leader is
 * asked again on a slow bounded backoff (5 s doubling to 60 s, on the endpoint's clock): the tab follows once the hook
 * lets it. A hook that throws stays the transient wait of 0123's review (500 ms doubling to 10 s, `reconnecting`).
 * Real `serveTabs` and `tabsEndpoint` on Node's BroadcastChannel and the Web Locks stand-in; the follower's timers on a
 * manual clock.
 */
import fc from "fast-check";
import { expect, it } from "vitest";
import { HarnessClient } from "../src/browser/client.ts";
import { tabsEndpoint } from "../src/browser/tabs/follower.ts";
import { serveTabs } from "../src/browser/tabs/leader.ts";
import { STATUS_ASK_MS } from "../src/browser/tabs/own-status.ts";
import { NotAuthorized } from "../src/errors.ts";
import { HostClient } from "../src/host/client.ts";
import type { HostEndpoint } from "../src/host/endpoint.ts";
import { createHost } from "../src/host/host.ts";
import type { HarnessStatus } from "../src/host/protocol.ts";
import { createRegistry, MemoryStorage } from "../src/index.ts";
import { createManualClock } from "../src/testing/clock.ts";
import { answeringHost, scriptedSockets, settle } from "./socket-support.ts";
import { boundedClock } from "./tabs-bounded-clock.ts";
import { macrotask, tabsTestScope, until, waitingOwnWorker } from "./tabs-support.ts";

/** `hang`: the hook never settles (its ask is given up at its bound, the review of 0132's L3). */
type Answer = "allow" | "refuse" | "throw" | "slow-allow" | "slow-refuse" | "slow-throw" | "hang";

const { cleanups } = tabsTestScope();

/** A leader tab's worker whose hook answers each `onStatus` ask with the next of `answers` (then `allow`). */
async function tabs(answers: Answer[]) {
  const database = `follower-refused-${crypto.randomUUID()}`;
  const served = createHost({
    database,
    openStorage: async () => new MemoryStorage(),
    harness: { registry: createRegistry() },
    now: () => 0,
  });
  const asks: number[] = [];
  const clock = boundedClock(0);
  serveTabs(served.service, database, {
    authorize: async (_caller, call) => {
      if (call.method !== "onStatus") return true;
      const answer = answers[asks.length] ?? "allow";
      asks.push(clock.now());
      if (answer === "hang") return new Promise<boolean>(() => {});
      if (answer.startsWith("slow")) for (let i = 0; i < 5; i++) await macrotask();
      if (answer.endsWith("throw")) throw new Error("the permission store is down");
      return answer.endsWith("allow");
    },
  });
  cleanups.push(() => served.service.close().catch(() => {}));
  await served.ready;
  const own = waitingOwnWorker(database);
  const endpoint = tabsEndpoint(own, { clock });
  const client = new HostClient(endpoint);
  cleanups.push(() => endpoint.close());
  const told: HarnessStatus[] = [];
  client.onStatus((status) => told.push(status));
  const following = () => client.status.kind === "ready" && client.status.role === "follower";
  return { client, told, asks, clock, following, endpoint, answers };
}

const shown = (status: HarnessStatus) =>
  status.kind === "reconnecting"
    ? `reconnecting ${status.attempt}`
    : status.kind === "failed"
      ? `failed ${status.error.name}`
      : status.kind;

it("0132: a refused follower is told failed once (NotAuthorized, the library's words), asked again at 5 s, 10 s, 20 s on the clock, and follows once the hook lets it (fails before: failed for good, asked once)", async () => {
  const { client, told, asks, clock, following } = await tabs(["refuse", "refuse", "refuse", "allow"]);
  await expect(client.ready()).rejects.toBeInstanceOf(NotAuthorized);
  expect(client.status).toMatchObject({ kind: "failed", error: { name: "NotAuthorized" } });
  expect(client.status.kind === "failed" && client.status.error.message).toBe(
    'The host refused "onStatus" for this caller: its authorize hook refused this caller. Nothing was done.',
  );
  expect(asks).toEqual([0]);
  clock.advance(4_999);
  for (let i = 0; i < 20; i++) await macrotask();
  expect(asks).toHaveLength(1); // not before the backoff
  clock.advance(1);
  await until(() => asks.length === 2 && clock.waiting, "asked again at 5 s");
  clock.advance(10_000);
  await until(() => asks.length === 3 && clock.waiting, "asked again at 15 s");
  clock.advance(20_000);
  await until(following, "following once allowed");
  expect(asks).toEqual([0, 5_000, 15_000, 35_000]);
  expect(told.map(shown)).toEqual(["waiting-for-lock", "failed NotAuthorized", "ready"]);
  await client.ready();
  expect(await client.listConversations()).toEqual([]);
  expect(clock.pending).toBe(0); // served: nothing asks again
}, 15_000);

it("0132: the refused backoff is bounded at once a minute: a hook that stays false is asked at 5, 15, 35, 75, 135, 195 s — never faster, never stopped", async () => {
  const { asks, clock, client } = await tabs(Array.from({ length: 50 }, () => "refuse" as const));
  await until(() => client.status.kind === "failed" && clock.waiting, "refused");
  for (let n = 2; n <= 6; n++) {
    clock.next();
    await until(() => asks.length === n && clock.waiting, `ask ${n}`);
  }
  expect(asks).toEqual([0, 5_000, 15_000, 35_000, 75_000, 135_000]);
  clock.next();
  await until(() => asks.length === 7, "ask 7");
  expect(asks[6]).toBe(195_000);
  expect(client.status.kind).toBe("failed");
}, 15_000);

it("0132: a hook that throws after a refusal is the transient wait (reconnecting 1 with AuthorizeFailed), and a refusal after it is told failed again", async () => {
  const { told, clock, asks, following } = await tabs(["refuse", "throw", "refuse", "allow"]);
  await until(() => asks.length === 1 && clock.waiting, "refused");
  clock.next();
  await until(() => asks.length === 2 && clock.waiting, "threw");
  clock.next();
  await until(() => asks.length === 3 && clock.waiting, "refused again");
  clock.next();
  await until(following, "following");
  expect(told.map(shown)).toEqual(["waiting-for-lock", "failed NotAuthorized", "reconnecting 1", "failed NotAuthorized", "ready"]);
  expect(told[2]).toMatchObject({ error: { name: "AuthorizeFailed" } });
  expect(JSON.stringify(told)).not.toContain("permission store"); // the hook's words stay in the leader
}, 15_000);

it("0132 (property): whatever the leader's hook answers (true, false, a throw, slowly, never), the follower never wedges — a timer is always pending until it follows — each wait is at most 60 s, failed is never told twice in a row, and it follows at the first answer that lets it", async () => {
  const answer = fc.constantFrom<Answer>("allow", "refuse", "throw", "slow-allow", "slow-refuse", "slow-throw", "hang");
  await fc.assert(
    fc.asyncProperty(fc.array(answer, { maxLength: 6 }), async (answers) => {
      const { told, asks, clock, following } = await tabs(answers);
      const first = answers.findIndex((one) => one.endsWith("allow"));
      const needed = (first < 0 ? answers.length : first) + 1;
      for (let n = 1; ; n++) {
        if (answers[n - 1] === "hang") {
          // Never answered: given up at its bound (the review of 0132, L3; before: no timer, wedged for good).
          await until(() => asks.length === n && clock.asking && clock.pending === 1, `ask ${n} under way`);
          const asked = clock.now();
          expect(clock.next()).toBe(true);
          expect(clock.now() - asked).toBe(STATUS_ASK_MS);
          expect(told.at(-1)).toMatchObject({ kind: "reconnecting", error: { name: "NotReady" } });
        }
        await until(() => following() || (asks.length === n && clock.waiting), `ask ${n} answered`);
        if (following()) break;
        const before = clock.now();
        expect(clock.next()).toBe(true); // never wedged: something asks again
        expect(clock.now() - before).toBeLessThanOrEqual(60_000);
        expect(n).toBeLessThan(needed);
      }
      expect(asks).toHaveLength(needed);
      const kinds = told.map(shown);
      for (let i = 1; i < kinds.length; i++) expect(kinds[i] === kinds[i - 1] && kinds[i]!.startsWith("failed")).toBe(false);
      expect(kinds.at(-1)).toBe("ready");
      for (const cleanup of cleanups.splice(0).reverse()) await cleanup();
    }),
    { numRuns: 25 },
  );
}, 120_000);

it("0132: the app asks again at once (HarnessClient.askAgain → the tabs' endpoint): a refused follower whose hook now lets it follows without waiting for the backoff; nothing is asked while it follows", async () => {
  const { endpoint, asks, clock, following, answers } = await tabs(["refuse"]);
  await until(() => asks.length === 1 && clock.waiting, "refused");
  endpoint.askAgain(); // the app says its credentials changed: the hook lets it now (answers run out: allow)
  await until(following, "following without a clock move");
  expect(clock.now()).toBe(0);
  expect(asks).toEqual([0, 0]);
  expect(clock.pending).toBe(0); // the refused wait was cancelled, not left to ask again
  answers.push("refuse");
  endpoint.askAgain(); // served: nothing to ask
  for (let i = 0; i < 20; i++) await macrotask();
  expect(asks).toHaveLength(2);
  expect(following()).toBe(true);
}, 15_000);

it("0132: askAgain while the hook throws asks now, instead of after the transient wait (500 ms)", async () => {
  const { endpoint, asks, clock, following, told } = await tabs(["throw"]);
  await until(() => asks.length === 1 && clock.waiting, "threw");
  endpoint.askAgain();
  await until(following, "following without a clock move");
  expect(asks).toEqual([0, 0]);
  expect(clock.pending).toBe(0);
  expect(told.map(shown)).toEqual(["waiting-for-lock", "reconnecting 1", "ready"]);
}, 15_000);

it("0132: askAgain asks this tab's own worker again when its hook refused the page's status subscription (before: failed while that worker lived)", async () => {
  let refuse = true;
  let asked = 0;
  const own: HostEndpoint = {
    call: () => new Promise(() => {}),
    subscribe: async (_method, _args, emit) => {
      asked++;
      if (refuse) throw new NotAuthorized("onStatus", "its authorize hook refused this caller.");
      emit({ kind: "opening", database: "own" } satisfies HarnessStatus);
      return 1;
    },
    unsubscribe: () => {},
  };
  const endpoint = tabsEndpoint(own, { clock: createManualClock(0) });
  cleanups.push(() => endpoint.close());
  const client = new HostClient(endpoint);
  await until(() => client.status.kind === "failed", "refused");
  refuse = false;
  endpoint.askAgain();
  await until(() => client.status.kind === "opening", "asked again");
  expect(asked).toBe(2);
  endpoint.askAgain(); // served: nothing to ask
  await macrotask();
  expect(asked).toBe(2);
});

it("0132: askAgain over a socket: a status subscription the host refused is asked again on the open connection, and the page is ready (before: failed until the next connection)", async () => {
  const host = answeringHost({ onStatus: "refuse" }, "not yours.");
  const sockets = scriptedSockets(host.endpoint);
  let connects = 0;
  const client = new HarnessClient({
    url: "ws://x.test/h",
    connect: () => {
      connects++;
      return sockets.connect();
    },
  });
  await expect(client.ready()).rejects.toBeInstanceOf(NotAuthorized);
  host.answer.onStatus = "ok";
  client.askAgain();
  await until(() => client.status.kind === "ready", "asked again, served");
  expect(host.asked.onStatus).toBe(2);
  expect(connects).toBe(1);
  client.askAgain(); // served: nothing to ask
  await settle();
  expect(host.asked.onStatus).toBe(2);
  client.terminate();
});
