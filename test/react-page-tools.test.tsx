// @vitest-environment happy-dom
import { useChat } from "@ai-sdk/react";
import { act, cleanup, fireEvent, render, renderHook, screen, waitFor } from "@testing-library/react";
import { lastAssistantMessageIsCompleteWithToolCalls } from "ai";
import type { ReactNode } from "react";
import { afterEach, describe, expect, it } from "vitest";
import { definePageTool, MemoryStorage, type ToolResultEntryPayload } from "../src/index.ts";
import { type DurableChatTransport, type DurableUIMessage, HarnessProvider, usePageTool } from "../src/react/index.ts";
import { type AgentOpened, answer, callTool, createWorld, openAgent, ScriptedModels, until } from "./agent-support.ts";
import { transportFor } from "./react-support.ts";
import { ctx } from "./support.ts";

// Decision 0028 in React: page tools through useChat's own client-side tool flow (onToolCall, addToolOutput,
// sendAutomaticallyWhen) and through usePageTool, reaching the durable result once.

afterEach(cleanup);

const askPerson = definePageTool({
  name: "ask_person",
  description: "Ask the person",
  parameters: { type: "object", properties: { question: { type: "string" } }, required: ["question"] },
});

async function opened(): Promise<AgentOpened> {
  const models = new ScriptedModels([callTool("ask_person", { question: "Which colour?" }, "call-1"), answer("Green it is.")]);
  return openAgent(new MemoryStorage(), { models, world: createWorld(), tools: [askPerson] });
}

async function toolResults(agent: AgentOpened): Promise<ToolResultEntryPayload[]> {
  return (await agent.root.entries(ctx))
    .filter((entry) => entry.kind === "pi.tool-result")
    .map((entry) => entry.payload as unknown as ToolResultEntryPayload);
}

/** useChat with the AI SDK's documented client-side tool wiring; the person answers each call with "green". */
function Chat({ transport, initial, calls }: { transport: DurableChatTransport; initial: DurableUIMessage[]; calls: string[] }) {
  const { messages, sendMessage, addToolOutput, status } = useChat<DurableUIMessage>({
    id: "chat",
    transport,
    messages: initial,
    sendAutomaticallyWhen: lastAssistantMessageIsCompleteWithToolCalls,
    onToolCall: ({ toolCall }) => {
      if (toolCall.toolName !== "ask_person") return;
      calls.push(toolCall.toolCallId);
      void addToolOutput({ tool: "ask_person", toolCallId: toolCall.toolCallId, output: "green" } as never);
    },
  });
  return (
    <div>
      <button type="button" onClick={() => void sendMessage({ text: "ask me" })}>
        send
      </button>
      <span data-testid="status">{status}</span>
      <ol>
        {messages.map((message) => (
          <li key={message.id} data-role={message.role}>
            {message.parts
              .map((part) => (part.type === "text" ? part.text : part.type === "dynamic-tool" ? `[${part.toolName} ${part.state}]` : ""))
              .filter(Boolean)
              .join(" ")}
          </li>
        ))}
      </ol>
    </div>
  );
}

const lines = () => screen.queryAllByRole("listitem").map((item) => `${item.dataset.role}: ${item.textContent}`);

