import { describe, expect, it } from "vitest";
import { type Batch, defineTool, MemoryStorage, type Storage, StorageQuotaExceeded, type ToolResultEntryPayload } from "../src/index.ts";
import { answer, callTool, createWorld, INTERRUPTED, openAgent, ScriptedModels, texts, until } from "./agent-support.ts";
import { ctx } from "./support.ts";

/** MemoryStorage that refuses (quota) the first `times` batches matching `refuse`, as a full origin would. */
function refusing(refuse: (batch: Batch) => boolean, times = 2): Storage & { refused: number } {
  const storage = new MemoryStorage();
  const wrapped = Object.create(storage) as MemoryStorage & { refused: number };
  wrapped.refused = 0;
  wrapped.apply = async (batch: Batch) => {
    if (wrapped.refused < times && refuse(batch)) {
      wrapped.refused++;
      throw new StorageQuotaExceeded("The origin's storage quota is exhausted.");
    }
    return storage.apply(batch);
  };
  for (const name of [
    "load",
    "getTask",
    "listTasks",
    "getConversation",
    "listConversations",
    "listEntries",
    "getEntry",
    "getDocument",
    "listDocuments",
    "getSubmission",
    "findSubmission",
    "listSubmissions",
    "query",
    "exportImage",
    "close",
  ] as const) {
    (wrapped as any)[name] = (storage as any)[name].bind(storage);
  }
  return wrapped;
}

const hasEntry = (kind: string) => (batch: Batch) => batch.entries.some((entry) => entry.kind === kind);

describe("B9: a refused commit of a result is retried as a commit", () => {
  it("S8/B9: a finished tool result whose commit storage refused is committed later, never turned into 'interrupted'", async () => {
    const runs = { count: 0 };
    const tool = defineTool<{ text: string }>({
      name: "append",
      description: "append",
      parameters: { type: "object", properties: { text: { type: "string" } }, required: ["text"] },
      async execute() {
        runs.count++;
        return "appended";
      },
    });
    const storage = refusing(hasEntry("pi.tool-result"));
    const models = new ScriptedModels([callTool("append", { text: "x" }, "call_1"), answer("done")]);
    const opened = await openAgent(storage, { models, world: createWorld(), tools: [tool] });
    const submission = await opened.root.submit({ type: "input", content: "go" }, ctx);
    let outcome: unknown;
    void submission.wait(ctx).then((o) => (outcome = o));
    await until(
      () => {
        if (outcome === undefined) opened.clock.next();
        return outcome !== undefined;
      },
      "the run ended",
      2000,
    );
    expect(storage.refused).toBe(2);
    expect(runs.count).toBe(1);
    const results = (await opened.root.entries(ctx)).filter((entry) => entry.kind === "pi.tool-result");
    expect(results).toHaveLength(1);
    const message = (results[0]!.payload as unknown as ToolResultEntryPayload).message;
    expect(message.isError).toBe(false);
    expect(texts(message)).toEqual(["appended"]);
    expect(texts(message)).not.toContain(INTERRUPTED("append"));
    expect(outcome).toMatchObject({ status: "done", answer: { text: "done" } });
  });

  it("S9/B9: a final answer whose commit storage refused is committed later; the model request is not sent again", async () => {
    const storage = refusing(hasEntry("pi.assistant"));
    const models = new ScriptedModels([answer("the answer"), answer("a second answer nobody asked for")]);
    const opened = await openAgent(storage, { models, world: createWorld() });
    const submission = await opened.root.submit({ type: "input", content: "ask" }, ctx);
    let outcome: unknown;
    void submission.wait(ctx).then((o) => (outcome = o));
    await until(
      () => {
        if (outcome === undefined) opened.clock.next();
        return outcome !== undefined;
      },
      "the run ended",
      2000,
    );
    expect(storage.refused).toBe(2);
    expect(models.requests).toHaveLength(1);
    expect(outcome).toMatchObject({ status: "done", answer: { text: "the answer" } });
    expect(opened.reports.filter((r) => r.kind === "error")).toHaveLength(2);
  });
});
