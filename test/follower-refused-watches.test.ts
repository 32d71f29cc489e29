/**
 * Decision 0144 (0142's review, "Not done"): the watches of a page refused its own worker's status that follows the
 * leading tab. Each is decided by its own worker's door first, as this page's (`{ from: "page" }`); only what that door
 * lets by is carried to the leader (whose door decides it again, as a tab's); a refusal there is the answer, and nothing
 * is subscribed anywhere. A watch that moves with the database is decided by the own door again before it is carried.
 * Before, such watches went to the leader as another tab's: an app hook `from === "tab" || method === "signIn"` let a
 * page refused everything but sign-in watch every conversation. On the real wiring (refused-page-world.ts).
 */
import { expect, it } from "vitest";
import type { ServedHost } from "../src/host/host-options.ts";
import { type Hook, refusedPageWorld } from "./refused-page-world.ts";
import { macrotask, tabsTestScope, until } from "./tabs-support.ts";

const scope = tabsTestScope();

/** Every caller and method a door was asked, in order (`page watchConversation`, `tab onStatus`). */
const recorded =
  (asked: string[], hook: Hook): Hook =>
  (caller, call) => {
    asked.push(`${caller.from} ${call.method}`);
    return hook(caller, call);
  };

const outcome = (promise: Promise<unknown>) => {
  const seen = { value: "pending" };
  promise.then(
    () => (seen.value = "ok"),
    (error: Error) => (seen.value = `${error.name}: ${error.message}`),
  );
  return seen;
};

/** The app: its own page may sign in (`createConversation` stands for it) and nothing else; other tabs are trusted. */
const pageRefusedButSignIn: Hook = (caller, call) => caller.from === "tab" || call.method === "createConversation";

/** The page refused its status, following the leader after a call (its "sign-in"), with one conversation made there. */
async function following(database: string, leaderHook: Hook, ownHook: Hook) {
  const world = await refusedPageWorld(scope, database, leaderHook, ownHook, undefined, { shared: true });
  await until(() => world.client.status.kind === "failed", "the page's status refused");
  const conversationId = await world.client.createConversation(); // follows the leader
  return { ...world, conversationId };
}

const counts = (...hosts: ServedHost[]) => hosts.map((host) => host.listenerCount());

it("0144 probe (the page's door, S4's one owner across tabs): a refused page that follows the leader is refused the watchConversation its own door refuses it — NotAuthorized, nothing subscribed at the leader or its own worker (fails before: let by at the leader as another tab's)", async () => {
  const ownAsked: string[] = [];
  const leaderAsked: string[] = [];
  const database = `watch-probe-${crypto.randomUUID()}`;
  const { leader, own, client, conversationId } = await following(
    database,
    recorded(leaderAsked, pageRefusedButSignIn),
    recorded(ownAsked, pageRefusedButSignIn),
  );
  const before = counts(leader, own);
  const views: unknown[] = [];
  const watched = outcome(client.watchConversationUpdates(conversationId, (update) => views.push(update)));
  await until(() => watched.value !== "pending", "the watch answered");
  for (let i = 0; i < 10; i++) await macrotask();
  expect(watched.value).toMatch(/^NotAuthorized: .*watchConversation/);
  expect(views).toEqual([]);
  expect(counts(leader, own)).toEqual(before);
  expect(ownAsked).toContain("page watchConversation");
  expect(leaderAsked).not.toContain("tab watchConversation"); // never carried
});

it("0144: the other subscriptions too (onReport, watchTasks, watchPageCalls): each refused at the own door is NotAuthorized and held nowhere (fails before: let by at the leader)", async () => {
  const database = `subs-probe-${crypto.randomUUID()}`;
  const { leader, own, client, conversationId } = await following(database, pageRefusedButSignIn, pageRefusedButSignIn);
  const before = counts(leader, own);
  const asked = [
    client.onReport(() => {}),
    client.watchTasks(() => {}),
    client.watchPageCalls(conversationId, { pageId: client.pageId, tools: ["ask"] }, () => {}),
  ].map(outcome);
  await until(() => asked.every((seen) => seen.value !== "pending"), "all answered");
  for (let i = 0; i < 10; i++) await macrotask();
  expect(asked.map((seen) => seen.value.split(":")[0])).toEqual(["NotAuthorized", "NotAuthorized", "NotAuthorized"]);
  expect(counts(leader, own)).toEqual(before);
});

