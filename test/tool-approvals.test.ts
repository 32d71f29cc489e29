import { describe, expect, it } from "vitest";
import {
  AlreadyDecided,
  ApprovalMismatch,
  type ApprovalRule,
  ApprovalWithdrawn,
  argumentsHash,
  defineTool,
  type ExecutionEnv,
  NoPendingApproval,
  NotFound,
  type ToolResultEntryPayload,
} from "../src/index.ts";
import { createManualClock } from "../src/testing/clock.ts";
import { type AgentOpened, answer, callTool, createWorld, openAgent, ScriptedModels, settle, texts, until } from "./agent-support.ts";
import { backends, ctx } from "./support.ts";

// DESIGN §4c, S8: a tool call that needs a person waits durably, decided exactly once.

function writeTool(runs: { count: number }, options: { approval?: "always" | "never" | ApprovalRule; expiresAfterMs?: number } = {}) {
  return defineTool<{ path: string; text: string }>({
    name: "write_file",
    description: "Write a file",
    parameters: {
      type: "object",
      properties: { path: { type: "string" }, text: { type: "string" } },
      required: ["path", "text"],
    },
    approval: options.approval ?? "always",
    ...(options.expiresAfterMs !== undefined ? { approvalExpiresAfterMs: options.expiresAfterMs } : {}),
    async execute({ path, text }, api, context) {
      runs.count++;
      const env = await api.env<ExecutionEnv>();
      await env.write(path, text, context);
      return `wrote ${path}`;
    },
  });
}

const ARGS = { path: "a.txt", text: "hello" };

async function pendingTurn(options: { approval?: "always" | ApprovalRule; expiresAfterMs?: number; steps?: number } = {}) {
  const world = createWorld();
  const runs = { count: 0 };
  const models = new ScriptedModels([callTool("write_file", ARGS, "call_1"), answer("done")]);
  const opened = await openAgent(await backends[0]!.create(), { models, world, tools: [writeTool(runs, options)] });
  const submission = await opened.root.submit({ type: "input", content: "write a.txt" }, ctx);
  await until(() => opened.root.pendingApprovals().length === 1 || runs.count > 0, "the call waits for a decision");
  return { world, runs, models, opened, submission };
}

async function resultOf(opened: AgentOpened): Promise<ToolResultEntryPayload> {
  const entry = (await opened.root.entries(ctx)).find((candidate) => candidate.kind === "pi.tool-result");
  return entry!.payload as unknown as ToolResultEntryPayload;
}

