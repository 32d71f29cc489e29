/**
 * Decision 0138 (the rough edges decision 0136 noticed), on the real wiring: a `HarnessClient` over a MessagePort to
 * `exposeHost` (the worker's comlink door, its `authorize` hook) on a real `createHost`, through the tabs' endpoint.
 *
 * 1. `askAgain()` resolves with the status its ask was answered with, and a `ready()` made meanwhile settles by that
 *    answer (before: `askAgain()` returned nothing, and `ready()` right after it rejected with the old refusal).
 * 2. A call made while the page's own worker still opens, its status refused by the worker's hook, waits for the open
 *    (before: `DurableError` "The database is not open (status: opening)" — the page cannot see when it is open).
 * 3. While the page's status waits after the hook threw for it (`reconnecting`), its calls go to the worker's door, which
 *    decides each (as when it refused the status, and as over a socket) — before, they waited for the status. A call the
 *    door refuses or fails changes nothing.
 */
import fc from "fast-check";
import { afterEach, expect, it } from "vitest";
import { HarnessClient } from "../src/browser/client.ts";
import { exposeHost } from "../src/browser/comlink.ts";
import { watchStatus } from "../src/browser/tabs/own-status.ts";
import { NotAuthorized } from "../src/errors.ts";
import type { HostEndpoint } from "../src/host/endpoint.ts";
import { createHost } from "../src/host/host.ts";
import type { HarnessStatus } from "../src/host/protocol.ts";
import { createRegistry, MemoryStorage } from "../src/index.ts";
import { createManualClock } from "../src/testing/clock.ts";
import { answeringHost, scriptedSockets } from "./socket-support.ts";
import { macrotask, until } from "./tabs-support.ts";

type Answer = "allow" | "refuse" | "throw";

const cleanups: Array<() => Promise<void>> = [];
afterEach(async () => {
  for (const cleanup of cleanups.splice(0).reverse()) await cleanup();
});

/** A page's client of its own worker, whose hook answers the page's `onStatus` as `hook.answer` says (calls: allowed). */
/** `calls`: the hook's answer to each `createConversation` (others: allowed). */
function workerPage(hook: { answer: Answer; asked: number; calls?: () => Answer }, openStorage = async () => new MemoryStorage()) {
  const served = createHost({ database: `d-${crypto.randomUUID()}`, openStorage, harness: { registry: createRegistry() }, now: () => 0 });
  const channel = new MessageChannel();
  exposeHost(served.service, channel.port1 as never, {
    authorize: (_caller, call) => {
      const answer = call.method === "onStatus" ? hook.answer : call.method === "createConversation" && hook.calls ? hook.calls() : "allow";
      if (call.method === "onStatus") hook.asked++;
      if (answer === "throw") throw new Error("the permission store is down");
      return answer === "allow";
    },
  });
  // The page's Worker is the port (terminate(): the port closes, below).
  const client = new HarnessClient(Object.assign(channel.port2, { terminate() {} }) as unknown as Worker);
  cleanups.push(async () => {
    client.terminate();
    channel.port1.close();
    channel.port2.close();
    await served.service.close().catch(() => {});
  });
  return { client, served };
}

/** What `ready()` did within a few macrotasks: resolved, rejected with (its name), or still pending. */
async function readyOutcome(ready: Promise<unknown>): Promise<string> {
  let outcome = "pending";
  ready.then(
    () => (outcome = "ready"),
    (error: Error) => (outcome = error.name),
  );
  for (let i = 0; i < 5; i++) await macrotask();
  return outcome;
}

it("0138: askAgain() once the hook lets the page resolves ready, and ready() called right after it resolves (before: askAgain returned nothing and ready() rejected with the old NotAuthorized)", async () => {
  const hook = { answer: "refuse" as Answer, asked: 0 };
  const { client } = workerPage(hook);
  await expect(client.ready()).rejects.toBeInstanceOf(NotAuthorized);
  hook.answer = "allow";
  const asked = client.askAgain();
  const ready = client.ready(); // at once, the status still failed
  await expect(ready).resolves.toBeDefined();
  expect(await asked).toMatchObject({ kind: "ready", role: "leader" });
  expect(hook.asked).toBe(2);
});

