import { describe, expect, it } from "vitest";
import { defineTool, MemoryStorage, type ToolResultEntryPayload } from "../src/index.ts";
import { answer, callTool, callTools, createWorld, openAgent, ScriptedModels, texts, until, untilAborted } from "./agent-support.ts";
import { ctx } from "./support.ts";

function countingTool(name: string, runs: string[], execute?: (args: Record<string, unknown>) => Promise<string> | string) {
  return defineTool<Record<string, unknown>>({
    name,
    description: `Tool ${name}`,
    parameters: { type: "object", properties: { n: { type: "integer" } }, required: ["n"], additionalProperties: false },
    async execute(args) {
      runs.push(`${name}:${JSON.stringify(args)}`);
      return execute ? execute(args) : `${name} ok`;
    },
  });
}

async function results(opened: Awaited<ReturnType<typeof openAgent>>) {
  return (await opened.root.entries(ctx))
    .filter((entry) => entry.kind === "pi.tool-result")
    .map((entry) => entry.payload as unknown as ToolResultEntryPayload);
}

describe("bad tool input", () => {
  it("invalid arguments: an invalid_arguments error result; the tool does not run; the run goes on", async () => {
    const runs: string[] = [];
    const models = new ScriptedModels([callTool("count", { n: "many" }, "c1"), answer("sorry")]);
    const opened = await openAgent(new MemoryStorage(), { models, world: createWorld(), tools: [countingTool("count", runs)] });
    const outcome = await (await opened.root.submit({ type: "input", content: "count" }, ctx)).wait(ctx);
    expect(outcome).toMatchObject({ status: "done", answer: { text: "sorry" } });
    expect(runs).toEqual([]);
    const [result] = await results(opened);
    expect(result!.code).toBe("invalid_arguments");
    expect(result!.message.isError).toBe(true);
    expect(texts(result!.message)[0]).toMatch(/^<harness>\n\[error\] Validation failed for tool "count":[\s\S]*n: expected integer/);
    // pi-ai coerces what it can: "3" becomes 3.
    models.script(callTool("count", { n: "3" }, "c2"), answer("counted"));
    await (await opened.root.submit({ type: "input", content: "count 3" }, ctx)).wait(ctx);
    expect(runs).toEqual(['count:{"n":3}']);
  });

  it("an unknown tool: a tool_unavailable error result", async () => {
    const models = new ScriptedModels([callTool("ghost", {}, "c1"), answer("no ghost")]);
    const opened = await openAgent(new MemoryStorage(), { models, world: createWorld() });
    const outcome = await (await opened.root.submit({ type: "input", content: "boo" }, ctx)).wait(ctx);
    expect(outcome).toMatchObject({ status: "done", answer: { text: "no ghost" } });
    const [result] = await results(opened);
    expect(result!.code).toBe("tool_unavailable");
    expect(texts(result!.message)).toEqual(["<harness>\n[error] Tool ghost is not available\n</harness>"]);
    expect(models.requests[1]!.find((message) => message.role === "toolResult")).toMatchObject({ toolCallId: "c1", isError: true });
  });

  it("a tool that is installed but not offered to this conversation is unavailable too", async () => {
    const runs: string[] = [];
    const models = new ScriptedModels([callTool("count", { n: 1 }, "c1"), answer("ok")]);
    const opened = await openAgent(new MemoryStorage(), {
      models,
      world: createWorld(),
      tools: [countingTool("count", runs), countingTool("other", runs)],
    });
    await opened.root.configure({ tools: ["other"] }, ctx);
    await (await opened.root.submit({ type: "input", content: "count" }, ctx)).wait(ctx);
    expect(runs).toEqual([]);
    expect((await results(opened))[0]!.code).toBe("tool_unavailable");
    expect(models.requests[0]!.find((message) => message.role === "system")).toMatchObject({ toolsAdded: [{ name: "other" }] });
  });

  it("a tool that throws: an error result with its output, the task failed, and the run goes on", async () => {
    const thrower = defineTool({
      name: "boom",
      description: "Throws",
      parameters: { type: "object", properties: {} },
      async execute(_args, api) {
        api.output("partial\n");
        throw new Error("boom");
      },
    });
    const models = new ScriptedModels([callTool("boom", {}, "c1"), answer("recovered")]);
    const opened = await openAgent(new MemoryStorage(), { models, world: createWorld(), tools: [thrower] });
    const outcome = await (await opened.root.submit({ type: "input", content: "go" }, ctx)).wait(ctx);
    expect(outcome).toMatchObject({ status: "done", answer: { text: "recovered" } });
    const [result] = await results(opened);
    expect(result!.code).toBe("tool_error");
    expect(texts(result!.message)).toEqual(["partial\n", "<harness>\n[error] boom\n</harness>"]);
    const [task] = (await opened.storage.listTasks()).filter((candidate) => candidate.kind === "pi.tool");
    expect(task!.state).toMatchObject({ status: "terminal", outcome: { status: "failed", error: { message: "Tool boom threw: boom" } } });
  });

  it("beforeTool may block a call or rewrite its arguments; afterTool may replace the result", async () => {
    const runs: string[] = [];
    const models = new ScriptedModels([
      callTools([
        ["count", { n: 1 }, "c1"],
        ["count", { n: 13 }, "c2"],
      ]),
      answer("done"),
    ]);
    const opened = await openAgent(new MemoryStorage(), {
      models,
      world: createWorld(),
      tools: [countingTool("count", runs)],
      hooks: {
        beforeTool(call) {
          if (call.arguments.n === 13) return { block: "unlucky" };
          return { arguments: { n: (call.arguments.n as number) + 100 } };
        },
        afterTool(_call, result) {
          return { ...result, content: [...result.content, { type: "text", text: "(checked)" }] };
        },
      },
    });
    await (await opened.root.submit({ type: "input", content: "go" }, ctx)).wait(ctx);
    expect(runs).toEqual(['count:{"n":101}']);
    const byCall = Object.fromEntries((await results(opened)).map((result) => [result.message.toolCallId, result]));
    expect(texts(byCall.c1!.message)).toEqual(["count ok", "(checked)"]);
    expect(byCall.c2!.code).toBe("blocked");
    expect(texts(byCall.c2!.message)).toEqual(["<harness>\n[error] Tool call blocked: unlucky\n</harness>"]);
    // Results follow their calls in call order in the next request.
    const sent = models.requests[1]!.filter((message) => message.role === "toolResult").map(
      (message) => (message as { toolCallId: string }).toolCallId,
    );
    expect(sent).toEqual(["c1", "c2"]);
  });

  it("settings.toolExecution sequential: the second call starts only after the first has ended", async () => {
    const order: string[] = [];
    let release: () => void = () => {};
    const slow = defineTool({
      name: "slow",
      description: "Slow",
      parameters: { type: "object", properties: { id: { type: "string" } }, required: ["id"] },
      async execute({ id }, _api, context) {
        order.push(`start ${id}`);
        if (id === "a") await Promise.race([new Promise<void>((resolve) => (release = resolve)), untilAborted(context.abortSignal)]);
        order.push(`end ${id}`);
        return id as string;
      },
    });
    const models = new ScriptedModels([
      callTools([
        ["slow", { id: "a" }, "c1"],
        ["slow", { id: "b" }, "c2"],
      ]),
      answer("done"),
    ]);
    const opened = await openAgent(new MemoryStorage(), {
      models,
      world: createWorld(),
      tools: [slow],
      settings: { toolExecution: "sequential" },
    });
    const submission = await opened.root.submit({ type: "input", content: "go" }, ctx);
    await until(() => order.length === 1, "the first call started");
    const live = (await opened.root.view(ctx)).live;
    expect(live.tools?.map((slot) => [slot.callId, slot.status, slot.taskId === undefined ? "no task yet" : "task"])).toEqual([
      ["c1", "running", "task"],
      ["c2", "pending", "no task yet"],
    ]);
    expect(order).toEqual(["start a"]);
    release();
    await submission.wait(ctx);
    expect(order).toEqual(["start a", "end a", "start b", "end b"]);
  });

  it("parallel (default): every call of a round runs at once", async () => {
    const started: string[] = [];
    let release: () => void = () => {};
    const gate = new Promise<void>((resolve) => (release = resolve));
    const wait = defineTool({
      name: "wait",
      description: "Waits",
      parameters: { type: "object", properties: { id: { type: "string" } }, required: ["id"] },
      async execute({ id }) {
        started.push(id as string);
        await gate;
        return id as string;
      },
    });
    const models = new ScriptedModels([
      callTools([
        ["wait", { id: "a" }, "c1"],
        ["wait", { id: "b" }, "c2"],
        ["wait", { id: "c" }, "c3"],
      ]),
      answer("done"),
    ]);
    const opened = await openAgent(new MemoryStorage(), { models, world: createWorld(), tools: [wait] });
    const submission = await opened.root.submit({ type: "input", content: "go" }, ctx);
    await until(() => started.length === 3, "all three calls run together");
    release();
    expect(await submission.wait(ctx)).toMatchObject({ status: "done" });
  });
});
