import { describe, expect, it } from "vitest";
import {
  conversationScope,
  definePageTool,
  InvalidArguments,
  InvalidInput,
  NotFound,
  PageCallEnded,
  type PageCallRecord,
  PageCallTaken,
  PageClaimLost,
  type ToolResultEntryPayload,
} from "../src/index.ts";
import { createManualClock } from "../src/testing/clock.ts";
import {
  type AgentOpened,
  answer,
  callTool,
  callTools,
  createWorld,
  openAgent,
  ScriptedModels,
  settle,
  texts,
  until,
} from "./agent-support.ts";
import { backends, ctx } from "./support.ts";

// DESIGN §4c, S8, decision 0028: a tool declared here and run by a page waits durably for a page, is claimed
// once, answered once, and a claim cut off by a reload follows the replay policy.

const ask = (replay: "safe" | "unsafe" = "unsafe", approval?: "always") =>
  definePageTool({
    name: "ask_person",
    description: "Ask the person a question in the page",
    parameters: { type: "object", properties: { question: { type: "string" } }, required: ["question"] },
    replay,
    ...(approval ? { approval } : {}),
  });

const ARGS = { question: "Which colour?" };

async function waitingTurn(options: { replay?: "safe" | "unsafe"; approval?: "always"; backend?: number } = {}) {
  const world = createWorld();
  const models = new ScriptedModels([callTool("ask_person", ARGS, "call_1"), answer("thanks")]);
  const storage = await backends[options.backend ?? 0]!.create();
  const opened = await openAgent(storage, { models, world, tools: [ask(options.replay, options.approval)] });
  const submission = await opened.root.submit({ type: "input", content: "ask me" }, ctx);
  if (!options.approval) await until(() => opened.root.pendingPageCalls().length === 1, "the call waits for a page");
  return { world, models, opened, submission };
}

async function resultOf(opened: AgentOpened): Promise<ToolResultEntryPayload> {
  const entry = (await opened.root.entries(ctx)).find((candidate) => candidate.kind === "pi.tool-result");
  return entry!.payload as unknown as ToolResultEntryPayload;
}

async function recordOf(opened: AgentOpened): Promise<PageCallRecord> {
  return (await opened.storage.getDocument(conversationScope(opened.root.id), "pi.page-call:call_1")) as unknown as PageCallRecord;
}

async function reopen(
  opened: AgentOpened,
  replay: "safe" | "unsafe",
  models = new ScriptedModels([answer("thanks")]),
  connectedPages?: string[],
) {
  const image = await opened.storage.exportImage(); // the tab reloads here
  const world = createWorld();
  const next = await openAgent(await backends[0]!.fromImage(image), {
    models,
    world,
    tools: [ask(replay)],
    clock: createManualClock(opened.clock.now() + 60_000),
    ...(connectedPages ? { connectedPages } : {}),
  });
  next.harness.resume();
  return { next, models };
}