describe("page tools in React (decision 0028)", () => {
  it("§4c: useChat's onToolCall runs the page tool once; addToolOutput reaches the durable result; the turn goes on", async () => {
    const agent = await opened();
    const transport = transportFor(agent, { pageTools: ["ask_person"] });
    const calls: string[] = [];
    render(<Chat transport={transport} initial={await transport.loadMessages()} calls={calls} />);
    fireEvent.click(screen.getByText("send"));
    await waitFor(() => expect(lines()).toEqual(["user: ask me", "assistant: [ask_person output-available] Green it is."]));
    await waitFor(() => expect(screen.getByTestId("status").textContent).toBe("ready"));
    expect(calls).toEqual(["call-1"]);
    const results = await toolResults(agent);
    expect(results).toHaveLength(1);
    expect(results[0]!.message.content).toEqual([{ type: "text", text: "green" }]);
    // After a reload the transcript shows the same, and resuming it runs nothing again.
    const reloaded = await transportFor(agent, { pageTools: ["ask_person"] }).loadMessages();
    expect(reloaded[1]!.parts.find((part) => part.type === "dynamic-tool")).toMatchObject({
      state: "output-available",
      output: "green",
      providerExecuted: true,
    });
  });

  it("§4c: of two tabs streaming the same answer, only the one whose claim won gets onToolCall; the other sees the part as run elsewhere", async () => {
    const agent = await opened();
    const a = transportFor(agent, { pageTools: ["ask_person"], pageId: "tab-a" });
    const b = transportFor(agent, { pageTools: ["ask_person"], pageId: "tab-b" });
    const user: DurableUIMessage = { id: "m1", role: "user", parts: [{ type: "text", text: "ask me" }] };
    const streamA = await a.sendMessages({
      trigger: "submit-message",
      chatId: "chat",
      messageId: undefined,
      messages: [user],
      abortSignal: undefined,
    });
    await until(async () => (await agent.harness.inspect(ctx)).pageCalls.length === 1, "the call waits for a page");
    const streamB = (await b.reconnectToStream({ chatId: "chat" }))!;
    const seen = async (stream: ReadableStream) => {
      const chunks: Array<{ type: string; providerExecuted?: boolean }> = [];
      const reader = stream.getReader();
      for (;;) {
        const { done, value } = await reader.read();
        if (done) return chunks;
        chunks.push(value);
        if (value.type === "tool-input-available") {
          void reader.cancel();
          return chunks;
        }
      }
    };
    const [chunksA, chunksB] = await Promise.all([seen(streamA), seen(streamB)]);
    const executed = [chunksA, chunksB].map((chunks) => chunks.find((chunk) => chunk.type === "tool-input-available")?.providerExecuted);
    expect(executed.sort()).toEqual([false, true]);
    expect((await agent.harness.inspect(ctx)).pageCalls).toMatchObject([{ status: "claimed" }]);
  });

  it("§4c: usePageTool without an implementation hands the claimed call to the UI; respond(result) commits it once", async () => {
    const agent = await opened();
    const client = {
      pageId: "tab-a",
      status: { kind: "ready" },
      onStatus: () => () => {},
      providePageTools: (conversationId: number, tools: Record<string, never>) =>
        import("../src/host/page-tools.ts").then(({ providePageTools }) =>
          providePageTools(
            {
              watchPageCalls: async (_id, _page, listener) => {
                const publish = () => listener(agent.root.pendingPageCalls());
                publish();
                return agent.harness.onCommit(() => queueMicrotask(publish));
              },
              claimPageCall: (_id, callId, claim) => agent.root.claimPageCall(callId, claim, ctx),
              answerPageCall: (_id, callId, claimId, result) => agent.root.answerPageCall(callId, claimId, result, ctx),
            },
            "tab-a",
            conversationId,
            tools,
          ),
        ),
    };
    const wrapper = ({ children }: { children: ReactNode }) => <HarnessProvider client={client as never}>{children}</HarnessProvider>;
    const { result } = renderHook(() => usePageTool(agent.root.id, "ask_person"), { wrapper });
    const submission = await agent.root.submit({ type: "input", content: "ask me" }, ctx);
    await waitFor(() => expect(result.current).toHaveLength(1));
    expect(result.current[0]).toMatchObject({ callId: "call-1", arguments: { question: "Which colour?" }, attempt: 1 });
    act(() => {
      result.current[0]!.respond!("green");
      result.current[0]!.respond!("red"); // a second answer is ignored
    });
    expect(await submission.wait(ctx)).toMatchObject({ status: "done" });
    await waitFor(() => expect(result.current).toEqual([]));
    const results = await toolResults(agent);
    expect(results.map((entry) => entry.message.content)).toEqual([[{ type: "text", text: "green" }]]);
  });
});
