/**
 * The review of decision 0142 (its probes, by the reviewer rev-0142; each fails on c0faa3f): a page refused its own
 * worker's status, another tab leading. M1: its own door decides every call as this page's. M2: a call in flight when
 * the leader goes is sent again or fails `ConnectionLost` within the resend window. L1: the host's "not open" naming the
 * database, answered after the status became visible, forwards the call. L2: only the host's own "not open" does.
 */
import { expect, it } from "vitest";
import { HarnessClient } from "../src/browser/client.ts";
import { exposeHost } from "../src/browser/comlink.ts";
import { tabsEndpoint } from "../src/browser/tabs/follower.ts";
import { RESEND_WINDOW_MS } from "../src/browser/tabs/retry.ts";
import { HostClient } from "../src/host/client.ts";
import { createHost } from "../src/host/host.ts";
import { createRegistry } from "../src/index.ts";
import { type Hook, leaderTab, refusedPageWorld } from "./refused-page-world.ts";
import { sqliteMemoryBackend } from "./support.ts";
import { boundedClock } from "./tabs-bounded-clock.ts";
import { macrotask, tabsTestScope, until, waitingOwnWorker } from "./tabs-support.ts";

const scope = tabsTestScope();
const { locks, cleanups } = scope;
const twoTabs = (database: string, leaderHook: Hook, ownHook: Hook, methods?: Record<string, (...a: never[]) => unknown>) =>
  refusedPageWorld(scope, database, leaderHook, ownHook, methods);

/** A leader's door that holds every `listConversations` (never answered). */
const holdsListing: Hook = (_caller, call) => (call.method === "listConversations" ? new Promise<boolean>(() => {}) : true);

const outcome = (promise: Promise<unknown>) => {
  const seen = { value: "pending" };
  promise.then(
    (value) => (seen.value = `ok ${JSON.stringify(value)}`),
    (error: Error) => (seen.value = `${error.name}: ${error.message}`),
  );
  return seen;
};

/**
 * The app: its own page may sign in (here `createConversation` stands for it) and nothing else until then; other tabs
 * of the origin (`from: "tab"`: the signed-in leader's followers) are trusted.
 */
const pageRefusedButSignIn: Hook = (caller, call) => caller.from === "tab" || call.method === "createConversation";

it("review 0142 M1 (S4, the page's door): after a call that made the page follow the leader, a call its own door refuses this page is refused NotAuthorized — never answered by the leader as another tab's (fails before: answered)", async () => {
  const database = `probe-a-${crypto.randomUUID()}`;
  const { client } = await twoTabs(database, () => true, pageRefusedButSignIn);
  await until(() => client.status.kind === "failed", "refused");
  const signIn = outcome(client.createConversation()); // allowed by the own door: follows the leader (before: 'not open')
  await until(() => signIn.value !== "pending", "sign-in answered");
  const listed = outcome(client.listConversations());
  await until(() => listed.value !== "pending", "answered");
  // The page's own door refuses listConversations for this page; before 0142 that was the answer.
  expect(listed.value).toMatch(/^NotAuthorized/);
});

it("review 0142 M1: after the leader goes and this tab's worker takes the database, a call its own door refuses this page is refused NotAuthorized — never answered through that worker's tabs door as another tab's (fails before: answered)", async () => {
  const database = `probe-b-${crypto.randomUUID()}`;
  const { own, client, leaderGoes } = await twoTabs(database, () => true, pageRefusedButSignIn);
  await until(() => client.status.kind === "failed", "refused");
  const signIn = outcome(client.createConversation());
  await until(() => signIn.value !== "pending", "sign-in answered");
  await leaderGoes();
  await until(() => own.service.status().kind === "ready", "this tab's worker holds the database");
  const listed = outcome(client.listConversations());
  await until(() => listed.value !== "pending", "answered");
  expect(listed.value).toMatch(/^NotAuthorized/);
});

it("review 0142 M2: a call in flight at the leader when it goes, this tab's worker taking the database and refusing the status to tabs too, is sent again and answered (fails before: never settles)", async () => {
  const database = `probe-c-${crypto.randomUUID()}`;
  let releaseHook!: () => void;
  const held = new Promise<boolean>((resolve) => (releaseHook = () => resolve(true)));
  let holdNext = false;
  const leaderHook: Hook = (_caller, call) => {
    if (call.method === "listConversations" && holdNext) return held;
    return true;
  };
  const ownHook: Hook = (_caller, call) => call.method !== "onStatus"; // status refused to the page and to tabs
  const { own, client, leaderGoes } = await twoTabs(database, leaderHook, ownHook);
  await until(() => client.status.kind === "failed", "refused");
  await client.createConversation(); // follows the leader
  holdNext = true;
  const listed = outcome(client.listConversations()); // held at the leader's door
  for (let i = 0; i < 20; i++) await macrotask();
  expect(listed.value).toBe("pending");
  await leaderGoes();
  releaseHook();
  await until(() => own.service.status().kind === "ready", "this tab's worker holds the database");
  // A fresh call is answered (over the own worker's tabs door, whose status is refused: the link `failed`)...
  await expect(client.createConversation()).resolves.toBeTypeOf("number");
  // ...and the one in flight (`listConversations`: safe to send again) is sent again and answered (before: it waited
  // for a `ready` place for good).
  await until(() => listed.value !== "pending", "the in-flight call settles");
  expect(listed.value).toMatch(/^ok /);
});