describe("page tools (DESIGN §4c, S8, decision 0028)", () => {
  it("§4c: a page tool's call commits its final arguments asleep waiting for a page; no timer keeps it, the model was asked once", async () => {
    const { models, opened } = await waitingTurn();
    const [pending] = opened.root.pendingPageCalls();
    expect(pending).toMatchObject({ callId: "call_1", toolName: "ask_person", arguments: ARGS, status: "waiting", attempts: 0 });
    const task = (await opened.harness.getTask(pending!.taskId, ctx))!;
    expect(task.state).toEqual({
      status: "sleeping",
      checkpoint: { phase: "page", arguments: ARGS, replay: "unsafe" },
      progressed: expect.any(Number),
    });
    opened.clock.advance(7 * 24 * 3600 * 1000);
    await settle();
    expect(opened.root.pendingPageCalls()).toHaveLength(1);
    expect(models.requests).toHaveLength(1);
    expect(opened.harness.nextWake().busy).toBe(false);
    expect((await opened.harness.inspect(ctx)).pageCalls).toEqual([pending]);
    const slot = (await opened.root.view(ctx)).live.tools?.[0];
    expect(slot).toMatchObject({ status: "awaiting-page", page: { status: "waiting", arguments: ARGS } });
  });

  it("§4c: the first claim wins, a second is PageCallTaken, the same claim again is the claim; one result, a second is PageCallEnded", async () => {
    const { opened, submission, models } = await waitingTurn();
    const claimed = await opened.root.claimPageCall("call_1", { claimId: "tab-a:1", pageId: "tab-a" }, ctx);
    expect(claimed).toMatchObject({ callId: "call_1", toolName: "ask_person", arguments: ARGS, claimId: "tab-a:1", attempt: 1 });
    await expect(opened.root.claimPageCall("call_1", { claimId: "tab-b:1", pageId: "tab-b" }, ctx)).rejects.toBeInstanceOf(PageCallTaken);
    expect(await opened.root.claimPageCall("call_1", { claimId: "tab-a:1" }, ctx)).toEqual(claimed);
    expect((await opened.root.view(ctx)).live.tools?.[0]).toMatchObject({ status: "running", page: { status: "claimed" } });
    await expect(opened.root.answerPageCall("call_1", "tab-b:1", "blue", ctx)).rejects.toBeInstanceOf(PageCallTaken);
    await opened.root.answerPageCall("call_1", "tab-a:1", { content: "green", details: { picked: 2 } }, ctx);
    expect(await submission.wait(ctx)).toMatchObject({ status: "done" });
    const result = await resultOf(opened);
    expect(result.code).toBeUndefined();
    expect(result.message).toMatchObject({ isError: false, details: { picked: 2 } });
    expect(texts(result.message)).toEqual(["green"]);
    // The model's second request saw the page's answer as the tool result.
    expect(JSON.stringify(models.requests[1])).toContain("green");
    const second = opened.root.answerPageCall("call_1", "tab-a:1", "red", ctx);
    await expect(second).rejects.toBeInstanceOf(PageCallEnded);
    await expect(second).rejects.toMatchObject({ ended: "result" });
    await expect(opened.root.claimPageCall("call_1", { claimId: "tab-c:1" }, ctx)).rejects.toBeInstanceOf(PageCallEnded);
    expect(await recordOf(opened)).toMatchObject({ status: "done", attempts: 1 });
    expect((await recordOf(opened)).result).toBeUndefined();
    expect((await opened.root.entries(ctx)).filter((entry) => entry.kind === "pi.tool-result")).toHaveLength(1);
  });

  it("R9 §4c: a malformed result is InvalidArguments and an oversized one InvalidInput; nothing is written, the claim still holds", async () => {
    const { opened, submission } = await waitingTurn();
    await opened.root.claimPageCall("call_1", { claimId: "c1" }, ctx);
    const before = await recordOf(opened);
    await expect(opened.root.answerPageCall("call_1", "c1", { content: [{ type: "video" }] } as never, ctx)).rejects.toBeInstanceOf(
      InvalidArguments,
    );
    await expect(opened.root.answerPageCall("call_1", "c1", 5 as never, ctx)).rejects.toBeInstanceOf(InvalidArguments);
    const huge = "x".repeat(9 << 20);
    await expect(opened.root.answerPageCall("call_1", "c1", huge, ctx)).rejects.toBeInstanceOf(InvalidInput);
    expect(await recordOf(opened)).toEqual(before);
    await opened.root.answerPageCall("call_1", "c1", "ok", ctx);
    expect(await submission.wait(ctx)).toMatchObject({ status: "done" });
  });

  it("S8 §4c: a reload while a page runs an unsafe page tool ends the call with an interrupted result; the old claim's result is refused", async () => {
    const { opened } = await waitingTurn({ replay: "unsafe" });
    await opened.root.claimPageCall("call_1", { claimId: "c1", pageId: "tab-a" }, ctx);
    const { next } = await reopen(opened, "unsafe");
    await until(async () => (await next.root.entries(ctx)).some((entry) => entry.kind === "pi.tool-result"), "the interrupted result");
    const result = await resultOf(next);
    expect(result.code).toBe("interrupted");
    expect(texts(result.message).join("")).toContain("was interrupted while a page ran it");
    await expect(next.root.answerPageCall("call_1", "c1", "late", ctx)).rejects.toMatchObject({
      name: "PageCallEnded",
      ended: "interrupted",
    });
    await until(() => !next.root.busy, "the run ends");
    expect(await recordOf(next)).toMatchObject({ status: "interrupted", attempts: 1 });
  });

  it("S8 §4c: an open that names the claiming page still connected (a Durable Object's hibernated socket) keeps its claim: its result is the call's, nothing interrupted; other pages' claims are released", async () => {
    const { opened } = await waitingTurn({ replay: "unsafe" });
    await opened.root.claimPageCall("call_1", { claimId: "c1", pageId: "tab-a" }, ctx);
    const { next } = await reopen(opened, "unsafe", undefined, ["tab-a"]);
    expect(next.root.pendingPageCalls()[0]).toMatchObject({ status: "claimed", attempts: 1 });
    await next.root.answerPageCall("call_1", "c1", "green", ctx);
    await until(() => !next.root.busy, "the run ends");
    expect((await resultOf(next)).code).toBeUndefined();
    expect(texts((await resultOf(next)).message)).toEqual(["green"]);
    expect(await recordOf(next)).toMatchObject({ attempts: 1 });

    const other = await waitingTurn({ replay: "unsafe" });
    await other.opened.root.claimPageCall("call_1", { claimId: "c1", pageId: "tab-a" }, ctx);
    const { next: elsewhere } = await reopen(other.opened, "unsafe", undefined, ["tab-b"]);
    await until(async () => (await elsewhere.root.entries(ctx)).some((entry) => entry.kind === "pi.tool-result"), "the interrupted result");
    expect((await resultOf(elsewhere)).code).toBe("interrupted");
  });

  it("S8 §4c: a reload while a page runs a safe page tool makes it wait again for the next page; the old claim is PageClaimLost", async () => {
    const { opened } = await waitingTurn({ replay: "safe" });
    await opened.root.claimPageCall("call_1", { claimId: "c1", pageId: "tab-a" }, ctx);
    const { next } = await reopen(opened, "safe");
    await until(() => next.root.pendingPageCalls()[0]?.status === "waiting", "the call waits again");
    expect(next.root.pendingPageCalls()[0]).toMatchObject({ attempts: 1, arguments: ARGS });
    await expect(next.root.answerPageCall("call_1", "c1", "late", ctx)).rejects.toBeInstanceOf(PageClaimLost);
    expect(await next.root.claimPageCall("call_1", { claimId: "c2" }, ctx)).toMatchObject({ attempt: 2 });
    await next.root.answerPageCall("call_1", "c2", "green", ctx);
    await until(() => !next.root.busy, "the run ends");
    expect(texts((await resultOf(next)).message)).toEqual(["green"]);
  });

  it("S8 §4c: a reload before any page claimed the call keeps it waiting (nothing ran), for the next page", async () => {
    const { opened } = await waitingTurn({ replay: "unsafe" });
    const { next } = await reopen(opened, "unsafe");
    await settle();
    expect(next.root.pendingPageCalls()).toMatchObject([{ callId: "call_1", status: "waiting", attempts: 0 }]);
    await next.root.claimPageCall("call_1", { claimId: "c1" }, ctx);
    await next.root.answerPageCall("call_1", "c1", "green", ctx);
    await until(() => !next.root.busy, "the run ends");
    expect((await resultOf(next)).code).toBeUndefined();
  });

  it("§4c: the host saw the claiming page go (releasePage): its calls follow their replay policy, other pages' claims stay", async () => {
    const { opened } = await waitingTurn({ replay: "safe" });
    await opened.root.claimPageCall("call_1", { claimId: "c1", pageId: "tab-a" }, ctx);
    expect(await opened.harness.releasePage("tab-b", ctx)).toBe(0);
    expect(opened.root.pendingPageCalls()[0]?.status).toBe("claimed");
    expect(await opened.harness.releasePage("tab-a", ctx)).toBe(1);
    await until(() => opened.root.pendingPageCalls()[0]?.status === "waiting", "the call waits again");
    await expect(opened.root.answerPageCall("call_1", "c1", "late", ctx)).rejects.toBeInstanceOf(PageClaimLost);
  });

  it("S8: a safe page tool cut off at every attempt ends at the restart limit instead of waiting forever", async () => {
    const world = createWorld();
    const models = new ScriptedModels([callTool("ask_person", ARGS, "call_1"), answer("thanks")]);
    const opened = await openAgent(await backends[0]!.create(), { models, world, tools: [ask("safe")], settings: { restartLimit: 2 } });
    await opened.root.submit({ type: "input", content: "ask me" }, ctx);
    for (let attempt = 1; attempt <= 2; attempt++) {
      await until(() => opened.root.pendingPageCalls()[0]?.status === "waiting", "the call waits");
      await opened.root.claimPageCall("call_1", { claimId: `c${attempt}`, pageId: "tab" }, ctx);
      await opened.harness.releasePage("tab", ctx);
    }
    await until(() => !opened.root.busy, "the run ends");
    expect((await resultOf(opened)).code).toBe("restart_limit");
  });

  it("§4c: aborting the conversation withdraws a waiting page call; a claim after it is PageCallEnded (withdrawn)", async () => {
    const { opened, submission } = await waitingTurn();
    await opened.root.abort(ctx);
    expect(await submission.wait(ctx)).toMatchObject({ status: "unanswered", reason: "aborted" });
    expect((await resultOf(opened)).code).toBe("aborted");
    await expect(opened.root.claimPageCall("call_1", { claimId: "c1" }, ctx)).rejects.toMatchObject({
      name: "PageCallEnded",
      ended: "withdrawn",
    });
    expect(opened.root.pendingPageCalls()).toEqual([]);
  });

  it("§4c: a page tool that needs approval waits for the decision first, then for a page", async () => {
    const { opened, submission } = await waitingTurn({ approval: "always" });
    await until(() => opened.root.pendingApprovals().length === 1, "the call waits for a decision");
    expect(opened.root.pendingPageCalls()).toEqual([]);
    await expect(opened.root.claimPageCall("call_1", { claimId: "c1" }, ctx)).rejects.toThrow(/no page tool call/);
    await opened.root.decide("call_1", { approved: true }, ctx);
    await until(() => opened.root.pendingPageCalls().length === 1, "the call waits for a page");
    await opened.root.claimPageCall("call_1", { claimId: "c1" }, ctx);
    await opened.root.answerPageCall("call_1", "c1", "green", ctx);
    expect(await submission.wait(ctx)).toMatchObject({ status: "done" });
    expect((await resultOf(opened)).approval).toMatchObject({ approved: true, by: "person" });
  });

  it("§4c: page-call records stay bounded: the conversation keeps its last 64 ended calls' records; an older one's late result is NotFound", async () => {
    const world = createWorld();
    const calls = Array.from(
      { length: 66 },
      (_, i) => ["ask_person", { question: `q${i}` }, `call_${i}`] as [string, Record<string, unknown>, string],
    );
    const models = new ScriptedModels([callTools(calls), answer("thanks")]);
    const opened = await openAgent(await backends[0]!.create(), { models, world, tools: [ask()] });
    const submission = await opened.root.submit({ type: "input", content: "ask me a lot" }, ctx);
    await until(() => opened.root.pendingPageCalls().length === 66, "every call waits");
    for (const call of opened.root.pendingPageCalls()) {
      await opened.root.claimPageCall(call.callId, { claimId: `c-${call.callId}` }, ctx);
      await opened.root.answerPageCall(call.callId, `c-${call.callId}`, "ok", ctx);
    }
    expect(await submission.wait(ctx)).toMatchObject({ status: "done" });
    const scope = conversationScope(opened.root.id);
    const kept = await Promise.all(calls.map(([, , id]) => opened.storage.getDocument(scope, `pi.page-call:${id}`)));
    expect(kept.filter((record) => record !== undefined)).toHaveLength(64);
    await expect(opened.root.answerPageCall(calls[0]![2], `c-${calls[0]![2]}`, "late", ctx)).rejects.toBeInstanceOf(NotFound);
    await expect(opened.root.answerPageCall(calls[65]![2], `c-${calls[65]![2]}`, "late", ctx)).rejects.toBeInstanceOf(PageCallEnded);
    expect((await opened.root.entries(ctx)).filter((entry) => entry.kind === "pi.tool-result")).toHaveLength(66);
  });

  it("S4 on SQLite: the waiting call, its claim and its result survive the database round trip", async () => {
    const { opened, submission } = await waitingTurn({ backend: 1 });
    await opened.root.claimPageCall("call_1", { claimId: "c1" }, ctx);
    await opened.root.answerPageCall("call_1", "c1", { content: [{ type: "text", text: "green" }], isError: true }, ctx);
    expect(await submission.wait(ctx)).toMatchObject({ status: "done" });
    expect((await resultOf(opened)).message).toMatchObject({ isError: true });
  });
});
