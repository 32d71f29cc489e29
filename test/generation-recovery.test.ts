import { describe, expect, it } from "vitest";
import type { AssistantEntryPayload, Settings } from "../src/index.ts";
import { createManualClock } from "../src/testing/clock.ts";
import {
  type AgentOpened,
  type AgentWorld,
  answer,
  createWorld,
  openAgent,
  ScriptedModels,
  settle,
  tasksOf,
  texts,
  until,
} from "./agent-support.ts";
import { type Backend, backends, ctx } from "./support.ts";

interface Cut {
  backend: Backend;
  world: AgentWorld;
  first: AgentOpened;
  image: Uint8Array;
  submissionId: number;
  generationId: number;
}

/**
 * First process: the model streams `Hel` and hangs; the partial is persisted (the clock passes
 * `persistWithinMs`); then the process is cut (`kill`: image copy, harness abandoned) or closed cleanly.
 */
async function cutDuringRequest(backend: Backend, how: "kill" | "close", settings?: Settings): Promise<Cut> {
  const world = createWorld();
  const models = new ScriptedModels([{ hang: "Hel" }]);
  const first = await openAgent(await backend.create(), { models, world, settings });
  const submission = await first.root.submit({ type: "input", content: "say hello" }, ctx);
  await until(() => models.hanging === 1, "the request is in flight");
  first.clock.advance(settings?.progress?.persistWithinMs ?? 1000);
  await until(
    async () => texts((await first.root.view(ctx)).live.generation?.message ?? { content: [] }).join("") === "Hel",
    "the partial is persisted",
  );
  if (how === "close") await first.harness.close(ctx);
  const image = await first.storage.exportImage();
  const [generation] = await tasksOf(first.storage, "pi.generation");
  return { backend, world, first, image, submissionId: submission.id, generationId: generation!.id };
}

async function reopen(cut: Cut, models: ScriptedModels, settings?: Settings) {
  const second = await openAgent(await cut.backend.fromImage(cut.image), {
    models,
    world: cut.world,
    settings,
    clock: createManualClock(cut.first.clock.now()),
  });
  const submission = await second.harness.submission(cut.submissionId, ctx);
  let outcome: Awaited<ReturnType<typeof submission.wait>> | undefined;
  void submission.wait(ctx).then((value) => (outcome = value));
  return { second, submission, outcome: () => outcome };
}

const assistantTexts = async (opened: AgentOpened) =>
  (await opened.root.entries(ctx))
    .filter((entry) => entry.kind === "pi.assistant")
    .map((entry) => {
      const message = (entry.payload as unknown as AssistantEntryPayload).message;
      return [message.stopReason, texts(message).join("")];
    });

