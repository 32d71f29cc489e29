import { describe, expect, it } from "vitest";
import {
  type Batch,
  createRegistry,
  defineExtension,
  defineTask,
  defineTool,
  MemoryStorage,
  type Storage,
  StorageQuotaExceeded,
  type TaskRecord,
  type ToolResultEntryPayload,
} from "../src/index.ts";
import { answer, callTool, createWorld, INTERRUPTED, openAgent, ScriptedModels, texts, until } from "./agent-support.ts";
import { ctx, flush, openHarness } from "./support.ts";

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

describe("B9: a refusal the phase retried is not its failure (decision 0049)", () => {
  it("B9/decision 0049: a phase that catches a refused commit and commits again goes on at once, without the storage-failure back-off", async () => {
    const phases: string[] = [];
    let caught = 0;
    const retrying = defineTask<Record<string, never>, { phase: "first" } | { phase: "second" }, string>({
      name: "test.retrying",
      version: 1,
      initial: () => ({ phase: "first" }),
      phases: {
        first: async (_task, runtime, context) => {
          phases.push("first");
          const next = () => ({ status: "running" as const, checkpoint: { phase: "second" as const } });
          try {
            await runtime.commit(next, context);
          } catch (error) {
            if (!(error instanceof StorageQuotaExceeded)) throw error;
            caught++;
            await runtime.commit(next, context); // stored: the refusal before it is no longer this invocation's failure
          }
        },
        second: async (_task, runtime, context) => {
          phases.push("second");
          await runtime.commit(() => ({ status: "terminal", outcome: { status: "completed", result: "done" } }), context);
        },
      },
      abort: async (_task, runtime, context) => runtime.commit(() => ({ status: "terminal", outcome: { status: "aborted" } }), context),
    });
    // The first phase's commit (its checkpoint moving to "second") is refused once; the pass's own commits are not.
    const storage = refusing(
      (batch) =>
        batch.tasks.some(
          (task) => task.kind === "test.retrying" && task.state.status === "running" && task.state.checkpoint.phase === "second",
        ),
      1,
    );
    const registry = createRegistry().install(defineExtension({ name: "test", tasks: [retrying] }));
    const { harness, clock } = await openHarness(storage, { registry });
    const root = await harness.root(ctx);
    const id = await root.commit((tx) => tx.createTask(retrying, {}), ctx);
    const start = clock.now();
    let done: TaskRecord | undefined;
    void harness.waitForTask(id, ctx).then((task) => (done = task));
    // No timer fired: the clock never moves here. The old code kept the caught refusal as the invocation's failure,
    // so the task backed off after its first phase and waited for the clock.
    for (let round = 0; round < 20 && !done; round++) await flush(2);
    expect(storage.refused).toBe(1);
    expect(caught).toBe(1);
    expect(clock.now()).toBe(start);
    expect(phases).toEqual(["first", "second"]);
    expect(done?.state).toMatchObject({ status: "terminal", outcome: { status: "completed", result: "done" } });
    await harness.close(ctx);
  });
});