it("0138: askAgain() while the hook still refuses resolves failed NotAuthorized, and ready() after it rejects with that new refusal (never hangs)", async () => {
  const hook = { answer: "refuse" as Answer, asked: 0 };
  const { client } = workerPage(hook);
  await expect(client.ready()).rejects.toBeInstanceOf(NotAuthorized);
  const asked = client.askAgain();
  const ready = client.ready();
  expect(await asked).toMatchObject({ kind: "failed", error: { name: "NotAuthorized" } });
  await expect(ready).rejects.toBeInstanceOf(NotAuthorized);
  expect(hook.asked).toBe(2);
  // Served, askAgain asks nothing and resolves with the status at once.
  hook.answer = "allow";
  await client.askAgain();
  await client.ready();
  hook.answer = "refuse";
  expect(await client.askAgain()).toMatchObject({ kind: "ready" });
  expect(hook.asked).toBe(3);
});

it("0138 (property): for any order of the hook's answers, each followed by askAgain(), askAgain resolves with what that answer means — ready once allowed (and ready after), failed NotAuthorized for a refusal, reconnecting AuthorizeFailed for a throw — and ready() called with it settles the same way (before: askAgain returned undefined)", async () => {
  await fc.assert(
    fc.asyncProperty(fc.array(fc.constantFrom<Answer>("allow", "refuse", "throw"), { minLength: 1, maxLength: 5 }), async (answers) => {
      const hook = { answer: "refuse" as Answer, asked: 0 };
      const { client } = workerPage(hook);
      try {
        await expect(client.ready()).rejects.toBeInstanceOf(NotAuthorized);
        let served = false;
        for (const answer of answers) {
          hook.answer = answer;
          const asked = client.askAgain();
          const ready = readyOutcome(client.ready());
          const status: HarnessStatus = await asked;
          served ||= answer === "allow";
          const expected = served ? "ready" : answer === "refuse" ? "failed NotAuthorized" : "reconnecting AuthorizeFailed";
          const seen =
            status.kind === "failed" || status.kind === "reconnecting" ? `${status.kind} ${status.error?.name ?? ""}` : status.kind;
          expect(seen).toBe(expected);
          expect(await ready).toBe(served ? "ready" : answer === "refuse" ? "NotAuthorized" : "pending");
        }
      } finally {
        await cleanups.pop()?.();
      }
    }),
    { numRuns: 12 },
  );
}, 60_000);

it("0138: a call made while the page's own worker still opens, the hook refusing the page's status, waits for the open and is answered (before: DurableError 'The database is not open (status: opening)')", async () => {
  const hook = { answer: "refuse" as Answer, asked: 0 };
  let open!: () => void;
  const storageHeld = new Promise<void>((resolve) => (open = resolve));
  const { client, served } = workerPage(hook, async () => {
    await storageHeld;
    return new MemoryStorage();
  });
  cleanups.push(async () => open()); // (run first: the host's close waits for its open)
  await expect(client.ready()).rejects.toBeInstanceOf(NotAuthorized); // the page cannot see when its worker opens
  expect(served.service.status().kind).toBe("opening");
  let answered: number | Error | undefined;
  client.createConversation().then(
    (id) => (answered = id),
    (error: Error) => (answered = error),
  );
  const read = client.listConversations();
  read.catch(() => {});
  for (let i = 0; i < 5; i++) await macrotask();
  expect(answered).toBeUndefined(); // waits for the open
  open();
  await until(() => answered !== undefined, "answered after the open");
  expect(typeof answered).toBe("number");
  expect((await read).length).toBeGreaterThanOrEqual(0);
  expect((await client.listConversations()).map((one) => one.id)).toContain(answered);
});

it("0138: a call waiting for the open is answered when the open fails (the host's 'not open (status: failed)'), never left waiting", async () => {
  const hook = { answer: "refuse" as Answer, asked: 0 };
  let fail!: (error: Error) => void;
  const storageHeld = new Promise<never>((_resolve, reject) => (fail = reject));
  const { client, served } = workerPage(hook, () => storageHeld);
  await expect(client.ready()).rejects.toBeInstanceOf(NotAuthorized);
  const call = client.createConversation();
  const outcome = readyOutcome(call);
  expect(await outcome).toBe("pending");
  fail(new Error("no storage here"));
  await expect(call).rejects.toThrow(/not open \(status: failed\)/);
  expect(served.service.status().kind).toBe("failed");
});

