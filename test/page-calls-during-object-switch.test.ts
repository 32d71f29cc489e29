/**
 * Decision 0139. After a take-back (runHere) the object's instance that handed the lease back lives on until its alarm
 * ends it (Cloudflare): its copy service still says `holding` and its own host is closed. A page connected to the object
 * itself (`connectHarness(url)`: the socket, here the real socket endpoint over in-process frames) whose user pressed
 * Send then got that host's `HarnessClosed` — final: the message was lost. Now the object answers every call there
 * `NotReady`, and the page's client sends a read or a keyed write again by itself for a bounded time, under the same key:
 * the next instance (which follows) forwards the write to the tab that holds the lease, and it is made once. A stop is
 * not sent again (0135's H1); a real close stays final.
 */
import fc from "fast-check";
import { describe, expect, it } from "vitest";
import { resendingNotReady } from "../src/browser/not-ready-resend.ts";
import { socketEndpoint } from "../src/browser/socket.ts";
import { errorAnswer } from "../src/cloudflare/answers.ts";
import { type HostEndpoint, hostEndpoint, type ServedEndpoint } from "../src/host/endpoint.ts";
import { HarnessClosed, NotReady } from "../src/index.ts";
import { ScriptedModels } from "./agent-support.ts";
import { atHandBackPoints, comebackWorld } from "./comeback-support.ts";
import { rows } from "./follow-support.ts";
import { scriptedSockets } from "./socket-support.ts";
import { ctx, runUntil } from "./support.ts";

type World = Awaited<ReturnType<typeof comebackWorld>>;

/** A page's client connected to the object: the real reconnecting socket, its calls resent on NotReady (as HarnessClient). */
function pageOf(world: World) {
  const sent: Array<{ method: string; args: unknown[] }> = [];
  // The object's current instance serves each frame (the next one once `nextInstance()` started it), as its socket does.
  const served = new WeakMap<object, ServedEndpoint>();
  const current = () => {
    const service = world.copyService!.service;
    if (!served.has(service)) served.set(service, hostEndpoint(service));
    return served.get(service)!;
  };
  const object: HostEndpoint = {
    call: (method, args) => {
      sent.push({ method, args });
      return current().call(method, args);
    },
    subscribe: (method, args, emit, lost) => current().subscribe(method, args, emit, lost),
    unsubscribe: (id) => current().unsubscribe(id),
  };
  const sockets = scriptedSockets(object);
  const timers = { setTimer: (fire: () => void, ms: number) => world.clock.setTimer(ms, fire), now: world.clock.now };
  const socket = socketEndpoint(() => sockets.connect(), { ...timers, random: () => 0.5 });
  const page = resendingNotReady(socket, { clock: world.clock, random: () => 0.5 });
  return { page, sent, sockets };
}

/** The object's switch after a take-back at tick `back` of 8 (each print a declared effect), on the real copy service. */
async function inSwitch(back = 4, models?: ScriptedModels) {
  const world = await comebackWorld({ to: 8, ttlMs: 60_000, declared: true, copyService: true, models: models?.api });
  const conversationId = (await world.tab.harness.root(ctx)).id;
  world.tab.harness.resume();
  await runUntil(world.clock, () => world.printed.length >= 2);
  const following = await world.handOverAndFollow(back);
  const { tab } = await world.takeBack(following);
  expect(tab.harness.lease).toMatchObject({ place: "tab", epoch: 3 });
  expect(world.end.switching).toBe(true);
  return { world, conversationId, tab };
}

function settle<T>(call: Promise<T>) {
  const outcome: { value?: T; error?: Error; done: boolean } = { done: false };
  call.then(
    (value) => Object.assign(outcome, { value, done: true }),
    (error: Error) => Object.assign(outcome, { error, done: true }),
  );
  return outcome;
}

const note = { type: "write", entry: { kind: "app.note" } };

