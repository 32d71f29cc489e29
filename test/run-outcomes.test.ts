import { describe, expect, it } from "vitest";
import { MemoryStorage, type RunFailureEntryPayload } from "../src/index.ts";
import { answer, createWorld, entriesOf, fauxAssistantMessage, kinds, openAgent, ScriptedModels } from "./agent-support.ts";
import { ctx } from "./support.ts";

const failing = (error: string) => fauxAssistantMessage([], { stopReason: "error", errorMessage: error });

describe("a run that ended without an answer stays so in the transcript (pi.run-failure)", () => {
  it("S9 a non-retryable model error: the entry is committed with the unanswered input, outlives the next run and a reopen, and never reaches the model", async () => {
    const world = createWorld();
    const models = new ScriptedModels([failing("400 invalid request: no such parameter"), answer("Answered.")]);
    const opened = await openAgent(new MemoryStorage(), { models, world });
    const first = await opened.root.submit({ type: "input", content: "first" }, ctx);
    expect(await first.wait(ctx)).toMatchObject({ status: "unanswered", reason: "model_error" });
    const failure = (await entriesOf(opened.root)).find((entry) => entry.kind === "pi.run-failure");
    expect(failure?.payload).toEqual({
      taskId: expect.any(Number),
      reason: "model_error",
      error: "400 invalid request: no such parameter",
      inputs: [first.id],
    } satisfies Record<keyof RunFailureEntryPayload, unknown>);

    const second = await opened.root.submit({ type: "input", content: "second" }, ctx);
    expect(await second.wait(ctx)).toMatchObject({ status: "done" });
    // pi.live.runFailure is cleared by the next run; the entry is not.
    expect((await opened.root.view(ctx)).live.runFailure).toBeUndefined();
    expect(kinds(await entriesOf(opened.root))).toEqual(["pi.user", "pi.assistant", "pi.run-failure", "pi.user", "pi.assistant"]);
    // The second request carries the two inputs and no trace of the failure (the errored answer is not resent either).
    expect(models.requests[1]!.map((message) => message.role)).toEqual(["user", "user"]);

    const reopened = await openAgent(MemoryStorage.fromImage(await opened.storage.exportImage()), { models: new ScriptedModels(), world });
    expect((await entriesOf(reopened.root)).find((entry) => entry.kind === "pi.run-failure")).toEqual(failure);
  });

  it("no model, and an abort: each unanswered run leaves its entry with its reason", async () => {
    const opened = await openAgent(new MemoryStorage(), { models: new ScriptedModels([{ hang: "Hal" }]), world: createWorld() });
    const hanging = await opened.root.submit({ type: "input", content: "wait" }, ctx);
    await opened.root.abort(ctx);
    expect(await hanging.wait(ctx)).toMatchObject({ status: "unanswered", reason: "aborted" });
    await opened.root.configure({ model: null }, ctx);
    const modelless = await opened.root.submit({ type: "input", content: "hello" }, ctx);
    expect(await modelless.wait(ctx)).toMatchObject({ status: "unanswered", reason: "no_model" });
    const failures = (await entriesOf(opened.root)).filter((entry) => entry.kind === "pi.run-failure");
    expect(failures.map((entry) => (entry.payload as unknown as RunFailureEntryPayload).reason)).toEqual(["aborted", "no_model"]);
  });
});