it("review 0142 L1 (S4, once): a call at the own door while the status is refused, the status then seen (waiting-for-lock), goes to the leader on the host's 'not open' and is stored once (fails before: ConnectionLost)", async () => {
  const database = `probe-d-${crypto.randomUUID()}`;
  let statusAllowed = false;
  let releaseHook!: () => void;
  const held = new Promise<boolean>((resolve) => (releaseHook = () => resolve(true)));
  const ownHook: Hook = (caller, call) => {
    if (call.method === "onStatus") return statusAllowed;
    if (caller.from === "page" && call.method === "createConversation") return held;
    return true;
  };
  const { client, leader } = await twoTabs(database, () => true, ownHook);
  await until(() => client.status.kind === "failed", "refused");
  const created = outcome(client.createConversation()); // at the own door, held
  for (let i = 0; i < 20; i++) await macrotask();
  statusAllowed = true; // the user signed in meanwhile
  await client.askAgain();
  await until(() => client.status.kind === "ready", "the page follows the leader as a waiting-for-lock tab");
  releaseHook(); // the own host answers "not open" with waitingFor
  await until(() => created.value !== "pending", "answered");
  expect(created.value).toMatch(/^ok /);
  expect(await leader.service.query("SELECT count(*) AS n FROM conversations")).toEqual([{ n: 1 }]);
});

it("review 0142 L2: an app method's error with a field `waitingFor`, thrown after it wrote, reaches the page as it is — never taken for the host's 'not open' (fails before: the call held for good)", async () => {
  const database = `probe-e-${crypto.randomUUID()}`;
  // A lone tab (broker present, no leader): the own worker holds the database; its page is refused the status.
  const own = createHost({
    database,
    openStorage: () => sqliteMemoryBackend.create(),
    harness: { registry: createRegistry() },
    now: () => 0,
    methods: {
      async book(open: { createConversation(o: object, c: unknown): Promise<unknown> }) {
        const { BACKGROUND_CONTEXT } = await import("../src/base/context.ts");
        await open.createConversation({}, BACKGROUND_CONTEXT);
        throw Object.assign(new Error("The slot is taken"), { waitingFor: "slot-7" });
      },
    } as never,
  });
  const channel = new MessageChannel();
  exposeHost(own.service, channel.port1 as never, {
    authorize: ((_c: unknown, call: { method: string }) => call.method !== "onStatus") as never,
  });
  const client = new HarnessClient(Object.assign(channel.port2, { terminate() {} }) as unknown as Worker);
  cleanups.push(async () => {
    client.terminate();
    channel.port1.close();
    channel.port2.close();
    await own.service.close().catch(() => {});
  });
  await until(() => client.status.kind === "failed", "refused");
  const booked = outcome(client.call("book"));
  // The app's method ran (and wrote) once at the own worker...
  await until(() => own.service.status().kind === "ready", "open");
  for (let i = 0; i < 200 && ((await own.service.query("SELECT count(*) AS n FROM conversations")) as { n: number }[])[0]!.n < 1; i++)
    await macrotask();
  expect(await own.service.query("SELECT count(*) AS n FROM conversations")).toEqual([{ n: 1 }]);
  // ...and its error, which carries a field named `waitingFor`, should reach the page; it is held for good instead.
  await until(() => booked.value !== "pending", "the app's error reaches the page");
  expect(booked.value).toBe("Error: The slot is taken");
});

it("review 0142 M2 (the window on the clock): a follower's call in flight at the leader when it goes, no place ever answering again, fails ConnectionLost once RESEND_WINDOW_MS passed on the manual clock — not before (fails before: pending for good)", async () => {
  const database = `resend-window-${crypto.randomUUID()}`;
  // The leader's door holds listConversations: in flight when the leader goes.
  const { leader, leaderLife } = await leaderTab(scope, database, holdsListing);
  const clock = boundedClock(0);
  const endpoint = tabsEndpoint(waitingOwnWorker(database), { clock });
  const client = new HostClient(endpoint);
  cleanups.push(() => endpoint.close());
  await until(() => client.status.kind === "ready", "a follower");
  const listed = outcome(client.listConversations());
  for (let i = 0; i < 20; i++) await macrotask();
  await leader.service.close();
  locks.die(leaderLife); // no other tab: no place answers again
  for (let i = 0; i < 50; i++) await macrotask();
  clock.advance(RESEND_WINDOW_MS - 1);
  for (let i = 0; i < 20; i++) await macrotask();
  expect(listed.value).toBe("pending");
  clock.advance(2);
  await until(() => listed.value !== "pending", "the call settles within the window");
  expect(listed.value).toMatch(/^ConnectionLost/);
});

it("review 0142 M2, at close: a resend waiting for a place when the tabs' endpoint closes ends at once with the close's ConnectionLost and leaves no timer on the manual clock (fails before: the window's timer pending until it fired)", async () => {
  const database = `resend-close-${crypto.randomUUID()}`;
  const { leader, leaderLife } = await leaderTab(scope, database, holdsListing);
  const clock = boundedClock(0);
  const endpoint = tabsEndpoint(waitingOwnWorker(database), { clock });
  const client = new HostClient(endpoint);
  await until(() => client.status.kind === "ready", "a follower");
  const listed = outcome(client.listConversations());
  for (let i = 0; i < 20; i++) await macrotask();
  await leader.service.close();
  locks.die(leaderLife); // no other tab: the resend waits for a place
  for (let i = 0; i < 50; i++) await macrotask();
  expect({ listed: listed.value, timers: clock.pending > 0 }).toEqual({ listed: "pending", timers: true });
  endpoint.close();
  for (let i = 0; i < 5; i++) await macrotask();
  expect({ listed: listed.value, timers: clock.pending }).toEqual({ listed: expect.stringMatching(/^ConnectionLost/), timers: 0 });
});
