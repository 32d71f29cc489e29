import fc from "fast-check";
import { describe, expect, it } from "vitest";
import type { Json } from "../src/base/json.ts";
import { type AnyTool, defineTool, HarnessClosed, LeaseNotHeld, NotReady } from "../src/index.ts";
import { answer, callTools, ScriptedModels } from "./agent-support.ts";
import { comebackWorld } from "./comeback-support.ts";
import { rows } from "./follow-support.ts";
import { ctx, runUntil } from "./support.ts";

// Decision 0135. After a take-back (runHere) the object's instance that handed the lease back lives on until its alarm
// ends it (Cloudflare): its copy service still says `holding` and its own host is closed. A following device's write made
// through the object there (`copy.submit`, `copy.abortConversation`) was answered `HarnessClosed`, and the device's page
// got it as final. Now the object answers it `NotReady`; the device's link sends a keyed one (`submit`, made once under
// its requestId) again until the next instance makes it (forwarded to the tab that holds the lease, under the same key).
// An abort is not sent again (review of 0135, H1): the object stops the runs going when it lands, so the page decides.

/**
 * The object's switch after a take-back at tick `back` of 8 (each print a declared effect), on the real copy service.
 * `before`: what the tab does while it holds the lease first, before it hands it over.
 */
async function inSwitch(
  back = 4,
  agent: { models?: ScriptedModels; tools?: () => AnyTool[]; before?: (world: World) => Promise<void> } = {},
) {
  const world = await comebackWorld({
    to: 8,
    ttlMs: 60_000,
    declared: true,
    copyService: true,
    models: agent.models?.api,
    tools: agent.tools,
  });
  const device = world.device(); // another device's tab, following the object
  const conversationId = (await world.tab.harness.root(ctx)).id;
  world.tab.harness.resume();
  await runUntil(world.clock, () => world.printed.length >= 2);
  await agent.before?.(world);
  const following = await world.handOverAndFollow(back);
  const { tab } = await world.takeBack(following);
  expect(tab.harness.lease).toMatchObject({ place: "tab", epoch: 3 });
  return { world, device, conversationId, tab };
}

type World = Awaited<ReturnType<typeof comebackWorld>>;

/** A tool that waits for a person (S8's approval), counting its runs at both places. */
function noteTool(runs: string[]): AnyTool {
  return defineTool<{ text: string }>({
    name: "note",
    description: "Write a note",
    parameters: { type: "object", properties: { text: { type: "string" } }, required: ["text"] },
    approval: "always",
    async execute({ text }) {
      runs.push(text);
      return "noted";
    },
  });
}

/** Calls `copy.<method>` on `device`; what it settled with, once it did. */
function settle(call: Promise<Json>) {
  const outcome: { value?: Json; error?: Error; done: boolean } = { done: false };
  call.then(
    (value) => Object.assign(outcome, { value, done: true }),
    (error: Error) => Object.assign(outcome, { error, done: true }),
  );
  return outcome;
}

/** The device's write during the switch, `refusals` times answered NotReady before the object's next instance comes. */
async function writesThrough(refusals: number, back: number) {
  const { world, device, conversationId, tab } = await inSwitch(back);
  const requestId = `r-${refusals}-${back}`;
  const args: Json[] = [conversationId, { type: "write", entry: { kind: "app.note" }, requestId }];
  const outcome = settle(device.call("copy", "submit", args));
  await runUntil(world.clock, () => device.stats.notReadyRetries >= refusals || outcome.done);
  // Before: HarnessClosed ("Harness is closed. Open a new one on the same storage to continue.") at the first answer.
  expect(outcome.error).toBeUndefined();
  expect(device.stats.notReadyRetries).toBe(refusals);
  await world.nextInstance(); // on Cloudflare the alarm ends the instance that handed back; the next one follows
  await runUntil(world.clock, () => outcome.done, 5_000);
  expect(device.stats.notReadyRetries).toBe(refusals); // the next instance answered the first time it was asked
  // Made once, by the tab that holds the lease (forwarded under the requestId), and the device told its id.
  const stored = await tab.harness.storage.findSubmission(conversationId, requestId);
  expect(outcome.value).toEqual({ submissionId: stored!.id });
  const notes = (await tab.harness.conversation(conversationId).entries(ctx)).filter((entry) => entry.kind === "app.note");
  expect(notes).toHaveLength(1);
  // The tab's own work went on through the switch: every tick once, the object's copy equals the tab's.
  await runUntil(world.clock, async () => (await tab.harness.getTask(world.taskId, ctx))?.state.status === "terminal", 5_000);
  expect((await tab.harness.getTask(world.taskId, ctx))?.state).toMatchObject({ outcome: { status: "completed" } });
  expect(world.printed.map(([, line]) => line)).toEqual(Array.from({ length: 8 }, (_, n) => `tick ${n + 1}`));
  await runUntil(world.clock, () => tab.mirror!.acknowledged >= tab.harness.lease!.position, 5_000);
  expect(await rows(world.copy)).toEqual(await rows(world.tabStorage));
  // The tab's pushes the switch refused left their trace too (review of 0130, L2).
  expect(tab.mirror!.stats.retriedRefusals).toBeGreaterThan(0);
  await tab.harness.close(ctx);
}

