// @vitest-environment happy-dom
import { useChat } from "@ai-sdk/react";
import { cleanup, fireEvent, render, screen, waitFor } from "@testing-library/react";
import { lastAssistantMessageIsCompleteWithApprovalResponses } from "ai";
import { afterEach, describe, expect, it } from "vitest";
import { defineTool, MemoryStorage } from "../src/index.ts";
import type { DurableChatTransport, DurableUIMessage } from "../src/react/index.ts";
import { answer, callTool, createWorld, openAgent, ScriptedModels } from "./agent-support.ts";
import { transportFor } from "./react-support.ts";

afterEach(cleanup);

/** useChat's documented approval wiring: `sendAutomaticallyWhen` and `addToolApprovalResponse` on the part's approval id. */
function Chat({ transport, initial }: { transport: DurableChatTransport; initial: DurableUIMessage[] }) {
  const { messages, sendMessage, status, error, addToolApprovalResponse } = useChat<DurableUIMessage>({
    id: "chat",
    transport,
    messages: initial,
    resume: true,
    sendAutomaticallyWhen: lastAssistantMessageIsCompleteWithApprovalResponses,
  });
  return (
    <div>
      <button type="button" onClick={() => void sendMessage({ text: "write a.txt" })}>
        send
      </button>
      <span data-testid="status">{status}</span>
      <span data-testid="error">{error?.message}</span>
      <ol>
        {messages.map((message) => (
          <li key={message.id} data-role={message.role}>
            {message.parts.map((part, index) => {
              // biome-ignore lint/suspicious/noArrayIndexKey: a message's parts have no ids and only ever grow at the end
              if (part.type === "text") return <span key={index}>{part.text}</span>;
              if (part.type !== "dynamic-tool") return null;
              return (
                <span key={part.toolCallId} data-testid="tool" data-state={part.state}>
                  {part.toolName}:{part.state}
                  {part.state === "output-available" ? `=${String(part.output)}` : ""}
                  {part.state === "approval-requested" && (
                    <>
                      <button type="button" onClick={() => void addToolApprovalResponse({ id: part.approval.id, approved: true })}>
                        approve
                      </button>
                      <button
                        type="button"
                        onClick={() => void addToolApprovalResponse({ id: part.approval.id, approved: false, reason: "not that file" })}
                      >
                        deny
                      </button>
                    </>
                  )}
                </span>
              );
            })}
          </li>
        ))}
      </ol>
    </div>
  );
}

const lines = () => screen.queryAllByRole("listitem").map((item) => `${item.dataset.role}: ${item.textContent}`);

function writeFile(runs: string[]) {
  return defineTool<{ path: string }>({
    name: "write_file",
    description: "Write a file",
    parameters: { type: "object", properties: { path: { type: "string" } }, required: ["path"] },
    approval: "always",
    execute: ({ path }) => {
      runs.push(path);
      return `wrote ${path}`;
    },
  });
}

describe("useChat's approval flow (needsApproval, approval-requested, addToolApprovalResponse) on DurableChatTransport (DESIGN §4c)", () => {
  it("approved in the tab that asked: the tool runs once and the answer shows", async () => {
    const runs: string[] = [];
    const models = new ScriptedModels([callTool("write_file", { path: "a.txt" }, "call-1"), answer("Written.")]);
    const opened = await openAgent(new MemoryStorage(), { models, world: createWorld(), tools: [writeFile(runs)] });
    const transport = transportFor(opened);
    render(<Chat transport={transport} initial={await transport.loadMessages()} />);
    fireEvent.click(screen.getByText("send"));
    await waitFor(() => expect(screen.getByTestId("tool").dataset.state).toBe("approval-requested"));
    await waitFor(() => expect(screen.getByTestId("status").textContent).toBe("ready"));
    expect(runs).toEqual([]);
    fireEvent.click(screen.getByText("approve"));
    await waitFor(() => expect(lines()).toEqual(["user: write a.txt", "assistant: write_file:output-available=wrote a.txtWritten."]));
    await waitFor(() => expect(screen.getByTestId("status").textContent).toBe("ready"));
    expect(screen.getByTestId("error").textContent).toBe("");
    expect(runs).toEqual(["a.txt"]);
  });

  it("after a reload the pending approval is back on its message as approval-requested; approving it runs the tool once", async () => {
    const runs: string[] = [];
    const models = new ScriptedModels([callTool("write_file", { path: "a.txt" }, "call-1"), answer("Written.")]);
    const opened = await openAgent(new MemoryStorage(), { models, world: createWorld(), tools: [writeFile(runs)] });
    const first = transportFor(opened);
    const view = render(<Chat transport={first} initial={await first.loadMessages()} />);
    fireEvent.click(screen.getByText("send"));
    await waitFor(() => expect(screen.getByTestId("tool").dataset.state).toBe("approval-requested"));
    view.unmount();
    first.close();

    // The reload: a new page, a new transport, the transcript loaded and the run resumed.
    const second = transportFor(opened);
    render(<Chat transport={second} initial={await second.loadMessages()} />);
    expect(lines()).toEqual(["user: write a.txt", "assistant: write_file:approval-requestedapprovedeny"]);
    await waitFor(() => expect(screen.getByTestId("status").textContent).toBe("ready"));
    expect(lines()).toEqual(["user: write a.txt", "assistant: write_file:approval-requestedapprovedeny"]);
    fireEvent.click(screen.getByText("approve"));
    await waitFor(() => expect(lines()).toEqual(["user: write a.txt", "assistant: write_file:output-available=wrote a.txtWritten."]));
    await waitFor(() => expect(screen.getByTestId("status").textContent).toBe("ready"));
    expect(screen.getByTestId("error").textContent).toBe("");
    expect(runs).toEqual(["a.txt"]);
    expect((await second.loadMessages()).map((message) => message.role)).toEqual(["user", "assistant"]);
  });

  it("a denial shows as output-denied and the model's answer to it follows; the tool never runs", async () => {
    const runs: string[] = [];
    const models = new ScriptedModels([callTool("write_file", { path: "a.txt" }, "call-1"), answer("Not written.")]);
    const opened = await openAgent(new MemoryStorage(), { models, world: createWorld(), tools: [writeFile(runs)] });
    const transport = transportFor(opened);
    render(<Chat transport={transport} initial={await transport.loadMessages()} />);
    fireEvent.click(screen.getByText("send"));
    await waitFor(() => expect(screen.getByTestId("tool").dataset.state).toBe("approval-requested"));
    fireEvent.click(screen.getByText("deny"));
    await waitFor(() => expect(lines()).toEqual(["user: write a.txt", "assistant: write_file:output-deniedNot written."]));
    await waitFor(() => expect(screen.getByTestId("status").textContent).toBe("ready"));
    expect(runs).toEqual([]);
  });
});
