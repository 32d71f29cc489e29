import { describe, expect, it } from "vitest";
import { ConversationBusy, defineTool, InvalidSubmission, MemoryStorage, ReadOnlySession, type UserEntryPayload } from "../src/index.ts";
import { createManualClock } from "../src/testing/clock.ts";
import { answer, callTool, createWorld, kinds, openAgent, ScriptedModels, settle, texts, until, untilAborted } from "./agent-support.ts";
import { backends, ctx } from "./support.ts";

/** A tool that waits until the test opens its gate: the run stays busy meanwhile. */
function gateTool() {
  let open: () => void = () => {};
  let started = false;
  const opened = new Promise<void>((resolve) => (open = resolve));
  const tool = defineTool({
    name: "wait",
    description: "Waits for the test",
    parameters: { type: "object", properties: {} },
    async execute(_args, _api, context) {
      started = true;
      await Promise.race([opened, untilAborted(context.abortSignal)]);
      return "waited";
    },
  });
  return { tool, open: () => open(), started: () => started };
}

const userTexts = (entries: Array<{ kind: string; payload: unknown }>) =>
  entries.filter((entry) => entry.kind === "pi.user").map((entry) => texts((entry.payload as UserEntryPayload).message).join(""));

describe("submissions and the busy conversation", () => {
  it("answers an input: done with the answer; the transcript is user, system, assistant", async () => {
    const models = new ScriptedModels([answer("hi there")]);
    const opened = await openAgent(new MemoryStorage(), { models, world: createWorld(), instructions: "Be brief." });
    const submission = await opened.root.submit({ type: "input", content: "hello" }, ctx);
    expect(await submission.wait(ctx)).toMatchObject({ status: "done", answer: { text: "hi there" } });
    expect(kinds(await opened.root.entries(ctx))).toEqual(["pi.user", "pi.system", "pi.assistant"]);
    expect(models.requests[0]!.map((message) => message.role)).toEqual(["system", "user"]);
    expect(models.requests[0]![0]).toMatchObject({ role: "system", sections: { instructions: "Be brief." } });
    expect((await submission.record(ctx)).status).toBe("done");
    expect((await opened.root.view(ctx)).usage.models["faux/faux-1"]?.totalTokens).toBeGreaterThan(0);
  });

  it("a follow-up submitted while busy is answered after the current run", async () => {
    const gate = gateTool();
    const models = new ScriptedModels([callTool("wait", {}, "c1"), answer("first answer"), answer("second answer")]);
    const opened = await openAgent(new MemoryStorage(), { models, world: createWorld(), tools: [gate.tool] });
    const first = await opened.root.submit({ type: "input", content: "first" }, ctx);
    await until(gate.started, "the run is busy");
    const followUp = await opened.root.submit({ type: "input", content: "second" }, ctx);
    expect((await followUp.record(ctx)).status).toBe("queued");
    expect((await opened.root.view(ctx)).inbox.items).toEqual([{ submissionId: followUp.id, mode: "followUp" }]);
    gate.open();
    expect(await first.wait(ctx)).toMatchObject({ status: "done", answer: { text: "first answer" } });
    expect(await followUp.wait(ctx)).toMatchObject({ status: "done", answer: { text: "second answer" } });
    expect(userTexts(await opened.root.entries(ctx))).toEqual(["first", "second"]);
    // The follow-up is not part of the first run's requests.
    expect(models.requests[1]!.filter((message) => message.role === "user")).toHaveLength(1);
    expect((await opened.root.view(ctx)).inbox.items).toEqual([]);
  });

  it("a steer joins the current run after its tool round and is answered with it", async () => {
    const gate = gateTool();
    const models = new ScriptedModels([callTool("wait", {}, "c1"), answer("both answered")]);
    const opened = await openAgent(new MemoryStorage(), { models, world: createWorld(), tools: [gate.tool] });
    const first = await opened.root.submit({ type: "input", content: "first" }, ctx);
    await until(gate.started, "the run is busy");
    const steer = await opened.root.submit({ type: "input", content: "also this", whenBusy: "steer" }, ctx);
    gate.open();
    expect(await first.wait(ctx)).toMatchObject({ status: "done", answer: { text: "both answered" } });
    expect(await steer.wait(ctx)).toMatchObject({ status: "done", answer: { text: "both answered" } });
    expect(models.requests).toHaveLength(2);
    const roles = models.requests[1]!.map((message) => message.role);
    expect(roles).toEqual(["system", "user", "assistant", "toolResult", "user"]);
    expect(texts(models.requests[1]![4]!)).toEqual(["also this"]);
  });

  it("whenBusy reject throws ConversationBusy and writes nothing", async () => {
    const gate = gateTool();
    const models = new ScriptedModels([callTool("wait", {}, "c1"), answer("done")]);
    const opened = await openAgent(new MemoryStorage(), { models, world: createWorld(), tools: [gate.tool] });
    const first = await opened.root.submit({ type: "input", content: "first" }, ctx);
    await until(gate.started, "the run is busy");
    const before = await opened.storage.listSubmissions(opened.root.id);
    await expect(opened.root.submit({ type: "input", content: "now!", whenBusy: "reject" }, ctx)).rejects.toBeInstanceOf(ConversationBusy);
    await expect(opened.root.submit({ type: "input", content: "now!", whenBusy: "reject" }, ctx)).rejects.toMatchObject({
      name: "ConversationBusy",
    });
    expect(await opened.storage.listSubmissions(opened.root.id)).toEqual(before);
    gate.open();
    await first.wait(ctx);
    // Idle again: reject does not apply.
    models.script(answer("idle answer"));
    expect(await (await opened.root.submit({ type: "input", content: "now", whenBusy: "reject" }, ctx)).wait(ctx)).toMatchObject({
      status: "done",
    });
  });

  for (const backend of backends) {
    it(`the same requestId after a reopen does not submit twice (${backend.name})`, async () => {
      const world = createWorld();
      const models = new ScriptedModels([{ hang: "thinking" }]);
      const first = await openAgent(await backend.create(), { models, world });
      const submission = await first.root.submit({ type: "input", content: "once", requestId: "req-1" }, ctx);
      const again = await first.root.submit({ type: "input", content: "once", requestId: "req-1" }, ctx);
      expect(again.id).toBe(submission.id);
      await until(() => models.hanging === 1, "the request is in flight");
      const image = await first.storage.exportImage();

      const second = await openAgent(await backend.fromImage(image), {
        models: new ScriptedModels([answer("answered once")]),
        world,
        clock: createManualClock(first.clock.now()),
      });
      const resubmitted = await second.root.submit({ type: "input", content: "once", requestId: "req-1" }, ctx);
      expect(resubmitted.id).toBe(submission.id);
      // The crash cost one attempt (S9): wait for the backoff sleep, then let it pass.
      await until(async () => (await second.root.view(ctx)).live.generation?.retry !== undefined, "the retry backoff");
      second.clock.advance(2000);
      expect(await resubmitted.wait(ctx)).toMatchObject({ status: "done", answer: { text: "answered once" } });
      expect(userTexts(await second.root.entries(ctx))).toEqual(["once"]);
      expect(await second.storage.listSubmissions(second.root.id)).toHaveLength(1);
      await expect(second.root.submit({ type: "write", entry: { kind: "note" }, requestId: "req-1" }, ctx)).rejects.toBeInstanceOf(
        InvalidSubmission,
      );
    });
  }

  it("a write is appended at once when idle and at the next boundary when busy", async () => {
    const gate = gateTool();
    const models = new ScriptedModels([callTool("wait", {}, "c1"), answer("done")]);
    const opened = await openAgent(new MemoryStorage(), { models, world: createWorld(), tools: [gate.tool] });
    const idle = await opened.root.submit({ type: "write", entry: { kind: "app.note", data: { n: 1 } } }, ctx);
    expect(await idle.wait(ctx)).toMatchObject({ status: "done", entryId: expect.any(Number) });
    const run = await opened.root.submit({ type: "input", content: "go" }, ctx);
    await until(gate.started, "busy");
    const busy = await opened.root.submit({ type: "write", entry: { kind: "app.note", data: { n: 2 } } }, ctx);
    expect((await busy.record(ctx)).status).toBe("queued");
    gate.open();
    await run.wait(ctx);
    expect(await busy.wait(ctx)).toMatchObject({ status: "done" });
    expect(kinds(await opened.root.entries(ctx))).toEqual([
      "app.note",
      "pi.user",
      "pi.system",
      "pi.assistant",
      "pi.tool-result",
      "app.note",
      "pi.assistant",
    ]);
  });

  it("without a model the input is unanswered (no_model) and the failure is shown", async () => {
    const opened = await openAgent(new MemoryStorage(), { models: new ScriptedModels(), world: createWorld() });
    await opened.root.configure({ model: null }, ctx);
    const submission = await opened.root.submit({ type: "input", content: "hello" }, ctx);
    expect(await submission.wait(ctx)).toMatchObject({ status: "unanswered", reason: "no_model" });
    expect((await opened.root.view(ctx)).live.runFailure).toMatchObject({ reason: "no_model" });
  });

  it("a model the harness does not have: unanswered (no_model), the message names the models it has and what to do", async () => {
    const opened = await openAgent(new MemoryStorage(), { models: new ScriptedModels(), world: createWorld() });
    await opened.root.configure({ model: "faux/faux-9" }, ctx);
    const settled = await (await opened.root.submit({ type: "input", content: "hello" }, ctx)).wait(ctx);
    expect(settled).toMatchObject({ status: "unanswered", reason: "no_model" });
    const message = settled.status === "unanswered" ? settled.message : "";
    expect(message).toContain("faux/faux-9 is not in HarnessOptions.models (it has faux/faux-1)");
    expect(message).toContain("Configure the conversation with one it has, or set the provider that has faux/faux-9.");
  });

  it("abort ends the run: the running tool's result is aborted, inputs unanswered (aborted), queued inputs withdrawn", async () => {
    const gate = gateTool();
    const models = new ScriptedModels([callTool("wait", {}, "c1")]);
    const opened = await openAgent(new MemoryStorage(), { models, world: createWorld(), tools: [gate.tool] });
    const first = await opened.root.submit({ type: "input", content: "first" }, ctx);
    await until(gate.started, "busy");
    const queued = await opened.root.submit({ type: "input", content: "later" }, ctx);
    await opened.root.abort(ctx);
    expect(await first.wait(ctx)).toMatchObject({ status: "unanswered", reason: "aborted" });
    expect(await queued.wait(ctx)).toMatchObject({ status: "unanswered", reason: "aborted" });
    const view = await opened.root.view(ctx);
    expect(view.busy).toBe(false);
    const result = view.entries.find((entry) => entry.kind === "pi.tool-result")!;
    expect(texts((result.payload as { message: { content: unknown } }).message)).toEqual([
      "<harness>\n[error] Tool wait was aborted\n</harness>",
    ]);
    models.script(answer("after abort"));
    expect(await (await opened.root.submit({ type: "input", content: "again" }, ctx)).wait(ctx)).toMatchObject({
      status: "done",
      answer: { text: "after abort" },
    });
  });

  it("a read-only harness shows the conversation but rejects submit with ReadOnlySession", async () => {
    const storage = new MemoryStorage();
    const opened = await openAgent(storage, { models: new ScriptedModels([answer("hi")]), world: createWorld() });
    await (await opened.root.submit({ type: "input", content: "hello" }, ctx)).wait(ctx);
    await opened.harness.close(ctx);
    const { Harness, createRegistry } = await import("../src/index.ts");
    const readOnly = await Harness.open(
      MemoryStorage.fromImage(await storage.exportImage(), { readOnly: true }),
      { registry: createRegistry(), readOnly: true },
      ctx,
    );
    const root = await readOnly.root(ctx);
    expect(kinds((await root.view(ctx)).entries)).toEqual(["pi.user", "pi.assistant"]);
    await expect(root.submit({ type: "input", content: "more" }, ctx)).rejects.toBeInstanceOf(ReadOnlySession);
    await settle();
  });

  it("conversations are independent: each created conversation has its own agent, runs and transcript", async () => {
    const gate = gateTool();
    const models = new ScriptedModels([callTool("wait", {}, "c1"), answer("from the other one"), answer("root done")]);
    const opened = await openAgent(new MemoryStorage(), { models, world: createWorld(), tools: [gate.tool] });
    const other = await opened.harness.createConversation({ agent: { model: "faux/faux-1", instructions: "Other." } }, ctx);
    expect(other.id).not.toBe(opened.root.id);
    expect(other.agent()).toEqual({ model: { provider: "faux", id: "faux-1" }, instructions: "Other." });
    const busyRoot = await opened.root.submit({ type: "input", content: "wait" }, ctx);
    await until(gate.started, "the root is busy");
    // The root is busy; the other conversation is not.
    expect(await (await other.submit({ type: "input", content: "hi", whenBusy: "reject" }, ctx)).wait(ctx)).toMatchObject({
      status: "done",
      answer: { text: "from the other one" },
    });
    gate.open();
    expect(await busyRoot.wait(ctx)).toMatchObject({ status: "done", answer: { text: "root done" } });
    expect(kinds(await other.entries(ctx))).toEqual(["pi.user", "pi.system", "pi.assistant"]);
    expect(opened.harness.conversation(other.id).agent().instructions).toBe("Other.");
    await expect(opened.harness.submission(999_999, ctx)).rejects.toMatchObject({ name: "NotFound" });
  });

  it("a faulted generation ends its run: the input is unanswered (faulted) and the next input is answered", async () => {
    const models = new ScriptedModels([answer("works again")]);
    let broken = true;
    const api = models.api;
    const flaky = new Proxy(api, {
      get(target, key, receiver) {
        if (key === "getModel" && broken) {
          return () => {
            throw new Error("model catalog is broken");
          };
        }
        return Reflect.get(target, key, receiver);
      },
    });
    const { Harness, createRegistry } = await import("../src/index.ts");
    const reports: unknown[] = [];
    const harness = await Harness.open(
      new MemoryStorage(),
      { registry: createRegistry(), models: flaky, onReport: (report) => reports.push(report) },
      ctx,
    );
    const root = await harness.root(ctx, { agent: { model: "faux/faux-1" } });
    const submission = await root.submit({ type: "input", content: "hello" }, ctx);
    expect(await submission.wait(ctx)).toMatchObject({ status: "unanswered", reason: "faulted", message: "model catalog is broken" });
    expect(reports).toContainEqual(expect.objectContaining({ kind: "task_faulted", taskKind: "pi.generation", reason: "phase_failed" }));
    await until(async () => !(await root.view(ctx)).busy, "the run is cleaned up");
    expect((await root.view(ctx)).live.runFailure).toMatchObject({ reason: "faulted" });
    broken = false;
    expect(await (await root.submit({ type: "input", content: "again" }, ctx)).wait(ctx)).toMatchObject({
      status: "done",
      answer: { text: "works again" },
    });
    await harness.close(ctx);
  });
});
