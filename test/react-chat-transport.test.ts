import { readUIMessageStream, type UIMessageChunk } from "ai";
import { describe, expect, it } from "vitest";
import { DurableError, defineTool, MemoryStorage } from "../src/index.ts";
import { type DurableChatTransport, type DurableUIMessage, toUIMessages, UnsupportedChatRequest } from "../src/react/index.ts";
import { createManualClock } from "../src/testing/clock.ts";
import { answer, callTool, createWorld, INTERRUPTED, openAgent, ScriptedModels, until, untilAborted } from "./agent-support.ts";
import { transportFor } from "./react-support.ts";
import { ctx } from "./support.ts";

const userMessage = (id: string, text: string): DurableUIMessage => ({ id, role: "user", parts: [{ type: "text", text }] });

function send(transport: DurableChatTransport, messages: DurableUIMessage[]) {
  return transport.sendMessages({ trigger: "submit-message", chatId: "chat", messageId: undefined, messages, abortSignal: undefined });
}

/** Every message state the AI SDK's own assembly builds from the stream; the last is what useChat shows. */
async function assemble(
  stream: ReadableStream<UIMessageChunk>,
  errors: unknown[] = [],
  message?: DurableUIMessage,
): Promise<DurableUIMessage[]> {
  const states: DurableUIMessage[] = [];
  const from = message ? { message: structuredClone(message) } : {};
  for await (const message of readUIMessageStream<DurableUIMessage>({ stream, onError: (error) => errors.push(error), ...from }))
    states.push(structuredClone(message));
  return states;
}

/** What the assembled message must equal: the transcript's conversion, with the fields the SDK leaves undefined. */
function comparable(message: DurableUIMessage): unknown {
  return JSON.parse(JSON.stringify({ id: message.id, role: message.role, parts: message.parts }));
}

async function transcript(transport: DurableChatTransport): Promise<DurableUIMessage[]> {
  return transport.loadMessages();
}

