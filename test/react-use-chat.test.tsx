// @vitest-environment happy-dom
import { useChat } from "@ai-sdk/react";
import { act, cleanup, fireEvent, render, screen, waitFor } from "@testing-library/react";
import { afterEach, describe, expect, it } from "vitest";
import { MemoryStorage } from "../src/index.ts";
import type { DurableChatTransport, DurableUIMessage } from "../src/react/index.ts";
import { createManualClock } from "../src/testing/clock.ts";
import { answer, createWorld, openAgent, ScriptedModels, until } from "./agent-support.ts";
import { transportFor } from "./react-support.ts";
import { ctx } from "./support.ts";

afterEach(cleanup);

/** A plain useChat UI: one line per message, its parts' text (or type) joined. */
function Chat({ transport, initial }: { transport: DurableChatTransport; initial: DurableUIMessage[] }) {
  const { messages, sendMessage, status } = useChat<DurableUIMessage>({ id: "chat", transport, messages: initial, resume: true });
  return (
    <div>
      <button type="button" onClick={() => void sendMessage({ text: "say hello" })}>
        send
      </button>
      <span data-testid="status">{status}</span>
      <ol>
        {messages.map((message) => (
          <li key={message.id} data-role={message.role}>
            {message.parts
              .map((part) => (part.type === "text" ? part.text : part.type === "step-start" ? "" : `[${part.type}]`))
              .filter(Boolean)
              .join(" ")}
          </li>
        ))}
      </ol>
    </div>
  );
}

const lines = () => screen.queryAllByRole("listitem").map((item) => `${item.dataset.role}: ${item.textContent}`);

describe("useChat (@ai-sdk/react) with DurableChatTransport", () => {
  it("renders the durable answer to a message sent through useChat", async () => {
    const opened = await openAgent(new MemoryStorage(), {
      models: new ScriptedModels([answer("Hello from the harness")]),
      world: createWorld(),
    });
    const transport = transportFor(opened);
    render(<Chat transport={transport} initial={await transport.loadMessages()} />);
    fireEvent.click(screen.getByText("send"));
    await waitFor(() => expect(lines()).toEqual(["user: say hello", "assistant: Hello from the harness"]));
    await waitFor(() => expect(screen.getByTestId("status").textContent).toBe("ready"));
  });

  it("S9 after a reload mid-answer: useChat({ resume: true }) shows the recovered answer under the partial, once, with no duplicate message", async () => {
    const world = createWorld();
    const first = await openAgent(new MemoryStorage(), { models: new ScriptedModels([{ hang: "Hel" }]), world });
    await first.root.submit({ type: "input", content: "say hello", requestId: "m1" }, ctx);
    await until(async () => (await first.root.view(ctx)).live.generation?.requestedAt !== undefined, "the request is in flight");
    first.clock.advance(1000);
    await until(async () => (await first.root.view(ctx)).live.generation?.message !== undefined, "the partial is persisted");
    const image = await first.storage.exportImage();

    const second = await openAgent(MemoryStorage.fromImage(image), {
      models: new ScriptedModels([answer("Hello!")]),
      world,
      clock: createManualClock(first.clock.now()),
    });
    const transport = transportFor(second);
    render(<Chat transport={transport} initial={await transport.loadMessages()} />);
    expect(lines()).toEqual(["user: say hello", "assistant: Hel"]);
    await waitFor(() => expect(lines()).toEqual(["user: say hello", "assistant: Hel [data-aborted] [data-retry]"]));
    await act(async () => second.clock.advance(2000));
    // The retry notice leaves once the retry went ahead: the message reads as it does after a reload.
    await waitFor(() => expect(lines()).toEqual(["user: say hello", "assistant: Hel [data-aborted] Hello!"]));
    await waitFor(() => expect(screen.getByTestId("status").textContent).toBe("ready"));
  });
});
