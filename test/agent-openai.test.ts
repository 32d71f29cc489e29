import { createServer, type IncomingMessage, type Server } from "node:http";
import type { AddressInfo } from "node:net";
import { createModels, createProvider, type Model } from "@earendil-works/pi-ai";
import { openAICompletionsApi } from "@earendil-works/pi-ai/api/openai-completions.lazy";
import { afterAll, beforeAll, describe, expect, it } from "vitest";
import {
  type AssistantEntryPayload,
  createRegistry,
  defineExtension,
  defineTool,
  type ExecutionEnv,
  Harness,
  memoryEnvs,
  type ToolResultEntryPayload,
  type UserEntryPayload,
} from "../src/index.ts";
import { backends, ctx } from "./support.ts";

/**
 * One integration test against a real HTTP endpoint: pi-ai's OpenAI-compatible (chat completions) provider
 * talks to a server on loopback that streams a tool call, then a text answer. Node APIs stay in this file.
 */
const chunk = (delta: object, finish: string | null = null) =>
  `data: ${JSON.stringify({ id: "chatcmpl-1", object: "chat.completion.chunk", created: 1, model: "local-model", choices: [{ index: 0, delta, finish_reason: finish }] })}\n\n`;
const usage = (prompt: number, completion: number) =>
  `data: ${JSON.stringify({ id: "chatcmpl-1", object: "chat.completion.chunk", created: 1, model: "local-model", choices: [], usage: { prompt_tokens: prompt, completion_tokens: completion, total_tokens: prompt + completion } })}\n\n`;

const TURNS = [
  [
    chunk({ role: "assistant", content: "Let me append." }),
    chunk({ tool_calls: [{ index: 0, id: "call_abc", type: "function", function: { name: "append", arguments: "" } }] }),
    chunk({ tool_calls: [{ index: 0, function: { arguments: '{"text":' } }] }),
    chunk({ tool_calls: [{ index: 0, function: { arguments: '"hello\\n"}' } }] }),
    chunk({}, "tool_calls"),
    usage(20, 9),
    "data: [DONE]\n\n",
  ],
  [chunk({ role: "assistant", content: "Appended " }), chunk({ content: "hello." }), chunk({}, "stop"), usage(40, 3), "data: [DONE]\n\n"],
];

let server: Server;
let baseUrl: string;
const bodies: Array<{ messages: Array<Record<string, unknown>>; tools?: unknown[]; model: string; stream: boolean }> = [];
const authorizations: Array<string | undefined> = [];

async function body(request: IncomingMessage): Promise<string> {
  let text = "";
  for await (const part of request) text += part;
  return text;
}

beforeAll(async () => {
  server = createServer(async (request, response) => {
    if (request.method !== "POST" || request.url !== "/v1/chat/completions") {
      response.writeHead(404).end();
      return;
    }
    bodies.push(JSON.parse(await body(request)));
    authorizations.push(request.headers.authorization);
    const turn = TURNS[bodies.length - 1];
    if (!turn) {
      response.writeHead(500, { "content-type": "application/json" }).end(JSON.stringify({ error: { message: "no more turns" } }));
      return;
    }
    response.writeHead(200, { "content-type": "text/event-stream", "cache-control": "no-cache" });
    for (const frame of turn) response.write(frame);
    response.end();
  });
  await new Promise<void>((resolve) => server.listen(0, "127.0.0.1", resolve));
  baseUrl = `http://127.0.0.1:${(server.address() as AddressInfo).port}/v1`;
});

afterAll(async () => {
  await new Promise<void>((resolve) => server.close(() => resolve()));
});

