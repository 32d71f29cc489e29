import fc from "fast-check";
import { describe, expect, it } from "vitest";
import { followObject } from "../src/browser/follow.ts";
import { LeaseBook, type LeaseRecord } from "../src/follow/arbiter.ts";
import { ObjectEnd } from "../src/follow/object-end.ts";
import { encodeFollowMessage } from "../src/follow/wire.ts";
import { createHost } from "../src/host/host.ts";
import type { PageToolImplementation } from "../src/host/page-tools.ts";
import { createRegistry, defineExtension, definePageTool, Harness, type Storage, type ToolResultEntryPayload } from "../src/index.ts";
import { openSqliteStorage } from "../src/storage/sqlite/open-storage.ts";
import { answer, callTool, ScriptedModels, texts, until } from "./agent-support.ts";
import { pageOf, resultsAt, sees, socketTo } from "./page-tools-follow-support.ts";
import { ctx } from "./support.ts";

// Issue 27 item 5, decision 0044: page tools while the object runs the conversation. A tab that follows the object
// (its worker's host, read-only on its copy) watches the object's page calls as they arrive in its copy, and claims,
// answers and releases them at the object over its follow link (topic `page-calls`); after `runHere` its watch moves
// to the harness that runs here, the claim it holds kept.

const askPerson = (replay: "safe" | "unsafe") =>
  definePageTool({
    name: "ask_person",
    description: "Ask the person in the page",
    parameters: { type: "object", properties: { question: { type: "string" } }, required: ["question"] },
    replay,
  });

/** The object runs a turn that calls `ask_person` (it holds the lease from the start); tabs follow it. */
async function objectRuns(replay: "safe" | "unsafe" = "unsafe") {
  const models = new ScriptedModels([callTool("ask_person", { question: "Which colour?" }, "call_1"), answer("thanks")]);
  const registry = () => createRegistry().install(defineExtension({ name: "page", tools: [askPerson(replay)] }));
  let record: LeaseRecord = { epoch: 0, releasedAt: 0 };
  const book = new LeaseBook({ clock: { now: () => Date.now() }, ttlMs: 60_000, load: () => record, save: (next) => void (record = next) });
  const end = await ObjectEnd.start({
    place: "object",
    storage: await openSqliteStorage({ vfs: "memory" }),
    book,
    clock: { now: () => Date.now(), setTimer: (ms, fire) => clearTimeout.bind(null, setTimeout(fire, ms)) },
    open: (storage: Storage, lease) => Harness.open(storage, { registry: registry(), models: models.api, lease, resume: true }, ctx),
  });
  const object = (await end.harness)!;
  const root = await object.root(ctx, { agent: { model: "faux/faux-1" } });
  const submission = await root.submit({ type: "input", content: "ask me", requestId: "q" }, ctx);
  await until(() => root.pendingPageCalls().length === 1, "the call waits for a page at the object");
  const tabStorage = await openSqliteStorage({ vfs: "memory" });
  const sockets: Array<{ close(): void }> = [];
  /** A worker's host on the tab's storage, following the object (one page load). */
  const load = (options: { returnWhenOnline?: boolean; asked?: () => void } = {}) => {
    const follow = followObject({ url: "ws://object/follow", connect: () => socketTo(end, sockets) });
    const host = createHost({
      database: "tab",
      openStorage: async () => tabStorage,
      harness: { registry: registry(), models: models.api, resume: true, lease: follow.lease, serverCalls: follow.serverCalls },
      onReady: (harness) => follow.attach(harness),
      leave: (handedOver) => follow.leave(handedOver),
      takeBack: () => follow.takeBack(),
      pageCallsElsewhere: () => follow.pageCalls,
      now: () => performance.now(),
    });
    // As serveHarness wires the option.
    if (options.returnWhenOnline)
      follow.onFollowing(() => {
        options.asked?.();
        void host.service.runHere().catch(() => {});
      });
    return { follow, host, service: host.service };
  };
  const results = async () =>
    (await root.entriesBefore(Number.MAX_SAFE_INTEGER, 100, ctx)).entries
      .filter((entry) => entry.kind === "pi.tool-result")
      .map((entry) => entry.payload as unknown as ToolResultEntryPayload);
  return { models, end, object, root, submission, load, results, sockets, record: () => record };
}