describe("a page connected to the object, in the object's switch after a take-back (decision 0139)", () => {
  it("S8/S12: Send in the switch is answered NotReady, sent again by the page's client under one key, and made once by the next instance", async () => {
    const { world, conversationId, tab } = await inSwitch();
    const { page, sent, sockets } = pageOf(world);
    const submitted = settle(page.call("submit", [conversationId, note]) as Promise<number>);
    await runUntil(world.clock, () => page.resends >= 3 || submitted.done);
    // Before: HarnessClosed ("Harness is closed. Open a new one on the same storage to continue.") at the first answer.
    expect(submitted.error).toBeUndefined();
    // Every send carries the one key the client put on it before the first.
    const keys = new Set(sent.map(({ args }) => (args[1] as { requestId?: string }).requestId));
    expect(keys.size).toBe(1);
    const [requestId] = [...keys];
    expect(requestId).toEqual(expect.any(String));
    // On Cloudflare the alarm ends the instance, which drops every socket; the next instance follows.
    await world.nextInstance();
    sockets.drop();
    await runUntil(world.clock, () => submitted.done, 5_000);
    const stored = await tab.harness.storage.findSubmission(conversationId, requestId!);
    expect(submitted.value).toBe(stored!.id);
    const notes = (await tab.harness.conversation(conversationId).entries(ctx)).filter((entry) => entry.kind === "app.note");
    expect(notes).toHaveLength(1);
    // The tab's work went on through the switch: every tick once, the object's copy equals the tab's.
    await runUntil(world.clock, async () => (await tab.harness.getTask(world.taskId, ctx))?.state.status === "terminal", 5_000);
    expect(world.printed.map(([, line]) => line)).toEqual(Array.from({ length: 8 }, (_, n) => `tick ${n + 1}`));
    await runUntil(world.clock, () => tab.mirror!.acknowledged >= tab.harness.lease!.position, 5_000);
    expect(await rows(world.copy)).toEqual(await rows(world.tabStorage));
    await tab.harness.close(ctx);
  });

  it("S12: a read in the switch (the task, the conversation's entries) is answered by the next instance from its copy", async () => {
    const { world, conversationId, tab } = await inSwitch();
    const { page } = pageOf(world);
    const task = settle(page.call("getTask", [world.taskId]));
    const listed = settle(page.call("listConversations", []));
    await runUntil(world.clock, () => page.resends >= 2 || task.done);
    expect(task.done).toBe(false); // before: HarnessClosed
    await world.nextInstance();
    await runUntil(world.clock, () => task.done && listed.done, 5_000);
    expect(task.value).toMatchObject({ id: world.taskId });
    expect(listed.value).toEqual(expect.arrayContaining([expect.objectContaining({ id: conversationId })]));
    await tab.harness.close(ctx);
  });

  it("S8 (0135's H1): a stop pressed in the switch is answered NotReady once and never sent again; the tab's run goes on", async () => {
    const models = new ScriptedModels([{ hang: "thinking" }]);
    const { world, tab } = await inSwitch(4, models);
    const chat = await tab.harness.createConversation({ agent: { model: "faux/faux-1" } }, ctx);
    const run = await chat.submit({ type: "input", content: "go", requestId: "go" }, ctx);
    const ended = settle(run.wait(ctx) as Promise<unknown>);
    const { page, sent } = pageOf(world);
    const stop = settle(page.call("abortConversation", [chat.id]));
    await runUntil(world.clock, () => stop.done);
    expect(stop.error).toBeInstanceOf(NotReady); // retryable: pressing stop again is the page's choice
    const until = world.clock.now() + 40_000; // past the resend window: a resend would have gone by now
    await runUntil(world.clock, () => world.clock.now() >= until, 5_000);
    expect(sent.filter(({ method }) => method === "abortConversation")).toHaveLength(1);
    expect(page.resends).toBe(0);
    expect(ended.done).toBe(false);
    const generation = (await tab.harness.inspect(ctx)).tasks.find((task) => task.record.kind === "pi.generation")!.record;
    expect(generation).toMatchObject({ abortRequested: false });
    // Pressed again once the next instance follows: forwarded to the tab, it stops the run that goes then.
    await world.nextInstance();
    await runUntil(world.clock, () => models.hanging === 1, 5_000);
    await runUntil(world.clock, () => tab.mirror!.acknowledged >= tab.harness.lease!.position, 5_000);
    const again = settle(page.call("abortConversation", [chat.id]));
    await runUntil(world.clock, () => again.done && ended.done, 5_000);
    expect(again.error).toBeUndefined();
    expect(ended.value).toMatchObject({ status: "unanswered", reason: "aborted" });
    await tab.harness.close(ctx);
  });

  it("review of 0130, M1 (bounded): an instance that stays between harnesses ends the page's Send with NotReady after the window, nothing made", async () => {
    const { world, conversationId, tab } = await inSwitch();
    const { page, sent } = pageOf(world);
    const started = world.clock.now();
    const submitted = settle(page.call("submit", [conversationId, { ...note, requestId: "stays" }]));
    await runUntil(world.clock, () => submitted.done, 5_000);
    expect(submitted.error).toBeInstanceOf(NotReady);
    expect(world.clock.now() - started).toBeGreaterThanOrEqual(30_000);
    expect(sent.length).toBe(page.resends + 1);
    expect(await tab.harness.storage.findSubmission(conversationId, "stays")).toBeUndefined();
    await tab.harness.close(ctx);
  });

  it("property (S8/S12): Send during the hand-back's drain — at its start, as the harness stops, before and after the release — is made once at the tab (before: HarnessClosed, final)", async () => {
    await fc.assert(
      fc.asyncProperty(fc.constantFrom("drain", "stopping", "before release", "after release"), async (point) => {
        const world = await comebackWorld({ to: 8, ttlMs: 60_000, declared: true, copyService: true });
        const conversationId = (await world.tab.harness.root(ctx)).id;
        world.tab.harness.resume();
        await runUntil(world.clock, () => world.printed.length >= 2);
        const following = await world.handOverAndFollow(4);
        const { page } = pageOf(world);
        let submitted: ReturnType<typeof settle<unknown>> | undefined;
        const press = (at: string) => {
          if (at === point) submitted = settle(page.call("submit", [conversationId, { ...note, requestId: point }]));
        };
        // The named points of the object's hand-back (object-lease.ts handBack): the harness's drain, the release.
        await atHandBackPoints(world, press);
        const { tab } = await world.takeBack(following);
        await world.nextInstance();
        await runUntil(world.clock, () => submitted?.done === true, 5_000);
        expect(submitted!.error).toBeUndefined();
        expect(submitted!.value).toBe((await tab.harness.storage.findSubmission(conversationId, point))!.id);
        const notes = (await tab.harness.conversation(conversationId).entries(ctx)).filter((entry) => entry.kind === "app.note");
        expect(notes).toHaveLength(1);
        await tab.harness.close(ctx);
      }),
      { numRuns: 8 },
    );
  }, 60_000);

  it("S12: a conversation's watch asked in the switch waits (the socket asks again) and starts on the next instance's copy (before: rejected at once)", async () => {
    const { world, conversationId, tab } = await inSwitch();
    const { page } = pageOf(world);
    const views: unknown[] = [];
    const watched = settle(page.subscribe("watchConversation", [conversationId], (view) => void views.push(view)));
    const until = world.clock.now() + 5_000;
    await runUntil(world.clock, () => world.clock.now() >= until || watched.done);
    expect(watched.done).toBe(false); // waiting, asked again after each backoff
    await world.nextInstance();
    await runUntil(world.clock, () => watched.done && views.length > 0, 5_000);
    expect(watched.error).toBeUndefined();
    await tab.harness.close(ctx);
  });

  it("S12: POST /rpc in the switch is answered HTTP 503 NotReady with Retry-After: 1 (send it again), a real close's HarnessClosed stays 400", async () => {
    const { world, conversationId, tab } = await inSwitch();
    const refused = await world
      .copyService!.service.submit(conversationId, { ...note, requestId: "rpc" } as never)
      .catch((error: unknown) => error);
    expect(refused).toBeInstanceOf(NotReady);
    const answer = errorAnswer(refused, false);
    expect(answer.status).toBe(503);
    // Review of 0139, L2: an HTTP client is told when to ask again (the switch ends at the instance's next alarm).
    expect(answer.headers.get("Retry-After")).toBe("1");
    expect(await answer.json()).toMatchObject({ error: { name: "NotReady" } });
    expect(errorAnswer(new HarnessClosed(), false).status).toBe(400);
    expect(errorAnswer(new HarnessClosed(), false).headers.get("Retry-After")).toBeNull();
    await tab.harness.close(ctx);
  });

  it("review of 0130, M1: a real close (the app closed the object's service) still ends the page's Send with HarnessClosed, at once, sent once", async () => {
    const world = await comebackWorld({ to: 8, ttlMs: 60_000, copyService: true });
    const conversationId = (await world.tab.harness.root(ctx)).id;
    await world.copyService!.close();
    const { page, sent } = pageOf(world);
    const submitted = settle(page.call("submit", [conversationId, note]));
    await runUntil(world.clock, () => submitted.done);
    expect(submitted.error).toBeInstanceOf(HarnessClosed);
    expect(sent).toHaveLength(1);
    await world.tab.harness.close(ctx);
  });
});
