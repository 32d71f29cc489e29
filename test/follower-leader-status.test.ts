/**
 * Decision 0123's review (M1): a follower tab subscribes to its leader's status through `serveTabs`'s door. When the
 * leader's `authorize` hook threw for that `onStatus` (`AuthorizeFailed`, which passes by itself), the follower dropped
 * the link and nothing asked again (`who-leads` is sent once): the tab stayed `waiting-for-lock` for good while a
 * healthy leader lived, every fresh call waiting. Now it is asked again after the unserved backoff (500 ms doubling), the
 * page `reconnecting` with the error meanwhile, and `ready` as a follower once the hook answers. A refusal
 * (`NotAuthorized`) shows `failed` with it — no longer `waiting-for-lock` — and a fresh call goes to the leader, whose
 * door answers it. And (L2) the page hears a status once even when the endpoint tells it again. Real `serveTabs` and `tabsEndpoint` on Node's BroadcastChannel and the Web Locks stand-in.
 */
import { expect, it } from "vitest";
import { tabsEndpoint } from "../src/browser/tabs/follower.ts";
import { serveTabs } from "../src/browser/tabs/leader.ts";
import { NotAuthorized } from "../src/errors.ts";
import { HostClient } from "../src/host/client.ts";
import type { HostEndpoint } from "../src/host/endpoint.ts";
import { createHost } from "../src/host/host.ts";
import type { HarnessStatus } from "../src/host/protocol.ts";
import { createRegistry, MemoryStorage } from "../src/index.ts";
import { tabsTestScope } from "./tabs-support.ts";

const { cleanups } = tabsTestScope();

/** A leader tab's worker whose hook answers `onStatus` as `mode.answer` says; and a follower tab's page. */
async function tabs(mode: { answer: "throw" | "refuse" | "allow"; asked: number }) {
  const database = `follower-leader-status-${crypto.randomUUID()}`;
  const served = createHost({
    database,
    openStorage: async () => new MemoryStorage(),
    harness: { registry: createRegistry() },
    now: () => 0,
  });
  serveTabs(served.service, database, {
    authorize: (_caller, call) => {
      if (call.method !== "onStatus") return true;
      mode.asked++;
      if (mode.answer === "throw") throw new Error("the permission store is down");
      return mode.answer === "allow";
    },
  });
  cleanups.push(() => served.service.close().catch(() => {}));
  await served.ready;
  // This tab's own worker waits for the database the leader has (`ownTells` tells the page another of its statuses).
  let ownTells = (_status: HarnessStatus) => {};
  const own: HostEndpoint = {
    call: () => new Promise(() => {}),
    subscribe: async (_method, _args, emit) => {
      ownTells = emit;
      emit({ kind: "waiting-for-lock", database } satisfies HarnessStatus);
      return 1;
    },
    unsubscribe: () => {},
  };
  const endpoint = tabsEndpoint(own);
  const client = new HostClient(endpoint);
  cleanups.push(() => endpoint.close());
  const told: HarnessStatus[] = [];
  client.onStatus((status) => told.push(status));
  return { client, told, ownTells: (status: HarnessStatus) => ownTells(status) };
}

it("M1 (0123's review): the leader's hook throws for a follower's status subscription: reconnecting with the error, asked again after the backoff, ready as a follower once it answers (before: waiting-for-lock for good, asked once)", async () => {
  const mode = { answer: "throw" as "throw" | "allow", asked: 0 };
  const { client, told } = await tabs(mode);
  await expect.poll(() => client.status.kind, { timeout: 5000 }).toBe("reconnecting");
  expect(client.status).toMatchObject({ kind: "reconnecting", attempt: 1, retryInMs: 500, error: { name: "AuthorizeFailed" } });
  expect(JSON.stringify(told)).not.toContain("permission store"); // the hook's message stays in the leader
  await expect.poll(() => mode.asked, { timeout: 5000 }).toBe(2); // asked again on the same leader: still failing
  await expect.poll(() => client.status, { timeout: 5000 }).toMatchObject({ kind: "reconnecting", attempt: 2, retryInMs: 1000 });
  mode.answer = "allow";
  await client.ready();
  expect(client.status).toMatchObject({ kind: "ready", role: "follower" });
  expect(mode.asked).toBe(3);
  expect(told.map((status) => (status.kind === "reconnecting" ? `reconnecting ${status.attempt}` : status.kind))).toEqual([
    "waiting-for-lock",
    "reconnecting 1",
    "reconnecting 2",
    "ready",
  ]);
  // Calls reach the leader now.
  expect(await client.listConversations()).toEqual([]);
}, 15_000);

it("M1 (0123's review): the leader's door refuses a follower's status subscription: failed with NotAuthorized, not asked again, and a fresh call is answered by the leader (before: waiting-for-lock for good, calls waiting)", async () => {
  const mode = { answer: "refuse" as const, asked: 0 };
  const { client } = await tabs(mode);
  await expect(client.ready()).rejects.toBeInstanceOf(NotAuthorized);
  expect(client.status).toMatchObject({ kind: "failed", error: { name: "NotAuthorized" } });
  expect(await client.listConversations()).toEqual([]); // the leader's door allows it
  expect(mode.asked).toBe(1);
}, 15_000);

it("L2 (0123's review): a follower's own worker tells another status while the tab follows (the endpoint re-tells the leader's ready): the page hears ready once (fails without HostClient's same-status check)", async () => {
  const mode = { answer: "allow" as const, asked: 0 };
  const { client, told, ownTells } = await tabs(mode);
  await client.ready();
  ownTells({ kind: "closed", reason: "takeover" }); // still following: what the page shows is the leader's ready again
  ownTells({ kind: "waiting-for-lock", database: "any" });
  expect(told.map((status) => status.kind)).toEqual(["waiting-for-lock", "ready"]);
  expect(client.status).toMatchObject({ kind: "ready", role: "follower" });
}, 15_000);