describe("pi-ai OpenAI-compatible provider against a local streaming server", () => {
  it("a tool-calling run produces durable user, system, assistant, tool-result and assistant entries", async () => {
    const model: Model<"openai-completions"> = {
      id: "local-model",
      name: "Local Model",
      api: "openai-completions",
      provider: "local",
      baseUrl,
      reasoning: false,
      input: ["text"],
      cost: { input: 0, output: 0, cacheRead: 0, cacheWrite: 0 },
      contextWindow: 32768,
      maxTokens: 4096,
      compat: { supportsDeveloperRole: false, supportsReasoningEffort: false },
    };
    const models = createModels();
    models.setProvider(
      createProvider({
        id: "local",
        auth: { apiKey: { name: "Local", resolve: async () => ({ auth: { apiKey: "sk-local" } }) } },
        models: [model],
        api: openAICompletionsApi(),
      }),
    );
    const append = defineTool<{ text: string }>({
      name: "append",
      description: "Append text to notes.txt",
      parameters: { type: "object", properties: { text: { type: "string" } }, required: ["text"] },
      async execute({ text }, api, context) {
        await (await api.env<ExecutionEnv>()).append("notes.txt", text, context);
        return "appended";
      },
    });
    const envs = memoryEnvs();
    const storage = await backends[backends.length - 1]!.create();
    const registry = createRegistry().install(defineExtension({ name: "notes", tools: [append] }));
    const harness = await Harness.open(storage, { registry, models, env: (id) => envs(id) }, ctx);
    const root = await harness.root(ctx, { agent: { model, instructions: "Be brief." } });

    const outcome = await (await root.submit({ type: "input", content: "append hello" }, ctx)).wait(ctx);
    expect(outcome).toMatchObject({ status: "done", answer: { text: "Appended hello." } });
    expect(envs.get(root.id).snapshot()).toEqual({ "notes.txt": "hello\n" });

    const entries = await root.entries(ctx);
    expect(entries.map((entry) => entry.kind)).toEqual(["pi.user", "pi.system", "pi.assistant", "pi.tool-result", "pi.assistant"]);
    const [user, , call, result, final] = entries;
    expect((user!.payload as unknown as UserEntryPayload).message).toMatchObject({ role: "user", content: "append hello" });
    expect((call!.payload as unknown as AssistantEntryPayload).message).toMatchObject({
      role: "assistant",
      provider: "local",
      model: "local-model",
      stopReason: "toolUse",
      responseId: "chatcmpl-1",
      content: [
        { type: "text", text: "Let me append." },
        { type: "toolCall", id: "call_abc", name: "append", arguments: { text: "hello\n" } },
      ],
      usage: { input: 20, output: 9, totalTokens: 29 },
    });
    expect((result!.payload as unknown as ToolResultEntryPayload).message).toMatchObject({
      role: "toolResult",
      toolCallId: "call_abc",
      toolName: "append",
      isError: false,
      content: [{ type: "text", text: "appended" }],
    });
    expect((final!.payload as unknown as AssistantEntryPayload).message).toMatchObject({
      stopReason: "stop",
      content: [{ type: "text", text: "Appended hello." }],
    });
    expect((await root.view(ctx)).usage.models["local/local-model"]).toMatchObject({ input: 60, output: 12, totalTokens: 72 });

    // What went over the wire: the system prompt leads, then the transcript; turn 2 replays the call and its result.
    expect(bodies).toHaveLength(2);
    expect(authorizations).toEqual(["Bearer sk-local", "Bearer sk-local"]);
    expect(bodies[0]).toMatchObject({ model: "local-model", stream: true, tools: [{ type: "function", function: { name: "append" } }] });
    expect(bodies[0]!.messages).toEqual([
      { role: "system", content: "Be brief." },
      { role: "user", content: "append hello" },
    ]);
    const second = bodies[1]!.messages;
    const assistant = second.find((message) => message.role === "assistant")!;
    expect(assistant.tool_calls).toEqual([
      { id: "call_abc", type: "function", function: { name: "append", arguments: '{"text":"hello\\n"}' } },
    ]);
    expect(second.find((message) => message.role === "tool")).toMatchObject({ tool_call_id: "call_abc", content: "appended" });
    await harness.close(ctx);
  });
});