it("0144: a watch the own door lets by is carried to the leader, decided there again as a tab's, and rendered from the leader's database; the own door is asked first", async () => {
  const ownAsked: string[] = [];
  const leaderAsked: string[] = [];
  const database = `watch-let-by-${crypto.randomUUID()}`;
  const pageMayWatch: Hook = (caller, call) => caller.from === "tab" || call.method !== "onStatus";
  const { leader, client, conversationId } = await following(
    database,
    recorded(leaderAsked, pageMayWatch),
    recorded(ownAsked, pageMayWatch),
  );
  const views: unknown[] = [];
  await client.watchConversationUpdates(conversationId, (update) => views.push(update));
  await until(() => views.length > 0, "the snapshot");
  expect(ownAsked).toContain("page watchConversation");
  expect(leaderAsked).toContain("tab watchConversation");
  expect(leader.listenerCount()).toBeGreaterThan(0);
});

it("0144: a refused page's first watch, before any call made it follow, is let by its own door and carried to the leader (its worker's 'not open' names the database) — not failed 'not open (status: waiting-for-lock)' (fails before)", async () => {
  const database = `watch-first-${crypto.randomUUID()}`;
  const pageMayWatch: Hook = (caller, call) => caller.from === "tab" || call.method !== "onStatus";
  const world = await refusedPageWorld(scope, database, pageMayWatch, pageMayWatch);
  await until(() => world.client.status.kind === "failed", "the page's status refused");
  const made = await world.leader.service.createConversation(); // made in the leading tab
  const views: unknown[] = [];
  const watched = outcome(world.client.watchConversationUpdates(made, (update) => views.push(update)));
  await until(() => watched.value !== "pending", "the watch answered");
  expect(watched.value).toBe("ok");
  await until(() => views.length > 0, "the snapshot from the leader");
});

it("0144: a watch carried to the leader moves with the database, decided by the own door again: the page signed out meanwhile, the leader goes and this tab's worker takes the database — the watch ends NotAuthorized (lost), held nowhere (fails before: moved to that worker's tabs door as a tab's, let by)", async () => {
  const database = `watch-moves-${crypto.randomUUID()}`;
  let signedIn = true;
  const hook: Hook = (caller, call) => caller.from === "tab" || (signedIn && call.method !== "onStatus");
  const { own, client, conversationId, leaderGoes } = await following(database, hook, hook);
  const views: unknown[] = [];
  const lost: Error[] = [];
  await client.watchConversationUpdates(
    conversationId,
    (update) => views.push(update),
    (error) => lost.push(error),
  );
  await until(() => views.length > 0, "the snapshot");
  signedIn = false;
  await leaderGoes();
  await until(() => own.service.status().kind === "ready", "this tab's worker holds the database");
  await until(() => lost.length > 0, "the watch ends");
  expect(lost.map((error) => error.name)).toEqual(["NotAuthorized"]);
  for (let i = 0; i < 20; i++) await macrotask();
  // Only the page's own link to its worker's tabs door holds a status watch there: no view of the conversation.
  expect(await own.service.query("SELECT count(*) AS n FROM conversations")).toEqual([{ n: 1 }]);
  const heldViews = own.listenerCount();
  await client.createConversation().catch(() => {}); // signed out: refused, changes nothing
  expect(own.listenerCount()).toBe(heldViews);
});

it("0144: a watch carried while the page was refused stays where it is when the page sees its status again (a follower of the leader), and moves to this tab's worker — decided by its door as this page's — when that worker takes the database", async () => {
  const ownAsked: string[] = [];
  const database = `watch-seen-again-${crypto.randomUUID()}`;
  let statusSeen = false;
  const hook: Hook = (caller, call) => caller.from === "tab" || call.method !== "onStatus" || statusSeen;
  const { leader, own, client, conversationId, leaderGoes } = await following(database, hook, recorded(ownAsked, hook));
  const views: unknown[] = [];
  const lost: Error[] = [];
  await client.watchConversationUpdates(
    conversationId,
    (update) => views.push(update),
    (error) => lost.push(error),
  );
  await until(() => views.length > 0, "the snapshot");
  const heldAtLeader = leader.listenerCount();
  statusSeen = true; // signed in: the page sees its worker wait for the lock, and follows the leader as any tab
  await client.askAgain();
  await until(() => client.status.kind === "ready", "a follower");
  for (let i = 0; i < 10; i++) await macrotask();
  expect(leader.listenerCount()).toBe(heldAtLeader); // not moved, not subscribed again
  const snapshots = views.length;
  const watchesAsked = ownAsked.filter((asked) => asked === "page watchConversation").length;
  await leaderGoes();
  await until(() => own.service.status().kind === "ready", "this tab's worker holds the database");
  await until(() => views.length > snapshots, "the watch moved to this tab's worker");
  expect(ownAsked.filter((asked) => asked === "page watchConversation").length).toBe(watchesAsked + 1);
  expect(lost).toEqual([]);
});