describe("approvals (DESIGN §4c, S8)", () => {
  it("S8 §4c: a call that needs a person commits its final arguments asleep without a deadline; nothing of the tool runs", async () => {
    const { runs, models, opened } = await pendingTurn();
    await settle();
    expect(runs.count).toBe(0);
    const [pending] = opened.root.pendingApprovals();
    expect(pending).toMatchObject({ callId: "call_1", toolName: "write_file", arguments: ARGS, argumentsHash: argumentsHash(ARGS) });
    const task = (await opened.harness.getTask(pending!.taskId, ctx))!;
    expect(task.state).toEqual({
      status: "sleeping",
      checkpoint: { phase: "approval", arguments: ARGS, replay: "unsafe" },
      progressed: expect.any(Number),
    });
    // No timer keeps it: however far the clock moves, it still waits, and the model was asked once.
    opened.clock.advance(7 * 24 * 3600 * 1000);
    await settle();
    expect(opened.root.pendingApprovals()).toHaveLength(1);
    expect(models.requests).toHaveLength(1);
    const inspection = await opened.harness.inspect(ctx);
    expect(inspection.approvals).toEqual([{ ...pending, ageMs: 7 * 24 * 3600 * 1000 }]);
    expect(inspection.tasks.find((entry) => entry.record.id === pending!.taskId)?.state).toEqual({ kind: "sleeping" });
    const slot = (await opened.root.view(ctx)).live.tools?.[0];
    expect(slot).toMatchObject({ status: "awaiting-approval", approval: { status: "awaiting", arguments: ARGS } });
  });

  it("§4c: approved, the tool runs once and the turn goes on; a second decision rejects naming the first", async () => {
    const { runs, opened, submission, world } = await pendingTurn();
    const decided = await opened.root.decide("call_1", { approved: true, reason: "looks fine" }, ctx);
    expect(decided).toMatchObject({ status: "approved", by: "person", reason: "looks fine" });
    const outcome = await submission.wait(ctx);
    expect(outcome).toMatchObject({ status: "done", answer: { text: "done" } });
    expect(runs.count).toBe(1);
    expect(world.envs.get(opened.root.id).snapshot()).toEqual({ "a.txt": "hello" });
    const result = await resultOf(opened);
    expect(result.message.isError).toBe(false);
    expect(result.approval).toMatchObject({ approved: true, by: "person", reason: "looks fine" });
    const again = opened.root.decide("call_1", { approved: false }, ctx);
    await expect(again).rejects.toBeInstanceOf(AlreadyDecided);
    await expect(again).rejects.toMatchObject({ decision: { approved: true, by: "person", reason: "looks fine" } });
    expect(runs.count).toBe(1);
  });

  it("§4c: denied, the model gets a result that says so (with the reason) and the turn goes on", async () => {
    const { runs, opened, submission, models } = await pendingTurn();
    const [pending] = opened.root.pendingApprovals();
    await opened.root.decide(pending!.taskId, { approved: false, reason: "not that file" }, ctx);
    expect(await submission.wait(ctx)).toMatchObject({ status: "done", answer: { text: "done" } });
    expect(runs.count).toBe(0);
    const result = await resultOf(opened);
    expect(result.code).toBe("denied");
    expect(texts(result.message).join("")).toContain("Tool write_file was not run: the person denied it (reason: not that file)");
    expect(models.requests).toHaveLength(2);
    expect(models.requests[1]!.at(-1)).toMatchObject({ role: "toolResult", isError: true });
    await expect(opened.root.decide("call_1", { approved: true }, ctx)).rejects.toMatchObject({
      name: "AlreadyDecided",
      decision: { approved: false, reason: "not that file" },
    });
  });

  it("§4c: two decisions at once: exactly one wins, the other is AlreadyDecided", async () => {
    const { runs, opened, submission } = await pendingTurn();
    const results = await Promise.allSettled([
      opened.root.decide("call_1", { approved: true }, ctx),
      opened.root.decide("call_1", { approved: false, reason: "no" }, ctx),
    ]);
    expect(results.map((result) => result.status)).toEqual(["fulfilled", "rejected"]);
    expect((results[1] as PromiseRejectedResult).reason).toBeInstanceOf(AlreadyDecided);
    await submission.wait(ctx);
    expect(runs.count).toBe(1);
  });

  it("§4c: a decision is bound to the call's arguments (ApprovalMismatch); unknown calls are NotFound", async () => {
    const { opened, runs } = await pendingTurn();
    await expect(
      opened.root.decide("call_1", { approved: true, argumentsHash: argumentsHash({ path: "b.txt" }) }, ctx),
    ).rejects.toBeInstanceOf(ApprovalMismatch);
    await expect(opened.root.decide("call_9", { approved: true }, ctx)).rejects.toBeInstanceOf(NotFound);
    await expect(opened.root.decide(999_999, { approved: true }, ctx)).rejects.toBeInstanceOf(NotFound);
    await settle();
    expect(runs.count).toBe(0);
    expect(opened.root.pendingApprovals()).toHaveLength(1);
    await opened.root.decide("call_1", { approved: true, argumentsHash: argumentsHash({ text: "hello", path: "a.txt" }) }, ctx);
    await until(() => runs.count === 1, "the tool ran");
  });

  it("§4c: aborting the conversation withdraws the pending call; a late decision is ApprovalWithdrawn", async () => {
    const { opened, runs, submission } = await pendingTurn();
    await opened.root.abort(ctx);
    expect(await submission.wait(ctx)).toMatchObject({ status: "unanswered", reason: "aborted" });
    expect(opened.root.pendingApprovals()).toEqual([]);
    const result = await resultOf(opened);
    expect(result.code).toBe("aborted");
    await expect(opened.root.decide("call_1", { approved: true }, ctx)).rejects.toBeInstanceOf(ApprovalWithdrawn);
    expect(runs.count).toBe(0);
  });

  it("§4c: one intent, one approval: a follow-up while the call waits asks the model nothing until the decision", async () => {
    const world = createWorld();
    const runs = { count: 0 };
    const models = new ScriptedModels([callTool("write_file", ARGS, "call_1"), answer("done"), answer("second answer")]);
    const opened = await openAgent(await backends[0]!.create(), { models, world, tools: [writeTool(runs)] });
    await opened.root.submit({ type: "input", content: "write a.txt" }, ctx);
    await until(() => opened.root.pendingApprovals().length === 1, "the call waits");
    const followUp = await opened.root.submit({ type: "input", content: "and hurry" }, ctx);
    const steer = await opened.root.submit({ type: "input", content: "really", whenBusy: "steer" }, ctx);
    await settle();
    expect(models.requests).toHaveLength(1);
    expect(opened.root.pendingApprovals()).toHaveLength(1);
    await opened.root.decide("call_1", { approved: true }, ctx);
    expect(await followUp.wait(ctx)).toMatchObject({ status: "done" });
    expect(await steer.wait(ctx)).toMatchObject({ status: "done" });
    expect(runs.count).toBe(1);
    expect(models.requests).toHaveLength(3);
  });

  it("§4c: a rule approves or denies with a reason, or asks; a throwing rule denies (fails closed)", async () => {
    const rule: ApprovalRule = (call) => {
      const path = String(call.arguments.path);
      if (path.startsWith("tmp/")) return { approved: true };
      if (path.startsWith("/etc")) return { approved: false, reason: "system files are off limits" };
      if (path === "boom") throw new Error("rule broke");
      return "user-approval";
    };
    for (const [path, expected] of [
      ["tmp/x", { ran: 1, code: undefined, by: "rule", approved: true }],
      [
        "/etc/passwd",
        { ran: 0, code: "denied", by: "rule", approved: false, text: "its approval rule denied it (reason: system files are off limits)" },
      ],
      ["boom", { ran: 0, code: "denied", by: "rule", approved: false, text: "its approval rule failed: rule broke" }],
    ] as const) {
      const world = createWorld();
      const runs = { count: 0 };
      const models = new ScriptedModels([callTool("write_file", { path, text: "t" }, "call_1"), answer("ok")]);
      const opened = await openAgent(await backends[0]!.create(), { models, world, tools: [writeTool(runs, { approval: rule })] });
      await (await opened.root.submit({ type: "input", content: "go" }, ctx)).wait(ctx);
      const result = await resultOf(opened);
      expect(runs.count).toBe(expected.ran);
      expect(result.code).toBe(expected.code);
      if ("text" in expected) expect(texts(result.message).join("")).toContain(expected.text);
      await expect(opened.root.decide("call_1", { approved: true }, ctx)).rejects.toMatchObject({
        name: "AlreadyDecided",
        decision: { by: expected.by, approved: expected.approved },
      });
    }
    const { opened } = await pendingTurn({ approval: rule });
    expect(opened.root.pendingApprovals()).toHaveLength(1);
  });

  it("§4c: a call of a tool that never asks: a decision is NoPendingApproval", async () => {
    const world = createWorld();
    const runs = { count: 0 };
    const models = new ScriptedModels([callTool("write_file", ARGS, "call_1"), answer("ok")]);
    const opened = await openAgent(await backends[0]!.create(), { models, world, tools: [writeTool(runs, { approval: "never" })] });
    await (await opened.root.submit({ type: "input", content: "go" }, ctx)).wait(ctx);
    const entry = (await opened.root.entries(ctx)).find((candidate) => candidate.kind === "pi.tool-result")!;
    await expect(opened.root.decide(entry.byTaskId!, { approved: true }, ctx)).rejects.toBeInstanceOf(NoPendingApproval);
    await expect(opened.root.decide("call_1", { approved: true }, ctx)).rejects.toBeInstanceOf(NotFound);
  });

  it("§4c: expiry on the harness clock fails closed: denied with reason expired, and a late decision names it", async () => {
    const { opened, runs, submission } = await pendingTurn({ expiresAfterMs: 60_000 });
    const [pending] = opened.root.pendingApprovals();
    expect(pending?.expiresAt).toBe(pending!.requestedAt + 60_000);
    opened.clock.advance(59_999);
    await settle();
    expect(opened.root.pendingApprovals()).toHaveLength(1);
    opened.clock.advance(1);
    await expect(opened.root.decide("call_1", { approved: true }, ctx)).rejects.toMatchObject({
      name: "AlreadyDecided",
      decision: { approved: false, reason: "expired", by: "expiry" },
    });
    expect(await submission.wait(ctx)).toMatchObject({ status: "done" });
    expect(runs.count).toBe(0);
    const result = await resultOf(opened);
    expect(result.code).toBe("denied");
    expect(result.approval).toMatchObject({ approved: false, reason: "expired", by: "expiry" });
    expect(texts(result.message).join("")).toContain("no decision came before its approval expired");
  });

  for (const backend of backends) {
    it(`S4 §4c on ${backend.name}: the wait holds through a crash; the reopened harness takes the decision and runs the tool once`, async () => {
      const world = createWorld();
      const runs = { count: 0 };
      const first = await openAgent(await backend.create(), {
        models: new ScriptedModels([callTool("write_file", ARGS, "call_1")]),
        world,
        tools: [writeTool(runs)],
      });
      const submission = await first.root.submit({ type: "input", content: "write a.txt" }, ctx);
      await until(() => first.root.pendingApprovals().length === 1, "the call waits");
      const image = await first.storage.exportImage(); // the tab reloads here
      const second = await openAgent(await backend.fromImage(image), {
        models: new ScriptedModels([answer("done")]),
        world,
        tools: [writeTool(runs)],
        clock: createManualClock(first.clock.now() + 3_600_000),
      });
      second.harness.resume();
      await settle();
      const [pending] = second.root.pendingApprovals();
      expect(pending).toMatchObject({ callId: "call_1", arguments: ARGS, ageMs: 3_600_000 });
      expect(runs.count).toBe(0);
      await second.root.decide("call_1", { approved: true }, ctx);
      expect(await (await second.harness.submission(submission.id, ctx)).wait(ctx)).toMatchObject({ status: "done" });
      expect(runs.count).toBe(1);
    });

    it(`S8 §4c on ${backend.name}: a crash between the decision's commit and the tool's start runs the tool once`, async () => {
      const world = createWorld();
      const runs = { count: 0 };
      const storage = await backend.create();
      let image: Uint8Array | undefined;
      const first = await openAgent(storage, {
        models: new ScriptedModels([callTool("write_file", ARGS, "call_1")]),
        world,
        tools: [writeTool(runs)],
        crashPoint: async (point) => {
          if (point !== "tool:decided" || image) return;
          image = await storage.exportImage(); // decided, not started: the crash
          await new Promise(() => {});
        },
      });
      const submission = await first.root.submit({ type: "input", content: "write a.txt" }, ctx);
      await until(() => first.root.pendingApprovals().length === 1, "the call waits");
      await first.root.decide("call_1", { approved: true }, ctx);
      await until(() => image !== undefined, "the crash point");
      expect(runs.count).toBe(0);
      const second = await openAgent(await backend.fromImage(image!), {
        models: new ScriptedModels([answer("done")]),
        world,
        tools: [writeTool(runs)],
      });
      await expect(second.root.decide("call_1", { approved: false }, ctx)).rejects.toBeInstanceOf(AlreadyDecided);
      expect(await (await second.harness.submission(submission.id, ctx)).wait(ctx)).toMatchObject({ status: "done" });
      expect(runs.count).toBe(1);
      expect((await resultOf(second)).approval).toMatchObject({ approved: true, by: "person" });
    });
  }
});
