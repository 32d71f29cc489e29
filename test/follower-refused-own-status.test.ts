/**
 * Decision 0142, item 2 (0138's "Not done"): a page whose own worker's door refuses it the status, where another tab
 * leads (a lock broker present) and that worker waits for the lock. On the real wiring: a `HarnessClient` over a
 * MessagePort to `exposeHost`'s door on a real `createHost` that waits for the lock; the leader a real `createHost`
 * behind `serveTabs`'s door; `navigator.locks` a stand-in, Node's BroadcastChannel.
 *
 * A call the page makes goes where the database is: its own worker answers that it waits for the lock of that database
 * (the host's "not open" names it), and the page follows the leader tab, whose door decides the call — answered and
 * stored there, or refused with that door's typed error at once. Before, every call failed with the own worker's
 * `DurableError` "not open (status: waiting-for-lock)" for as long as the other tab led.
 */
import { expect, it } from "vitest";
import { HarnessClient } from "../src/browser/client.ts";
import { exposeHost } from "../src/browser/comlink.ts";
import { NotAuthorized } from "../src/errors.ts";
import { createHost } from "../src/host/host.ts";
import { createRegistry } from "../src/index.ts";
import { refusedPageWorld } from "./refused-page-world.ts";
import { sqliteMemoryBackend } from "./support.ts";
import { tabsTestScope, until } from "./tabs-support.ts";

const scope = tabsTestScope();
const { cleanups } = scope;

/** `onStatus` refused; each call as `calls` says (`allow` when absent). */
type Door = { status: "allow" | "refuse"; calls?: "allow" | "refuse"; asked: string[] };
const authorize = (door: Door) => (_caller: unknown, call: { method: string }) => {
  door.asked.push(call.method);
  return call.method === "onStatus" ? door.status === "allow" : door.calls !== "refuse";
};

/** Another tab's worker that leads `database`, its door `door`, and this tab's page over its own worker that waits. */
async function twoTabs(database: string, leaderDoor: Door, ownDoor: Door) {
  const world = await refusedPageWorld(scope, database, authorize(leaderDoor), authorize(ownDoor));
  await until(() => world.client.status.kind === "failed", "the page's status refused");
  return world;
}

const outcome = (promise: Promise<unknown>) => {
  const seen = { value: "pending" };
  promise.then(
    (value) => (seen.value = `ok ${typeof value}`),
    (error: Error) => (seen.value = `${error.name}: ${error.message}`),
  );
  return seen;
};

it("0142 (S4's one owner, across tabs): a page refused its own worker's status, another tab leading, has its call answered by the leader and stored there (before: DurableError 'not open (status: waiting-for-lock)')", async () => {
  const database = `refused-own-${crypto.randomUUID()}`;
  const leaderDoor: Door = { status: "allow", asked: [] };
  const ownDoor: Door = { status: "refuse", asked: [] };
  const { leader, own, client } = await twoTabs(database, leaderDoor, ownDoor);
  expect(client.status).toMatchObject({ kind: "failed", error: { name: "NotAuthorized" } });

  const created = outcome(client.createConversation());
  await until(() => created.value !== "pending", "the call answered");
  expect(created.value).toBe("ok number");
  const rows = await leader.service.query("SELECT count(*) AS n FROM conversations");
  expect(rows).toEqual([{ n: 1 }]);
  expect(own.service.status().kind).toBe("waiting-for-lock");
  expect(leaderDoor.asked).toContain("createConversation"); // the leader's door decided it
  // The page follows the leader, whose door lets it see the status.
  await until(() => client.status.kind === "ready", "ready as a follower");
  expect(client.status).toMatchObject({ kind: "ready", role: "follower", database });
  // Later calls go to the own worker first too, whose door decides each as this page's (review of 0142, M1).
  const ownAsked = ownDoor.asked.filter((method) => method === "createConversation").length;
  await client.createConversation();
  expect(ownDoor.asked.filter((method) => method === "createConversation").length).toBe(ownAsked + 1);
  expect(await leader.service.query("SELECT count(*) AS n FROM conversations")).toEqual([{ n: 2 }]);
});

it("0142: after it followed the leader, the leader's tab goes and this tab's worker takes the database: the page's calls are answered by its own worker (through its own door, review of 0142 M1) and stored there", async () => {
  const database = `refused-then-own-${crypto.randomUUID()}`;
  const leaderDoor: Door = { status: "allow", asked: [] };
  const ownDoor: Door = { status: "refuse", asked: [] };
  const { leader, own, client, leaderGoes } = await twoTabs(database, leaderDoor, ownDoor);
  await client.createConversation();
  expect(await leader.service.query("SELECT count(*) AS n FROM conversations")).toEqual([{ n: 1 }]);
  await leaderGoes();
  await until(() => own.service.status().kind === "ready", "this tab's worker holds the database");
  const created = outcome(client.createConversation());
  await until(() => created.value !== "pending", "the call answered");
  expect(created.value).toBe("ok number");
  expect(await own.service.query("SELECT count(*) AS n FROM conversations")).toEqual([{ n: 1 }]);
  // Its status is still refused by its own door: the page sees it through that worker's tabs door, which refuses it too.
  await until(() => client.status.kind === "failed", "the status refused at that worker's tabs door");
});

it("0142: the leader's door refusing the status too, the call is still answered by the leader; the leader's door refusing the call, it fails with NotAuthorized at once — never 'not open', never left waiting", async () => {
  const database = `refused-both-${crypto.randomUUID()}`;
  const leaderDoor: Door = { status: "refuse", asked: [] };
  const ownDoor: Door = { status: "refuse", asked: [] };
  const { leader, client } = await twoTabs(database, leaderDoor, ownDoor);

  const created = outcome(client.createConversation());
  await until(() => created.value !== "pending", "the call answered");
  expect(created.value).toBe("ok number");
  expect(await leader.service.query("SELECT count(*) AS n FROM conversations")).toEqual([{ n: 1 }]);
  expect(client.status).toMatchObject({ kind: "failed", error: { name: "NotAuthorized" } });

  leaderDoor.calls = "refuse";
  const refused = outcome(client.createConversation());
  await until(() => refused.value !== "pending", "the call answered");
  expect(refused.value).toMatch(/^NotAuthorized: /);
  await expect(client.createConversation()).rejects.toBeInstanceOf(NotAuthorized);
  expect(await leader.service.query("SELECT count(*) AS n FROM conversations")).toEqual([{ n: 1 }]); // nothing more
});

it("0142 (guard, 0138): with a broker and no other tab, a page refused its status still has its calls answered by its own worker, which holds the database", async () => {
  const database = `refused-alone-${crypto.randomUUID()}`;
  const ownDoor: Door = { status: "refuse", asked: [] };
  const own = createHost({
    database,
    openStorage: () => sqliteMemoryBackend.create(),
    harness: { registry: createRegistry() },
    now: () => 0,
  });
  const channel = new MessageChannel();
  exposeHost(own.service, channel.port1 as never, { authorize: authorize(ownDoor) });
  const client = new HarnessClient(Object.assign(channel.port2, { terminate() {} }) as unknown as Worker);
  cleanups.push(async () => {
    client.terminate();
    channel.port1.close();
    channel.port2.close();
    await own.service.close().catch(() => {});
  });
  await until(() => client.status.kind === "failed", "refused");
  await expect(client.createConversation()).resolves.toBeTypeOf("number");
  expect(await own.service.query("SELECT count(*) AS n FROM conversations")).toEqual([{ n: 1 }]);
});