for (const backend of backends) {
  describe(`S9 a crash while a model request is in flight on ${backend.name}`, () => {
    it("S9 the attempt counts as failed: the partial becomes an aborted entry, the retry waits baseDelayMs, then the answer arrives", async () => {
      const cut = await cutDuringRequest(backend, "kill");
      const before = await backend.fromImage(cut.image, { readOnly: true });
      expect((await before.getTask(cut.generationId))!.state).toMatchObject({
        status: "running",
        checkpoint: { phase: "request", attempt: 1 },
      });

      const models = new ScriptedModels([answer("Hello!")]);
      const { second, outcome } = await reopen(cut, models);
      await settle();
      // Not resent at once: the generation sleeps for the backoff.
      expect(models.requests).toHaveLength(0);
      const sleeping = (await second.harness.getTask(cut.generationId, ctx))!;
      expect(sleeping.state).toMatchObject({
        status: "sleeping",
        until: second.clock.now() + 2000,
        checkpoint: { phase: "request", attempt: 2 },
      });
      expect(sleeping.restarts).toBeUndefined();
      const live = (await second.root.view(ctx)).live;
      expect(live.generation).toEqual({
        attempt: 2,
        retry: {
          at: second.clock.now() + 2000,
          error: "Attempt 1 of the model request was cut off while in flight.",
          cause: "interrupted",
          maxAttempts: 4,
        },
      });
      expect(await assistantTexts(second)).toEqual([["aborted", "Hel"]]);

      second.clock.advance(1999);
      await settle();
      expect(models.requests).toHaveLength(0);
      second.clock.advance(1);
      await until(() => outcome() !== undefined, "the answer");
      expect(models.requests).toHaveLength(1);
      expect(outcome()).toMatchObject({ status: "done", answer: { text: "Hello!" } });
      expect(await assistantTexts(second)).toEqual([
        ["aborted", "Hel"],
        ["stop", "Hello!"],
      ]);
      // The aborted partial is kept in the transcript but never sent again.
      expect(models.requests[0]!.filter((message) => message.role === "assistant")).toEqual([]);
      expect(second.reports.filter((report) => report.kind === "task_interrupted")).toEqual([]);
    });

    it("S9 with maxRetries 0: runFailure interrupted, the submission unanswered (interrupted), task_interrupted reported", async () => {
      const settings = { retry: { maxRetries: 0 } };
      const cut = await cutDuringRequest(backend, "kill", settings);
      const models = new ScriptedModels([answer("never sent")]);
      const { second, outcome } = await reopen(cut, models, settings);
      await until(() => outcome() !== undefined, "the submission settles");
      expect(outcome()).toMatchObject({ status: "unanswered", reason: "interrupted" });
      expect(models.requests).toHaveLength(0);
      const view = await second.root.view(ctx);
      expect(view.live.runFailure).toMatchObject({ reason: "interrupted", taskId: cut.generationId });
      expect(view.live.run).toBeUndefined();
      expect(view.busy).toBe(false);
      expect(await assistantTexts(second)).toEqual([["aborted", "Hel"]]);
      expect(second.reports).toContainEqual(
        expect.objectContaining({ kind: "task_interrupted", taskId: cut.generationId, taskKind: "pi.generation", reason: "interrupted" }),
      );
      const ended = (await second.harness.getTask(cut.generationId, ctx))!;
      expect(ended.state).toMatchObject({
        status: "terminal",
        outcome: { status: "failed", error: { detail: { reason: "interrupted" } } },
      });
    });

    it("S9 after a clean close() the request is sent again at once and no failure is counted", async () => {
      const cut = await cutDuringRequest(backend, "close");
      const before = await backend.fromImage(cut.image, { readOnly: true });
      const parked = (await before.getTask(cut.generationId))!;
      expect(parked.state).toMatchObject({ status: "pending", checkpoint: { phase: "request", attempt: 1 } });
      expect(parked.restarts).toBeUndefined();

      const models = new ScriptedModels([answer("Hello!")]);
      const { second, outcome } = await reopen(cut, models);
      await until(() => outcome() !== undefined, "the answer, without moving the clock");
      expect(models.requests).toHaveLength(1);
      expect(outcome()).toMatchObject({ status: "done", answer: { text: "Hello!" } });
      const done = (await second.harness.getTask(cut.generationId, ctx))!;
      expect(done.state).toMatchObject({ status: "terminal", outcome: { status: "completed" } });
      // The partial the close left is kept as an aborted entry; no retry was scheduled.
      expect(await assistantTexts(second)).toEqual([
        ["aborted", "Hel"],
        ["stop", "Hello!"],
      ]);
      expect((await second.root.view(ctx)).live).toEqual({});
    });
  });
}