describe("DurableChatTransport", () => {
  it("streams a text answer that the AI SDK assembles into the same message the committed transcript converts to", async () => {
    const models = new ScriptedModels([answer("Hello from the harness")]);
    const opened = await openAgent(new MemoryStorage(), { models, world: createWorld() });
    const transport = transportFor(opened);
    const states = await assemble(await send(transport, [userMessage("m1", "hi")]));
    const final = states.at(-1)!;
    expect(final.parts.filter((part) => part.type === "text")).toEqual([
      expect.objectContaining({ type: "text", text: "Hello from the harness", state: "done" }),
    ]);
    const messages = await transcript(transport);
    expect(messages.map((message) => message.role)).toEqual(["user", "assistant"]);
    expect(messages[0]!.parts).toEqual([{ type: "text", text: "hi" }]);
    expect(comparable(final)).toEqual(comparable(messages[1]!));
  });

  it("a tool call and its result become a dynamic-tool part with its output, then the answer follows in the next step", async () => {
    const lookup = defineTool<{ city: string }>({
      name: "weather",
      description: "The weather",
      parameters: { type: "object", properties: { city: { type: "string" } }, required: ["city"] },
      execute: ({ city }) => `sunny in ${city}`,
    });
    const models = new ScriptedModels([callTool("weather", { city: "Oslo" }, "call-1"), answer("It is sunny.")]);
    const opened = await openAgent(new MemoryStorage(), { models, world: createWorld(), tools: [lookup] });
    const transport = transportFor(opened);
    const final = (await assemble(await send(transport, [userMessage("m1", "weather?")]))).at(-1)!;
    expect(final.parts.map((part) => part.type)).toEqual(["step-start", "dynamic-tool", "step-start", "text"]);
    expect(final.parts[1]).toMatchObject({
      type: "dynamic-tool",
      toolName: "weather",
      toolCallId: "call-1",
      state: "output-available",
      input: { city: "Oslo" },
      output: "sunny in Oslo",
    });
    expect(comparable(final)).toEqual(comparable((await transcript(transport))[1]!));
  });

  it("a retried send of the same message (same id, as after a reload) is not a second input: one user entry, the same answer", async () => {
    const models = new ScriptedModels([answer("only once")]);
    const opened = await openAgent(new MemoryStorage(), { models, world: createWorld() });
    const transport = transportFor(opened);
    const first = await assemble(await send(transport, [userMessage("same-id", "hi")]));
    const again = await assemble(await send(transport, [userMessage("same-id", "hi")]));
    expect(again.at(-1)!.id).toBe(first.at(-1)!.id);
    expect(comparable(again.at(-1)!)).toEqual(comparable(first.at(-1)!));
    expect(models.requests).toHaveLength(1);
    expect((await opened.root.entries(ctx)).filter((entry) => entry.kind === "pi.user")).toHaveLength(1);
  });

  it("S9 after a crash mid-answer: the transcript holds the partial, reconnectToStream replays the run under the same id with the aborted partial, the retry, and the answer", async () => {
    const world = createWorld();
    const first = await openAgent(new MemoryStorage(), { models: new ScriptedModels([{ hang: "Hel" }]), world });
    const firstTransport = transportFor(first);
    const streaming = await send(firstTransport, [userMessage("m1", "say hello")]);
    const reader = streaming.getReader();
    await until(async () => (await first.root.view(ctx)).live.generation?.requestedAt !== undefined, "the request is in flight");
    first.clock.advance(1000);
    await until(async () => (await first.root.view(ctx)).live.generation?.message !== undefined, "the partial is persisted");
    const image = await first.storage.exportImage();
    reader.releaseLock();

    // The reload: a new harness on what the crash left, a new page with a new transport.
    const models = new ScriptedModels([answer("Hello!")]);
    const second = await openAgent(MemoryStorage.fromImage(image), { models, world, clock: createManualClock(first.clock.now()) });
    const transport = transportFor(second);
    const initial = await transport.loadMessages();
    expect(initial.map((message) => message.role)).toEqual(["user", "assistant"]);
    expect(initial[1]!.parts).toContainEqual(expect.objectContaining({ type: "text", text: "Hel" }));

    const resumed = await transport.reconnectToStream({ chatId: "chat" });
    expect(resumed).not.toBeNull();
    const assembling = assemble(resumed!);
    await until(async () => (await second.root.view(ctx)).live.generation?.retry !== undefined, "the retry is scheduled");
    second.clock.advance(2000);
    const states = await assembling;
    const final = states.at(-1)!;
    expect(final.id).toBe(initial[1]!.id);
    expect(states.some((state) => state.parts.some((part) => part.type === "data-retry"))).toBe(true);
    expect(final.parts.filter((part) => part.type === "text").map((part) => (part as { text: string }).text)).toEqual(["Hel", "Hello!"]);
    expect(final.parts).toContainEqual(
      expect.objectContaining({ type: "data-aborted", data: expect.objectContaining({ stopReason: "aborted" }) }),
    );
    // useChat after the next reload: one user message, one assistant message, nothing twice.
    const after = await transport.loadMessages();
    expect(after.map((message) => message.id)).toEqual([initial[0]!.id, initial[1]!.id]);
    expect(comparable(after[1]!)).toEqual(comparable({ ...final, parts: final.parts.filter((part) => part.type !== "data-retry") }));
  });

  it("S8 after a crash mid-tool: the interrupted tool is an output-error part with the harness's notice and a data-tool-notice, and the answer follows", async () => {
    const world = createWorld();
    const slow = (block: boolean) =>
      defineTool<{ text: string }>({
        name: "append",
        description: "Appends",
        parameters: { type: "object", properties: { text: { type: "string" } }, required: ["text"] },
        async execute(_args, api, context) {
          api.output("working\n");
          if (block) await untilAborted(context.abortSignal);
          return "appended";
        },
      });
    const first = await openAgent(new MemoryStorage(), {
      models: new ScriptedModels([callTool("append", { text: "x" }, "call-1")]),
      world,
      tools: [slow(true)],
      settings: { progress: { persistWithinMs: 0 } },
    });
    await send(transportFor(first), [userMessage("m1", "append")]);
    await until(
      async () => (await first.root.view(ctx)).live.tools?.[0]?.output === "working\n",
      "the tool runs and its output is persisted",
    );
    const image = await first.storage.exportImage();

    const models = new ScriptedModels([answer("The append was interrupted.")]);
    const second = await openAgent(MemoryStorage.fromImage(image), {
      models,
      world,
      tools: [slow(false)],
      clock: createManualClock(first.clock.now()),
    });
    const transport = transportFor(second);
    const resumed = await transport.reconnectToStream({ chatId: "chat" });
    const final = (await assemble(resumed!)).at(-1)!;
    const tool = final.parts.find((part) => part.type === "dynamic-tool");
    expect(tool).toMatchObject({ state: "output-error", toolCallId: "call-1", errorText: `working\n\n${INTERRUPTED("append")}` });
    expect(final.parts).toContainEqual({
      type: "data-tool-notice",
      id: "tool-notice-call-1",
      data: { toolCallId: "call-1", toolName: "append", code: "interrupted" },
    });
    expect(final.parts.at(-1)).toMatchObject({ type: "text", text: "The append was interrupted." });
    expect(comparable(final)).toEqual(comparable((await transport.loadMessages())[1]!));
  });

  it("a run that ends without an answer ends the stream with a data-run-failure part and an error chunk", async () => {
    const opened = await openAgent(new MemoryStorage(), { models: new ScriptedModels(), world: createWorld() });
    await opened.root.configure({ model: null }, ctx);
    const errors: unknown[] = [];
    const final = (await assemble(await send(transportFor(opened), [userMessage("m1", "hi")]), errors)).at(-1)!;
    expect(final.parts).toContainEqual(
      expect.objectContaining({ type: "data-run-failure", data: expect.objectContaining({ reason: "no_model" }) }),
    );
    expect(errors).toHaveLength(1);
  });

  it("regenerate and a last message that is not the user's are refused with UnsupportedChatRequest", async () => {
    const opened = await openAgent(new MemoryStorage(), { models: new ScriptedModels(), world: createWorld() });
    const transport = transportFor(opened);
    await expect(
      transport.sendMessages({
        trigger: "regenerate-message",
        chatId: "c",
        messageId: "x",
        messages: [userMessage("m1", "hi")],
        abortSignal: undefined,
      }),
    ).rejects.toBeInstanceOf(UnsupportedChatRequest);
    await expect(send(transport, [{ id: "a", role: "assistant", parts: [] }])).rejects.toThrow(/last message was not from the user/);
    expect(await transport.reconnectToStream({ chatId: "c" })).toBeNull();
  });

  it("R9: a message whose parts hold objects where text belongs ({toString: null} as a file's url or name, an approval's id) is UnsupportedChatRequest or the host's InvalidArguments, never a TypeError; the next message is answered", async () => {
    const models = new ScriptedModels([answer("still here")]);
    const opened = await openAgent(new MemoryStorage(), { models, world: createWorld() });
    const transport = transportFor(opened);
    const hostile = JSON.parse('{"toString": null}') as never;
    /** An assistant message answering an approval (`addToolApprovalResponse`) with `approval`. */
    const responded = (id: string, approval: object) => ({
      id,
      role: "assistant",
      parts: [{ type: "dynamic-tool", toolName: "t", toolCallId: "c", state: "approval-responded", input: {}, approval }],
    });
    const refusals = [
      [{ id: "f1", role: "user", parts: [{ type: "file", url: hostile, mediaType: "image/png" }] }],
      [{ id: "f2", role: "user", parts: [{ type: "file", url: "https://x/y.pdf", mediaType: hostile, filename: hostile }] }],
      [{ id: "t1", role: "user", parts: [{ type: "text", text: hostile }] }],
      [responded("a1", { id: hostile, approved: true })],
      [responded("a2", { id: "approval-7", approved: hostile, reason: hostile })],
    ] as unknown as DurableUIMessage[][];
    for (const messages of refusals) {
      const error = await send(transport, messages).then(
        () => undefined,
        (thrown: Error) => thrown,
      );
      expect(error, JSON.stringify(messages)).toBeInstanceOf(DurableError);
      expect(error!.message).not.toMatch(/Cannot convert|\[object/);
    }
    const final = (await assemble(await send(transport, [userMessage("m1", "hi")]))).at(-1)!;
    expect(final.parts).toContainEqual(expect.objectContaining({ type: "text", text: "still here" }));
  });

  it("toUIMessages turns a transcript into alternating user and assistant messages with stable ids", async () => {
    const models = new ScriptedModels([answer("one"), answer("two")]);
    const opened = await openAgent(new MemoryStorage(), { models, world: createWorld() });
    await (await opened.root.submit({ type: "input", content: "first" }, ctx)).wait(ctx);
    await (await opened.root.submit({ type: "input", content: "second" }, ctx)).wait(ctx);
    const messages = toUIMessages(await opened.root.view(ctx));
    expect(
      messages.map((message) => [
        message.role,
        message.parts.filter((part) => part.type === "text").map((part) => (part as { text: string }).text),
      ]),
    ).toEqual([
      ["user", ["first"]],
      ["assistant", ["one"]],
      ["user", ["second"]],
      ["assistant", ["two"]],
    ]);
    expect(new Set(messages.map((message) => message.id)).size).toBe(4);
    expect(toUIMessages(await opened.root.view(ctx)).map((message) => message.id)).toEqual(messages.map((message) => message.id));
  });
});

describe("DurableChatTransport: a person in the loop (DESIGN §4c)", () => {
  function asking(runs: { count: number }) {
    return defineTool<{ path: string }>({
      name: "write_file",
      description: "Write a file",
      parameters: { type: "object", properties: { path: { type: "string" } }, required: ["path"] },
      approval: "always",
      execute: ({ path }) => {
        runs.count++;
        return `wrote ${path}`;
      },
    });
  }

  /**
   * Reads the stream to its end, which comes at the approval request (as the AI SDK's own stream ends there, so
   * useChat is `ready` and `sendAutomaticallyWhen` sends the response): the message as assembled then.
   */
  async function untilApprovalRequested(stream: ReadableStream<UIMessageChunk>): Promise<DurableUIMessage> {
    const chunks: UIMessageChunk[] = [];
    const [mine, sdk] = stream.tee();
    const reading = (async () => {
      for await (const chunk of mine) chunks.push(chunk);
    })();
    const final = (await assemble(sdk)).at(-1)!;
    await reading;
    expect(chunks.at(-1)).toEqual({ type: "finish", finishReason: "tool-calls" });
    expect(final.parts.some((part) => "state" in part && part.state === "approval-requested")).toBe(true);
    return final;
  }

  /** What `addToolApprovalResponse({ id, approved, reason })` makes of the message. */
  function responded(message: DurableUIMessage, approved: boolean, reason?: string): DurableUIMessage {
    return {
      ...message,
      parts: message.parts.map((part) =>
        part.type === "dynamic-tool" && part.state === "approval-requested"
          ? { ...part, state: "approval-responded", approval: { id: part.approval.id, approved, ...(reason ? { reason } : {}) } }
          : part,
      ),
    } as DurableUIMessage;
  }

  it("§4c: the tool-approval-request chunk, the approval-requested part after a reload, and addToolApprovalResponse reaching the durable decision once", async () => {
    const runs = { count: 0 };
    const models = new ScriptedModels([callTool("write_file", { path: "a.txt" }, "call-1"), answer("Written.")]);
    const opened = await openAgent(new MemoryStorage(), { models, world: createWorld(), tools: [asking(runs)] });
    const transport = transportFor(opened);
    const user = userMessage("m1", "write a.txt");
    const live = await untilApprovalRequested(await send(transport, [user]));
    const [pending] = opened.root.pendingApprovals();
    const tool = live.parts.find((part) => part.type === "dynamic-tool");
    expect(tool).toMatchObject({ state: "approval-requested", toolCallId: "call-1", approval: { id: `approval-${pending!.taskId}` } });

    // After a reload: the transcript has the same part in the same state, on its message.
    const reloaded = await transportFor(opened).loadMessages();
    expect(comparable(reloaded[1]!)).toEqual(comparable(live));
    expect(runs.count).toBe(0);

    // useChat goes on from the message it has: the stream sends what follows it, not the whole answer again.
    const approved = responded(reloaded[1]!, true);
    const final = (await assemble(await send(transport, [user, approved]), [], approved)).at(-1)!;
    expect(final.parts.map((part) => part.type)).toEqual(["step-start", "dynamic-tool", "step-start", "text"]);
    expect(final.parts.find((part) => part.type === "dynamic-tool")).toMatchObject({ state: "output-available", output: "wrote a.txt" });
    expect(final.parts.at(-1)).toMatchObject({ type: "text", text: "Written." });
    expect(runs.count).toBe(1);
    // The same response sent again (another tab, a second click) is refused: decided once.
    await expect(send(transport, [user, responded(reloaded[1]!, false)])).rejects.toMatchObject({ name: "AlreadyDecided" });
  });

  it("§4c: a denial becomes an output-denied part with its reason, live and after a reload; the turn goes on", async () => {
    const runs = { count: 0 };
    const models = new ScriptedModels([callTool("write_file", { path: "a.txt" }, "call-1"), answer("Not written.")]);
    const opened = await openAgent(new MemoryStorage(), { models, world: createWorld(), tools: [asking(runs)] });
    const transport = transportFor(opened);
    const user = userMessage("m1", "write a.txt");
    const live = await untilApprovalRequested(await send(transport, [user]));
    const denied = responded(live, false, "not that file");
    const final = (await assemble(await send(transport, [user, denied]), [], denied)).at(-1)!;
    expect(final.parts.find((part) => part.type === "dynamic-tool")).toMatchObject({ state: "output-denied" });
    const reloaded = (await transportFor(opened).loadMessages())[1]!;
    expect(reloaded.parts.find((part) => part.type === "dynamic-tool")).toMatchObject({
      state: "output-denied",
      approval: { approved: false, reason: "not that file" },
    });
    expect(reloaded.parts.at(-1)).toMatchObject({ type: "text", text: "Not written." });
    expect(runs.count).toBe(0);
  });
});
