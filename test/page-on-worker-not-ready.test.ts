/**
 * Decision 0146 (issue 27; 0139's "Not done"): a page on a worker (the tabs' endpoint) whose worker follows its Durable
 * Object and makes the page's writes through it (`copy.submit`, decision 0096). When the object stays between its
 * harnesses longer than the follow link's `notReadyPassesMs` (decision 0135), the link gives up with a final `NotReady`.
 * Before, that ended the page's Send there, though a page connected to the object (`connectHarness(url)`, 0139) sends
 * the same write again for 30 s. Now the tabs' endpoint does the same, under the key the write carried from its first
 * send: the Send is made once when the next instance comes. A stop, and a keyed call the object does not forward
 * (`createTask`, `claimPageCall`), are never sent again: the page gets the `NotReady`.
 */
import fc from "fast-check";
import { describe, expect, it } from "vitest";
import { followingWrites } from "../src/browser/follow-writes.ts";
import { NOT_READY_RESEND_MS } from "../src/browser/not-ready-resend.ts";
import { tabsEndpoint } from "../src/browser/tabs/follower.ts";
import { DEFAULT_LEASE_TTL_MS } from "../src/follow/arbiter.ts";
import type { HostEndpoint } from "../src/host/endpoint.ts";
import type { HarnessStatus } from "../src/host/protocol.ts";
import { NotReady } from "../src/index.ts";
import { createManualClock } from "../src/testing/clock.ts";
import { comebackWorld } from "./comeback-support.ts";
import { ctx, runUntil } from "./support.ts";

const READY = { kind: "ready", database: "device", recovered: [], recovery: { kind: "clean" }, openMs: 0 } as unknown as HarnessStatus;

function settle(call: Promise<unknown>) {
  const outcome: { value?: unknown; error?: Error; done: boolean; settled: number } = { done: false, settled: 0 };
  call.then(
    (value) => Object.assign(outcome, { value, done: true, settled: outcome.settled + 1 }),
    (error: Error) => Object.assign(outcome, { error, done: true, settled: outcome.settled + 1 }),
  );
  return outcome;
}

/** A worker's own endpoint that answers `onStatus` ready and hands each call to `call`. */
function worker(call: (method: string, args: unknown[]) => Promise<unknown>): HostEndpoint {
  return {
    call,
    subscribe: async (method, _args, emit) => {
      if (method === "onStatus") emit(READY);
      return 1;
    },
    unsubscribe: () => {},
  };
}

describe("a page on a worker that follows its object, in the object's switch (decision 0146)", () => {
  it("S12/S4: the page's Send, refused by the switch past the follow link's notReadyPassesMs, is sent again under its one requestId and made once by the next instance (fails before: NotReady at the link's window)", async () => {
    const world = await comebackWorld({ to: 8, ttlMs: 60_000, declared: true, copyService: true });
    const device = world.device(); // the page's worker's follow link (another device's tab, following the object)
    const conversationId = (await world.tab.harness.root(ctx)).id;
    world.tab.harness.resume();
    await runUntil(world.clock, () => world.printed.length >= 2);
    const following = await world.handOverAndFollow(4);
    const { tab } = await world.takeBack(following); // the object is now in its switch, until its next instance
    // The worker's writes through its object over that link (browser/follow.ts); its copy read here is the tab's.
    const writes = followingWrites(
      (topic, method, args) => device.call(topic, method, args),
      {
        current: () => tab.harness,
        onAttach: () => () => {},
      },
      world.clock,
    );
    const sends: { method: string; args: unknown[] }[] = [];
    const own = worker((method, args) => {
      sends.push({ method, args });
      if (method === "submit") return writes.submit(...(args as Parameters<typeof writes.submit>));
      if (method === "abortConversation") return writes.abortConversation(...(args as Parameters<typeof writes.abortConversation>));
      return Promise.reject(new Error(`unexpected ${method}`));
    });
    const page = tabsEndpoint(own, { clock: world.clock });
    const started = world.clock.now();
    const sent = settle(page.call("submit", [conversationId, { type: "write", entry: { kind: "app.note" } }]));
    const stop = settle(page.call("abortConversation", [conversationId]));
    await runUntil(world.clock, () => world.clock.now() >= started + DEFAULT_LEASE_TTL_MS + 5_000, 20_000);
    // The link gave up on the switch (its first write's NotReady); the page sent the write again meanwhile.
    expect(sent).toMatchObject({ done: false });
    expect(sends.filter((send) => send.method === "submit").length).toBeGreaterThan(1);
    // The stop: NotReady once, never sent again (the object stops the runs going when it arrives, review of 0135, H1).
    expect(stop).toMatchObject({ done: true, settled: 1 });
    expect(stop.error).toBeInstanceOf(NotReady);
    await world.nextInstance(); // on Cloudflare the alarm ends the instance that handed back; the next one follows
    await runUntil(world.clock, () => sent.done, 20_000);
    // Made once, under the one key every send carried (the tabs' endpoint keyed it before its first send).
    const keys = new Set(sends.filter((send) => send.method === "submit").map((send) => (send.args[1] as { requestId: string }).requestId));
    expect(keys.size).toBe(1);
    const [requestId] = keys;
    const stored = await tab.harness.storage.findSubmission(conversationId, requestId!);
    expect(sent).toMatchObject({ value: stored!.id, settled: 1 });
    const notes = (await tab.harness.conversation(conversationId).entries(ctx)).filter((entry) => entry.kind === "app.note");
    expect(notes).toHaveLength(1);
    expect(sends.filter((send) => send.method === "abortConversation")).toHaveLength(1);
    expect(world.clock.now() - started).toBeLessThan(DEFAULT_LEASE_TTL_MS + NOT_READY_RESEND_MS + 5_000);
    page.close();
    await tab.harness.close(ctx);
  });
});

