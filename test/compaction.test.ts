import { describe, expect, it } from "vitest";
import { type CompactionEntryPayload, MemoryStorage } from "../src/index.ts";
import { answer, createWorld, fauxAssistantMessage, openAgent, ScriptedModels, texts } from "./agent-support.ts";
import { ctx } from "./support.ts";

async function twoTurns(models: ScriptedModels) {
  const opened = await openAgent(new MemoryStorage(), { models, world: createWorld() });
  await (await opened.root.submit({ type: "input", content: "first question" }, ctx)).wait(ctx);
  await (await opened.root.submit({ type: "input", content: "second question" }, ctx)).wait(ctx);
  return opened;
}

describe("S10 compaction", () => {
  it("S10 compact() summarizes the older entries into a pi.compaction entry that later requests send instead", async () => {
    const models = new ScriptedModels([
      answer("first answer"),
      answer("second answer"),
      answer("They asked a first question."),
      answer("third answer"),
    ]);
    const opened = await twoTurns(models);
    const taskId = await opened.root.compact({ instructions: "keep questions" }, ctx);
    expect((await opened.root.view(ctx)).live.compactions).toEqual([{ taskId, attempt: 1 }]);
    expect(opened.root.busy).toBe(false);
    const ended = await opened.harness.waitForTask(taskId, ctx);
    expect(ended.state).toMatchObject({ status: "terminal", outcome: { status: "completed", result: { entryId: expect.any(Number) } } });

    const summarizer = models.requests[2]!;
    expect(summarizer.map((message) => message.role)).toEqual(["system", "user"]);
    const transcript = texts(summarizer[1]!).join("");
    expect(transcript).toContain("[User]: first question");
    expect(transcript).toContain("[Assistant]: first answer");
    expect(transcript).not.toContain("second question");
    expect(transcript).toContain("Additional focus: keep questions");

    const entries = await opened.root.entries(ctx);
    const compaction = entries.find((entry) => entry.kind === "pi.compaction")!;
    const secondUser = entries.filter((entry) => entry.kind === "pi.user")[1]!;
    const payload = compaction.payload as unknown as CompactionEntryPayload;
    expect(payload.firstKept).toBe(secondUser.id);
    expect(texts(payload.message).join("")).toContain("<summary>\nThey asked a first question.\n</summary>");
    expect((await opened.root.view(ctx)).live).toEqual({});

    await (await opened.root.submit({ type: "input", content: "third question" }, ctx)).wait(ctx);
    const sent = models.requests[3]!.filter((message) => message.role !== "system").map((message) => texts(message).join(""));
    expect(sent).toEqual([expect.stringContaining("They asked a first question."), "second question", "second answer", "third question"]);
  });

  it("S10 a failed summary writes pi.live.compactionFailure, adds no entry, and the conversation keeps working", async () => {
    const refused = fauxAssistantMessage([], { stopReason: "error", errorMessage: "400 invalid request" });
    const models = new ScriptedModels([answer("a1"), answer("a2"), refused, answer("a3")]);
    const opened = await twoTurns(models);
    const taskId = await opened.root.compact({}, ctx);
    const ended = await opened.harness.waitForTask(taskId, ctx);
    expect(ended.state).toMatchObject({ status: "terminal", outcome: { status: "failed", error: { detail: { reason: "model_error" } } } });
    const view = await opened.root.view(ctx);
    expect(view.live.compactionFailure).toMatchObject({
      taskId,
      reason: "model_error",
      message: "Summarization failed: 400 invalid request",
    });
    expect(view.entries.some((entry) => entry.kind === "pi.compaction")).toBe(false);
    expect(await (await opened.root.submit({ type: "input", content: "go on" }, ctx)).wait(ctx)).toMatchObject({
      status: "done",
      answer: { text: "a3" },
    });
  });

  it("S10 with nothing older than the newest input there is nothing to compact", async () => {
    const models = new ScriptedModels([answer("only answer")]);
    const opened = await openAgent(new MemoryStorage(), { models, world: createWorld() });
    await (await opened.root.submit({ type: "input", content: "only question" }, ctx)).wait(ctx);
    const taskId = await opened.root.compact({}, ctx);
    const ended = await opened.harness.waitForTask(taskId, ctx);
    expect(ended.state).toMatchObject({ status: "terminal", outcome: { status: "completed", result: {} } });
    expect(models.requests).toHaveLength(1);
    expect((await opened.root.view(ctx)).live).toEqual({});
  });
});
