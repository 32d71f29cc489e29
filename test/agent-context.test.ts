import type { AssistantMessage, Message } from "@earendil-works/pi-ai";
import { describe, expect, it } from "vitest";
import { resolveAgent } from "../src/agent/agent.ts";
import { planSystemMessage } from "../src/agent/pi-calls.ts";
import { createRegistry, defineExtension, defineTool, deriveContext, type EntryRecord, MISSING_RESULT_TEXT } from "../src/index.ts";

let nextId = 1;
const entry = (kind: string, message: Message, extra: Record<string, unknown> = {}): EntryRecord =>
  ({ id: nextId++, conversationId: 1, kind, payload: { message, ...extra }, at: 0 }) as unknown as EntryRecord;
const user = (text: string) => entry("pi.user", { role: "user", content: text, timestamp: 0 });
const assistant = (content: AssistantMessage["content"], stopReason: AssistantMessage["stopReason"] = "stop") =>
  entry("pi.assistant", {
    role: "assistant",
    content,
    api: "faux",
    provider: "faux",
    model: "faux-1",
    usage: {
      input: 0,
      output: 0,
      cacheRead: 0,
      cacheWrite: 0,
      totalTokens: 0,
      cost: { input: 0, output: 0, cacheRead: 0, cacheWrite: 0, total: 0 },
    },
    stopReason,
    timestamp: 7,
  });
const call = (id: string, name = "t") => ({ type: "toolCall" as const, id, name, arguments: {} });
const result = (id: string, text: string) =>
  entry("pi.tool-result", {
    role: "toolResult",
    toolCallId: id,
    toolName: "t",
    content: [{ type: "text", text }],
    isError: false,
    timestamp: 0,
  });
const summary = (text: string, firstKept: number) =>
  entry("pi.compaction", { role: "user", content: text, timestamp: 0 }, { firstKept, reason: "manual" });
const shape = (messages: Message[]) =>
  messages.map((message) =>
    message.role === "toolResult"
      ? `result ${message.toolCallId}: ${(message.content[0] as { text: string }).text}`
      : message.role === "assistant"
        ? `assistant ${message.content.map((block) => (block.type === "toolCall" ? `call ${block.id}` : block.type === "text" ? block.text : block.type)).join(",")}`
        : `${message.role} ${typeof message.content === "string" ? message.content : ""}`,
  );

describe("context derivation (upstream §5.3)", () => {
  it("results follow their call in call order, a stray result is dropped, a steer stays after the results", () => {
    const entries = [
      user("go"),
      assistant([call("a"), call("b")], "toolUse"),
      result("b", "B"),
      user("steer"),
      result("a", "A"),
      result("zzz", "stray"),
      assistant([{ type: "text", text: "done" }]),
    ];
    expect(shape(deriveContext(entries))).toEqual([
      "user go",
      "assistant call a,call b",
      "result a: A",
      "result b: B",
      "user steer",
      "assistant done",
    ]);
  });

  it("a call without a result gets a synthesized error result (never stored)", () => {
    const entries = [user("go"), assistant([call("a")], "toolUse"), user("next")];
    const messages = deriveContext(entries);
    expect(shape(messages)).toEqual(["user go", "assistant call a", `result a: ${MISSING_RESULT_TEXT}`, "user next"]);
    expect(messages[2]).toMatchObject({ isError: true, timestamp: 7 });
  });

  it("aborted and errored answers are kept in the transcript but not resent", () => {
    const entries = [
      user("go"),
      assistant([{ type: "text", text: "Hel" }], "aborted"),
      assistant([], "error"),
      assistant([{ type: "text", text: "Hello" }]),
    ];
    expect(shape(deriveContext(entries))).toEqual(["user go", "assistant Hello"]);
  });

  it("a cutoff derives exactly the context through that entry", () => {
    const first = user("one");
    const answer = assistant([{ type: "text", text: "1" }]);
    const later = user("two");
    expect(shape(deriveContext([first, answer, later], answer.id))).toEqual(["user one", "assistant 1"]);
  });

  it("a compaction stands in for the entries before its firstKept; earlier prompts collapse into one leading system message", () => {
    const system = entry("pi.system", { role: "system", content: "", sections: { instructions: "Be brief." }, timestamp: 0 });
    const old = [user("old"), assistant([{ type: "text", text: "old answer" }])];
    const kept = user("kept");
    const keptAnswer = assistant([{ type: "text", text: "kept answer" }]);
    const head = summary("SUMMARY", kept.id);
    const messages = deriveContext([system, ...old, kept, keptAnswer, head, user("new")]);
    expect(shape(messages)).toEqual(["system ", "user SUMMARY", "user kept", "assistant kept answer", "user new"]);
    expect(messages[0]).toMatchObject({ sections: { instructions: "Be brief." } });
  });

  it("the first run's prompt leads although its entry follows the input", () => {
    const entries = [user("hi"), entry("pi.system", { role: "system", content: "", sections: { instructions: "x" }, timestamp: 0 })];
    expect(shape(deriveContext(entries))).toEqual(["system ", "user hi"]);
  });
});

describe("agent resolution and the pi.system patch", () => {
  const tool = (name: string) =>
    defineTool({ name, description: name, parameters: { type: "object", properties: {} }, execute: () => "ok" });

  it("extension instructions and tools are part of the prompt; a change is written as a patch", () => {
    const registry = createRegistry().install(
      defineExtension({ name: "notes", tools: [tool("read"), tool("write")], instructions: "Use notes." }),
    );
    const agent = resolveAgent(registry, { instructions: "Be brief." });
    const first = planSystemMessage(undefined, agent, 5)!;
    expect(first).toMatchObject({
      role: "system",
      content: "",
      sections: { "extension:notes": "Use notes.", instructions: "Be brief." },
      timestamp: 5,
    });
    expect(first.toolsAdded?.map((declared) => declared.name)).toEqual(["read", "write"]);
    expect(planSystemMessage(first, agent, 6)).toBeUndefined();
    const narrowed = resolveAgent(registry, { instructions: "Be thorough.", tools: ["read"] });
    expect(planSystemMessage(first, narrowed, 7)).toEqual({
      role: "system",
      content: "",
      sections: { instructions: "Be thorough." },
      toolsRemoved: [{ name: "write" }],
      timestamp: 7,
    });
  });
});