describe("page tools while the object runs (issue 27 item 5, decision 0044)", () => {
  it("§4c S8: a tab that follows the running object sees its page call, claims and answers it at the object: one run, one result, the turn ends", async () => {
    const world = await objectRuns();
    const tab = world.load();
    await tab.host.ready;
    expect(tab.service.status()).toMatchObject({ kind: "ready", runs: "elsewhere" });
    await sees(tab.service);
    const runs: string[] = [];
    const errors: unknown[] = [];
    const impl: PageToolImplementation = ({ question }) => {
      runs.push(String(question));
      return "green";
    };
    await pageOf(tab.service, "page-1").providePageTools(world.root.id, { ask_person: impl }, { onError: (error) => errors.push(error) });
    expect(await world.submission.wait(ctx)).toMatchObject({ status: "done" });
    expect(errors).toEqual([]);
    expect(runs).toEqual(["Which colour?"]);
    const results = await world.results();
    expect(results).toHaveLength(1);
    expect(texts(results[0]!.message)).toEqual(["green"]);
    expect(JSON.stringify(world.models.requests[1])).toContain("green");
    // The tab's copy has the same one result: it followed the object's commits.
    await expect.poll(async () => (await resultsAt(tab.service, world.root.id)).length).toBe(1);
    await tab.service.close();
    tab.follow.close();
    await world.object.close(ctx);
  });

  it("§4c S8: the tab's follow socket closes while its page runs an unsafe call: the object releases the claim and writes the interrupted result; the tab's late answer commits nothing", async () => {
    const world = await objectRuns("unsafe");
    const tab = world.load();
    await tab.host.ready;
    await sees(tab.service);
    let finish!: (result: string) => void;
    const errors: unknown[] = [];
    await pageOf(tab.service, "page-1").providePageTools(
      world.root.id,
      { ask_person: () => new Promise<string>((resolve) => (finish = resolve)) },
      { onError: (error) => errors.push(error) },
    );
    await until(() => world.root.pendingPageCalls()[0]?.status === "claimed" && finish !== undefined, "the tab's page runs the call");
    for (const socket of world.sockets) socket.close(); // the tab's worker went (a reload)
    expect(await world.submission.wait(ctx)).toMatchObject({ status: "done" });
    const results = await world.results();
    expect(results).toHaveLength(1);
    expect(results[0]!.code).toBe("interrupted");
    finish("green");
    await new Promise((resolve) => setTimeout(resolve, 20));
    expect(await world.results()).toHaveLength(1);
    tab.follow.close();
    await world.object.close(ctx);
  });

  it("§4c S4: runHere while the page runs the call: the lease comes back, the claim is kept and the page's answer is the one result, committed by the tab", async () => {
    const world = await objectRuns("unsafe");
    const tab = world.load();
    await tab.host.ready;
    await sees(tab.service);
    let finish!: (result: string) => void;
    let started = 0;
    await pageOf(tab.service, "page-1").providePageTools(world.root.id, {
      ask_person: () =>
        new Promise<string>((resolve) => {
          started++;
          finish = resolve;
        }),
    });
    await until(() => world.root.pendingPageCalls()[0]?.status === "claimed" && started === 1, "the tab's page runs the call");
    await tab.service.runHere();
    expect(tab.service.status()).toMatchObject({ kind: "ready", runs: "here" });
    // The call waits in the tab's harness now, still claimed by the page: nothing was released or interrupted.
    expect((await tab.service.inspect()).pageCalls).toMatchObject([{ callId: "call_1", status: "claimed" }]);
    finish("green");
    expect(await tab.service.waitForSubmission(world.submission.id)).toMatchObject({ status: "done" });
    const tabResults = await resultsAt(tab.service, world.root.id);
    expect(tabResults).toHaveLength(1);
    expect(texts(tabResults[0]!.message)).toEqual(["green"]);
    expect(started).toBe(1);
    expect(world.record()).toMatchObject({ holder: "tab" });
    await tab.service.close();
    tab.follow.close();
  });

  it("hostile: a page-calls claim without a pageId, an unknown method, a release of a page this connection never claimed for and an answer under no claim change nothing; the call still waits", async () => {
    const world = await objectRuns();
    const replies: string[] = [];
    const connection = {};
    const send = (frame: unknown) =>
      world.end.receive(
        frame,
        (reply) => void replies.push(reply),
        () => true,
        connection,
      );
    const before = JSON.stringify(await world.object.storage.load());
    await send(
      encodeFollowMessage({
        type: "call",
        id: "h1",
        topic: "page-calls",
        method: "claimPageCall",
        args: [world.root.id, "call_1", { claimId: "c" }],
      }),
    );
    await send(encodeFollowMessage({ type: "call", id: "h2", topic: "page-calls", method: "releasePage", args: ["page-of-someone"] }));
    await send(encodeFollowMessage({ type: "call", id: "h3", topic: "page-calls", method: "dropTable", args: [] }));
    await send(
      encodeFollowMessage({
        type: "call",
        id: "h4",
        topic: "page-calls",
        method: "answerPageCall",
        args: [world.root.id, "call_1", "never-claimed", "green"],
      }),
    );
    await until(() => replies.length === 4, "four answers");
    const answers = replies.map((reply) => JSON.parse(reply) as { id: string; error?: { name: string }; value?: unknown });
    expect(answers.find((a) => a.id === "h1")?.error?.name).toBe("FollowMessageRefused");
    expect(answers.find((a) => a.id === "h2")).toMatchObject({ value: null });
    expect(answers.find((a) => a.id === "h3")?.error?.name).toBe("FollowMessageRefused");
    expect(answers.find((a) => a.id === "h4")?.error?.name).toBe("PageClaimLost");
    expect(JSON.stringify(await world.object.storage.load())).toBe(before);
    expect(world.root.pendingPageCalls()).toMatchObject([{ callId: "call_1", status: "waiting" }]);
    await world.object.close(ctx);
  });

  it("property (S8: a refused call changes nothing): random page-calls frames — any method, any arguments — are answered once each with an error or nothing, never a stack; the object's storage is unchanged and the call still waits", async () => {
    const world = await objectRuns();
    const before = JSON.stringify(await world.object.storage.load());
    const replies: string[] = [];
    const connection = {};
    let n = 0;
    const method = fc.oneof(fc.constantFrom("claimPageCall", "answerPageCall", "releasePage"), fc.string({ maxLength: 20 }));
    const values = fc.array(fc.oneof(fc.anything(), fc.constant(world.root.id), fc.constant("call_1")), { maxLength: 5 });
    await fc.assert(
      fc.asyncProperty(method, values, async (name, args) => {
        // A claim of the waiting call that names a page would be a real claim: not hostile, left out.
        fc.pre(!(name === "claimPageCall" && args[0] === world.root.id && args[1] === "call_1"));
        const id = `p${n++}`;
        const seen = replies.length;
        await world.end.receive(
          encodeFollowMessage({ type: "call", id, topic: "page-calls", method: name, args: args as never }),
          (reply) => void replies.push(reply),
          () => true,
          connection,
        );
        await until(() => replies.length === seen + 1, "one answer");
        const reply = JSON.parse(replies[seen]!) as { id: string; error?: { name: string; stack?: unknown }; value?: unknown };
        expect(reply.id).toBe(id);
        if (reply.error) expect(reply.error.stack).toBeUndefined();
        else expect(reply.value ?? null).toBeNull();
      }),
      { numRuns: 80 },
    );
    expect(JSON.stringify(await world.object.storage.load())).toBe(before);
    expect(world.root.pendingPageCalls()).toMatchObject([{ callId: "call_1", status: "waiting" }]);
    await world.object.close(ctx);
  });

  it("returnWhenOnline: a tab that loads while the object runs takes the lease back by itself and runs the page call here, once", async () => {
    const world = await objectRuns("safe");
    const runs: number[] = [];
    const tab = world.load({ returnWhenOnline: true });
    await tab.host.ready;
    await expect.poll(() => tab.service.status(), { timeout: 5_000 }).toMatchObject({ kind: "ready", runs: "here" });
    await sees(tab.service);
    await pageOf(tab.service, "page-1").providePageTools(world.root.id, {
      ask_person: (_args, call) => {
        runs.push(call.attempt);
        return "green";
      },
    });
    await expect.poll(async () => (await resultsAt(tab.service, world.root.id)).length, { timeout: 5_000 }).toBe(1);
    expect(runs).toEqual([1]);
    expect(world.record()).toMatchObject({ holder: "tab" });
    await tab.service.close();
    tab.follow.close();
  });

  it("returnWhenOnline does not bounce a page's own move: after client.leave() the page follows the object and asks nothing back until it runs here", async () => {
    const world = await objectRuns("safe");
    let asked = 0;
    const tab = world.load({ returnWhenOnline: true, asked: () => asked++ });
    await tab.host.ready;
    await expect.poll(() => tab.service.status(), { timeout: 5_000 }).toMatchObject({ kind: "ready", runs: "here" });
    expect(asked).toBe(1);
    const here = tab.service.status() as { epoch?: number };
    await tab.service.leave();
    // The object's takeover (its recovery, the next epoch) reached the tab's copy: the tab followed it, so a follow
    // that fires `onFollowing` had fired before this (Follower: following, then pushes applied).
    await expect
      .poll(() => tab.service.status(), { timeout: 5_000 })
      .toMatchObject({ kind: "ready", runs: "elsewhere", epoch: (here.epoch ?? 0) + 1 });
    expect(world.record()).toMatchObject({ holder: "object" });
    expect(asked).toBe(1);
    await tab.service.runHere();
    expect(tab.service.status()).toMatchObject({ kind: "ready", runs: "here", epoch: (here.epoch ?? 0) + 2 });
    await tab.service.close();
    tab.follow.close();
  });
});