it("0138: over a socket too, askAgain() resolves with the answer of the status asked again on the open connection, and ready() called right after it resolves (before: it rejected with the old refusal)", async () => {
  const host = answeringHost({ onStatus: "refuse" }, "not yours.");
  const sockets = scriptedSockets(host.endpoint);
  const client = new HarnessClient({ url: "ws://x.test/h", connect: () => sockets.connect() });
  cleanups.push(async () => client.terminate());
  await expect(client.ready()).rejects.toBeInstanceOf(NotAuthorized);
  expect(await client.askAgain()).toMatchObject({ kind: "failed", error: { name: "NotAuthorized" } }); // refused again
  host.answer.onStatus = "ok";
  const asked = client.askAgain();
  await expect(client.ready()).resolves.toBeDefined();
  expect(await asked).toMatchObject({ kind: "ready" });
  expect(host.asked.onStatus).toBe(3);
});

it("0138: while the hook throws for the page's status (reconnecting), a call the door lets through is answered and stored (before: it waited until the status was served)", async () => {
  const hook = { answer: "throw" as Answer, asked: 0 };
  const { client } = workerPage(hook);
  await until(() => client.status.kind === "reconnecting", "the status waits");
  const made = client.createConversation();
  expect(await readyOutcome(made)).not.toBe("pending");
  const id = await made;
  expect(client.status).toMatchObject({ kind: "reconnecting", error: { name: "AuthorizeFailed" } });
  hook.answer = "allow";
  expect(await client.askAgain()).toMatchObject({ kind: "ready" });
  expect((await client.listConversations()).map((one) => one.id)).toContain(id);
});

it("0138 (property, hostile hook): while the page's status waits after a throw, each call is answered by the door as its hook says — allowed: stored; refused: NotAuthorized; thrown: AuthorizeFailed — and a call refused or failed stores nothing", async () => {
  await fc.assert(
    fc.asyncProperty(fc.array(fc.constantFrom<Answer>("allow", "refuse", "throw"), { minLength: 1, maxLength: 6 }), async (answers) => {
      const queue = [...answers];
      const hook = { answer: "throw" as Answer, asked: 0, calls: () => queue.shift() ?? "allow" };
      const { client } = workerPage(hook);
      try {
        await until(() => client.status.kind === "reconnecting", "the status waits");
        const stored: number[] = [];
        for (const answer of answers) {
          const outcome = await client.createConversation().then(
            (id) => {
              stored.push(id);
              return "allow";
            },
            (error: Error) => error.name,
          );
          expect(outcome).toBe(answer === "allow" ? "allow" : answer === "refuse" ? "NotAuthorized" : "AuthorizeFailed");
        }
        hook.answer = "allow";
        await client.askAgain();
        const listed = (await client.listConversations()).map((one) => one.id);
        expect([...listed].sort()).toEqual([...stored].sort()); // exactly the calls the door let through
      } finally {
        await cleanups.pop()?.();
      }
    }),
    { numRuns: 12 },
  );
}, 60_000);

it("0138: askAgain while a status ask is under way waits for that ask's answer, and asks nothing more (before: nothing to wait for)", async () => {
  let answer: ((status: HarnessStatus) => void) | undefined;
  let asks = 0;
  const own: HostEndpoint = {
    call: () => new Promise(() => {}),
    subscribe: (_method, _args, emit) => {
      asks++;
      if (asks === 1) return Promise.reject(new NotAuthorized("onStatus", "not yet."));
      return new Promise<number>((resolve) => {
        answer = (status) => {
          emit(status);
          resolve(1);
        };
      });
    },
    unsubscribe: () => {},
  };
  const told: HarnessStatus[] = [];
  const watch = watchStatus(own, (status) => told.push(status), { clock: createManualClock(0) });
  cleanups.push(async () => watch.close());
  await until(() => told.length === 1, "refused");
  let first = false;
  let second = false;
  void watch.again().then(() => (first = true)); // asks: the hook answers slowly
  void watch.again().then(() => (second = true)); // the ask under way: waits for it
  await macrotask();
  expect([first, second, asks]).toEqual([false, false, 2]);
  answer?.({ kind: "opening", database: "d" });
  await until(() => first && second, "both answered");
  expect(told.at(-1)).toEqual({ kind: "opening", database: "d" });
  expect(asks).toBe(2);
});