describe("S6 S9 S10 built-ins at the restart limit", () => {
  const backend = backends[0]!;

  it("S6 S9 generation: runFailure restart_limit, the submission unanswered, task_interrupted; the next input is answered", async () => {
    const settings = { restartLimit: 1 };
    const cut = await cutDuringRequest(backend, "kill", settings);
    const models = new ScriptedModels([answer("fresh answer")]);
    const { second, outcome } = await reopen(cut, models, settings);
    await until(() => outcome() !== undefined, "the submission settles");
    expect(outcome()).toMatchObject({ status: "unanswered", reason: "restart_limit" });
    expect(models.requests).toHaveLength(0);
    expect((await second.root.view(ctx)).live.runFailure).toMatchObject({ reason: "restart_limit" });
    expect(await assistantTexts(second)).toEqual([["aborted", "Hel"]]);
    expect(second.reports).toContainEqual(
      expect.objectContaining({ kind: "task_interrupted", taskKind: "pi.generation", reason: "restart_limit" }),
    );

    const next = await second.root.submit({ type: "input", content: "again" }, ctx);
    expect(await next.wait(ctx)).toMatchObject({ status: "done", answer: { text: "fresh answer" } });
    expect((await second.root.view(ctx)).live.runFailure).toBeUndefined();
  });

  it("S6 S10 compaction: compactionFailure restart_limit, task_interrupted; the conversation keeps working", async () => {
    const settings = { restartLimit: 1 };
    const world = createWorld();
    // The summarizer never answers in the first process: it is cut while summarizing.
    const models = new ScriptedModels([answer("one"), answer("two"), { hang: "Summ" }]);
    const first = await openAgent(await backend.create(), { models, world, settings });
    await (await first.root.submit({ type: "input", content: "first" }, ctx)).wait(ctx);
    await (await first.root.submit({ type: "input", content: "second" }, ctx)).wait(ctx);
    const compactionId = await first.root.compact({}, ctx);
    await until(() => models.hanging === 1, "the summary request is in flight");
    const image = await first.storage.exportImage();

    const second = await openAgent(await backend.fromImage(image), {
      models: new ScriptedModels([answer("three")]),
      world,
      settings,
      clock: createManualClock(first.clock.now()),
    });
    second.harness.resume();
    const ended = await second.harness.waitForTask(compactionId, ctx);
    expect(ended.state).toMatchObject({
      status: "terminal",
      outcome: { status: "failed", error: { detail: { reason: "restart_limit" } } },
    });
    const view = await second.root.view(ctx);
    expect(view.live.compactionFailure).toMatchObject({ taskId: compactionId, reason: "restart_limit" });
    expect(view.live.compactions).toBeUndefined();
    expect(view.entries.some((entry) => entry.kind === "pi.compaction")).toBe(false);
    expect(second.reports).toContainEqual(
      expect.objectContaining({ kind: "task_interrupted", taskId: compactionId, taskKind: "pi.compaction", reason: "restart_limit" }),
    );
    const next = await second.root.submit({ type: "input", content: "third" }, ctx);
    expect(await next.wait(ctx)).toMatchObject({ status: "done", answer: { text: "three" } });
  });
});

describe("S9 named crash point generation:streaming", () => {
  it("S9 a cut right after a partial answer is persisted counts the attempt and keeps the partial as aborted", async () => {
    const backend = backends[0]!;
    const world = createWorld();
    let image: Uint8Array | undefined;
    const storage = await backend.create();
    const first = await openAgent(storage, {
      models: new ScriptedModels([answer("Hello there, friend")]),
      world,
      settings: { progress: { persistWithinMs: 0 } },
      crashPoint: async (point) => {
        if (point !== "generation:streaming" || image) return;
        image = await storage.exportImage();
        await new Promise(() => {});
      },
    });
    const submission = await first.root.submit({ type: "input", content: "greet" }, ctx);
    await until(() => image !== undefined, "the crash point");
    const models = new ScriptedModels([answer("Hi!")]);
    const second = await openAgent(await backend.fromImage(image!), { models, world, clock: createManualClock(first.clock.now()) });
    let outcome: unknown;
    void (await second.harness.submission(submission.id, ctx)).wait(ctx).then((value) => (outcome = value));
    await until(async () => (await second.root.view(ctx)).live.generation?.retry !== undefined, "the retry backoff");
    expect(models.requests).toHaveLength(0);
    second.clock.advance(2000);
    await until(() => outcome !== undefined, "the answer");
    expect(outcome).toMatchObject({ status: "done", answer: { text: "Hi!" } });
    const aborted = await assistantTexts(second);
    expect(aborted[0]![0]).toBe("aborted");
    expect("Hello there, friend".startsWith(aborted[0]![1]!)).toBe(true);
  });
});

describe("S9/B1 abort during a retry backoff", () => {
  it("S9/B1: conversation.abort() while the generation sleeps its retry backoff ends the run now, not when the backoff ends", async () => {
    const cut = await cutDuringRequest(backends[0]!, "kill");
    const models = new ScriptedModels([answer("never sent")]);
    const { second, outcome } = await reopen(cut, models);
    await until(async () => (await second.harness.getTask(cut.generationId, ctx))?.state.status === "sleeping", "the retry backoff");
    const now = second.clock.now();
    await second.root.abort(ctx);
    await until(() => outcome() !== undefined, "the run ended");
    expect(second.clock.now()).toBe(now);
    expect(outcome()).toMatchObject({ status: "unanswered", reason: "aborted" });
    expect(models.requests).toHaveLength(0);
  });
});