const RESENT = ["submit", "decide", "getTask"] as const;
const ONCE = ["createTask", "claimPageCall", "abortConversation", "createConversation"] as const;

it("decision 0146 (property, a hostile worker): each call answered NotReady by the page's worker settles exactly once; reads and forwarded writes go again under one key within NOT_READY_RESEND_MS of their first NotReady, createTask, claimPageCall, a stop and never calls go once", async () => {
  await fc.assert(
    fc.asyncProperty(
      fc.array(
        fc.record({
          method: fc.constantFrom(...RESENT, ...ONCE),
          refusals: fc.oneof(fc.integer({ min: 0, max: 5 }), fc.constant(Number.POSITIVE_INFINITY)),
        }),
        { minLength: 1, maxLength: 6 },
      ),
      async (calls) => {
        const clock = createManualClock(0);
        const sends: { index: number; args: unknown[]; at: number }[] = [];
        const own = worker(async (_method, args) => {
          const index = args[0] as number;
          const before = sends.filter((send) => send.index === index).length;
          sends.push({ index, args, at: clock.now() });
          if (before < calls[index]!.refusals) throw new NotReady("the object is between its harnesses");
          return `answer ${index}`;
        });
        const page = tabsEndpoint(own, { clock });
        for (let i = 0; i < 20; i++) await Promise.resolve();
        const argsOf = (method: string, index: number): unknown[] =>
          method === "submit"
            ? [index, { type: "input", content: "hi" }]
            : method === "decide"
              ? [index, "call", { approved: true }]
              : [index];
        const outcomes = calls.map(({ method }, index) => settle(page.call(method, argsOf(method, index))));
        for (let round = 0; round < 500 && !outcomes.every((outcome) => outcome.done); round++) {
          for (let i = 0; i < 20; i++) await Promise.resolve();
          clock.next();
        }
        for (const [index, { method, refusals }] of calls.entries()) {
          const mine = sends.filter((send) => send.index === index);
          const outcome = outcomes[index]!;
          expect(outcome.settled).toBe(1);
          if ((ONCE as readonly string[]).includes(method)) {
            expect(mine).toHaveLength(1);
            if (refusals > 0) expect(outcome.error).toBeInstanceOf(NotReady);
            else expect(outcome.value).toBe(`answer ${index}`);
            continue;
          }
          if (Number.isFinite(refusals)) {
            expect(mine).toHaveLength(refusals + 1); // five backoffs (at most 0.25 + … + 4 s) fit in the window
            expect(outcome.value).toBe(`answer ${index}`);
          } else {
            expect(outcome.error).toBeInstanceOf(NotReady);
            expect(mine.length).toBeGreaterThan(1);
            expect(mine.at(-1)!.at - mine[0]!.at).toBeLessThanOrEqual(NOT_READY_RESEND_MS);
          }
          if (method !== "getTask") {
            const keyOf = (args: unknown[]) => {
              const holder = (method === "submit" ? args[1] : args[2]) as Record<string, unknown>;
              return method === "submit" ? holder.requestId : holder.decisionId;
            };
            const keys = new Set(mine.map((send) => keyOf(send.args)));
            expect(keys.size).toBe(1);
            expect([...keys][0]).toEqual(expect.any(String));
          }
        }
        page.close();
        for (let i = 0; i < 20; i++) await Promise.resolve();
        expect(clock.pending).toBe(0);
      },
    ),
    { numRuns: 60 },
  );
});

it("decision 0146: a Send waiting to go again after NotReady ends at the endpoint's close (ConnectionLost, the close's error), sent no more, no timer left", async () => {
  const clock = createManualClock(0);
  let sends = 0;
  const page = tabsEndpoint(
    worker(async () => {
      sends++;
      throw new NotReady("the object is between its harnesses");
    }),
    { clock },
  );
  for (let i = 0; i < 20; i++) await Promise.resolve();
  const sent = settle(page.call("submit", [1, { type: "input", content: "hi" }]));
  for (let i = 0; i < 20; i++) await Promise.resolve();
  expect({ sends, done: sent.done, timers: clock.pending }).toEqual({ sends: 1, done: false, timers: 1 });
  page.close();
  for (let i = 0; i < 20; i++) await Promise.resolve();
  expect(sent).toMatchObject({ done: true, settled: 1, error: { name: "ConnectionLost" } });
  clock.advance(NOT_READY_RESEND_MS);
  expect({ sends, timers: clock.pending }).toEqual({ sends: 1, timers: 0 });
});