describe("calls that reach the object between its harnesses after a take-back (decision 0135)", () => {
  it("S4/S12: a following device's copy.submit in the switch is answered NotReady, sent again, and made once by the next instance", async () => {
    await writesThrough(2, 4);
  });

  it("S8/S12 (review of 0135, H1, M1): a device's stop in the switch is answered NotReady once, not sent again, stops nothing; pressed again, the next instance stops the tab's run", async () => {
    const models = new ScriptedModels([{ hang: "thinking" }]);
    const { world, device, tab } = await inSwitch(4, { models });
    const chat = await tab.harness.createConversation({ agent: { model: "faux/faux-1" } }, ctx);
    const run = await chat.submit({ type: "input", content: "go", requestId: "go" }, ctx);
    const ended = settle(run.wait(ctx) as Promise<never>);
    // The generation is running (its request waits for the object's acknowledgement, which comes after the switch).
    const generation = async () => (await tab.harness.inspect(ctx)).tasks.find((task) => task.record.kind === "pi.generation")!.record;
    expect(await generation()).toMatchObject({ abortRequested: false });
    const refused = settle(device.call("copy", "abortConversation", [chat.id]));
    await runUntil(world.clock, () => refused.done);
    expect(refused.error).toBeInstanceOf(NotReady); // retryable: pressing stop again is the page's choice
    for (let pass = 0; pass < 10; pass++) world.clock.advance(2_000); // resends would have gone by now
    await runUntil(world.clock, () => device.stats.notReadyRetries > 0 || refused.done);
    expect(device.stats.notReadyRetries).toBe(0);
    expect(ended.done).toBe(false); // the refused stop stopped nothing
    expect(await generation()).toMatchObject({ abortRequested: false });
    await world.nextInstance();
    await runUntil(world.clock, () => models.hanging === 1, 5_000);
    await runUntil(world.clock, () => tab.mirror!.acknowledged >= tab.harness.lease!.position, 5_000);
    const stop = settle(device.call("copy", "abortConversation", [chat.id]));
    await runUntil(world.clock, () => stop.done && ended.done, 5_000);
    expect(stop.value).toEqual({});
    expect(ended.value).toMatchObject({ status: "unanswered", reason: "aborted" }); // a real stop, forwarded to the tab
    expect(models.hanging).toBe(0);
    await tab.harness.close(ctx);
  });

  it("S8 (0135's not done): a following device's copy.decide in the switch is answered NotReady, sent again under its decisionId, and made once by the next instance: one approval, the tool runs once, the turn ends", async () => {
    const runs: string[] = [];
    const models = new ScriptedModels([callTools([["note", { text: "a" }, "call_1"]]), answer("done")]);
    let chatId = 0;
    // The tab's turn waits for a person on call_1 before the hand-over: it waits so at the object, and after the take-back.
    const before = async (world: World) => {
      const chat = await world.tab.harness.createConversation({ agent: { model: "faux/faux-1" } }, ctx);
      chatId = chat.id;
      await chat.submit({ type: "input", content: "note it", requestId: "q" }, ctx);
      await runUntil(world.clock, () => chat.pendingApprovals().length === 1);
    };
    const { world, device, tab } = await inSwitch(4, { models, tools: () => [noteTool(runs)], before });
    const chat = tab.harness.conversation(chatId);
    expect(chat.pendingApprovals().map((approval) => approval.callId)).toEqual(["call_1"]);
    const decision = { approved: true, decisionId: "phone-d1" };
    const outcome = settle(device.call("copy", "decide", [chatId, "call_1", decision]));
    await runUntil(world.clock, () => device.stats.notReadyRetries >= 2 || outcome.done);
    // Before 0135: HarnessClosed at the first answer (final for the device's page); not keyed: NotReady at once.
    expect(outcome.error).toBeUndefined();
    expect(device.stats.notReadyRetries).toBe(2);
    expect(runs).toEqual([]);
    await world.nextInstance();
    await runUntil(world.clock, () => outcome.done, 5_000);
    expect(outcome.value).toMatchObject({ record: { callId: "call_1", status: "approved", decisionId: "phone-d1" } });
    await runUntil(
      world.clock,
      async () => (await chat.entries(ctx)).some((entry) => entry.kind === "pi.assistant" && JSON.stringify(entry).includes('"done"')),
      5_000,
    );
    expect(runs).toEqual(["a"]); // decided once, at the tab that holds the lease: the tool ran once
    expect(chat.pendingApprovals()).toEqual([]);
    const results = (await chat.entries(ctx)).filter((entry) => entry.kind === "pi.tool-result");
    expect(results).toHaveLength(1);
    // Asked again under the same decisionId after the switch, the tab answers the one record it made.
    const again = settle(device.call("copy", "decide", [chatId, "call_1", decision]));
    await runUntil(world.clock, () => again.done, 5_000);
    expect(again.value).toEqual(outcome.value);
    expect(runs).toEqual(["a"]);
    await tab.harness.close(ctx);
  });

  it("property: however many times the switch refuses the write and wherever the take-back falls, it is made once, the device told, the tab's task completes", async () => {
    await fc.assert(
      fc.asyncProperty(fc.integer({ min: 1, max: 5 }), fc.integer({ min: 3, max: 6 }), async (refusals, back) => {
        await writesThrough(refusals, back);
      }),
      { numRuns: 8 },
    );
  }, 90_000);

  it("what is not keyed is answered in the switch as before: a lease renewal from the book, page calls LeaseNotHeld (the tab runs them)", async () => {
    const { world, device, conversationId, tab } = await inSwitch();
    const renewal = settle(device.call("lease", "renew", ["tab", 3]));
    const claim = settle(device.call("page-calls", "claimPageCall", [conversationId, "c1", { claimId: "k", pageId: "p" }]));
    await runUntil(world.clock, () => renewal.done && claim.done);
    expect(renewal.value).toMatchObject({ epoch: 3 });
    expect(claim.error).toBeInstanceOf(LeaseNotHeld);
    expect(device.stats.notReadyRetries).toBe(0);
    await tab.harness.close(ctx);
  });

  it("review of 0130, M1 (bounded): an instance that stays between harnesses (no next one comes) ends the write with NotReady after one lease's time, nothing made", async () => {
    const { world, device, conversationId, tab } = await inSwitch();
    const draft = { type: "write", entry: { kind: "app.note" }, requestId: "stays" };
    const outcome = settle(device.call("copy", "submit", [conversationId, draft]));
    await runUntil(world.clock, () => outcome.done, 5_000);
    expect(outcome.error).toBeInstanceOf(NotReady); // retryable: the page may send it again, same requestId
    expect(device.stats.notReadyRetries).toBeGreaterThan(0);
    expect(await tab.harness.storage.findSubmission(conversationId, "stays")).toBeUndefined();
    await tab.harness.close(ctx);
  });

  it("review of 0130, M1: a closed object's copy (the app closed its service) still ends a following device's write with HarnessClosed, at once", async () => {
    const world = await comebackWorld({ to: 8, ttlMs: 60_000, copyService: true });
    const device = world.device();
    const conversationId = (await world.tab.harness.root(ctx)).id;
    await world.copyService!.close(); // the tab holds the lease; the object follows, its copy now closed for good
    const outcome = settle(device.call("copy", "submit", [conversationId, { type: "write", entry: { kind: "app.note" }, requestId: "r" }]));
    await runUntil(world.clock, () => outcome.done);
    expect(outcome.error).toBeInstanceOf(HarnessClosed);
    expect(device.stats.notReadyRetries).toBe(0);
    await world.tab.harness.close(ctx);
  });
});
