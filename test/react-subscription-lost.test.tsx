// @vitest-environment happy-dom
import { useChat } from "@ai-sdk/react";
import { act, cleanup, fireEvent, render, screen, waitFor } from "@testing-library/react";
import type { UIMessageChunk } from "ai";
import { Component, type ReactNode, StrictMode } from "react";
import { afterEach, describe, expect, it } from "vitest";
import { NotAuthorized, NotFound } from "../src/errors.ts";
import { ConversationView, type Inspection } from "../src/index.ts";
import type { Unsubscribe } from "../src/react/index.ts";
import { DurableChatTransport, type DurableUIMessage, HarnessProvider, useConversation, useTasks } from "../src/react/index.ts";
import { FakeClient, snapshot } from "./react-fake-client.ts";

// Decision 0114: a subscription the host refuses when the transport asks it again has ended, and its owner is told
// (`lost`). The React hooks throw the host's error into the nearest error boundary, as a failed open does; the chat
// transport ends the answer's stream with an `error` chunk and opens the view anew on its next request. Before, the
// view and the task graph stayed as they were, silently, for good.

afterEach(cleanup);

/** A client whose views and task graph the test can lose (`lose(...)`), as a transport tells a refusal. */
class LosingClient extends FakeClient {
  readonly losers: Array<(error: Error) => void> = [];
  opens = 0;

  override openConversation(conversationId: number): Promise<ConversationView> {
    this.opens++;
    const listeners = this.viewListeners.get(conversationId) ?? new Set();
    this.viewListeners.set(conversationId, listeners);
    return ConversationView.open({
      watch: async (listener, lost) => {
        listeners.add(listener);
        this.losers.push((error) => {
          listeners.delete(listener);
          lost(error);
        });
        return () => void listeners.delete(listener);
      },
      entriesBefore: async () => ({ entries: [], hasOlder: false }),
    });
  }

  override async watchTasks(listener: (inspection: Inspection) => void, lost?: (error: Error) => void): Promise<Unsubscribe> {
    this.taskListeners.add(listener);
    this.losers.push((error) => {
      this.taskListeners.delete(listener);
      lost?.(error);
    });
    return () => void this.taskListeners.delete(listener);
  }

  lose(error: Error): void {
    for (const lose of this.losers.splice(0)) lose(error);
  }
}

class Boundary extends Component<{ children: ReactNode }, { error?: Error }> {
  override state: { error?: Error } = {};
  static getDerivedStateFromError(error: Error) {
    return { error };
  }
  override render() {
    return this.state.error ? <p>{`${this.state.error.name}: ${this.state.error.message}`}</p> : this.props.children;
  }
}

function Entries({ id }: { id: number }) {
  const view = useConversation(id);
  return <p>{view ? "open" : "loading"}</p>;
}

function Tasks() {
  return <p>{`${useTasks().length} tasks`}</p>;
}

describe("a subscription lost after its answer reaches the app (decision 0114)", () => {
  it("0114: useConversation throws the host's refusal into the error boundary when its view is lost (before: it kept showing the view, silently stale)", async () => {
    const client = new LosingClient();
    const page = render(
      <HarnessProvider client={client}>
        <Boundary>
          <Entries id={1} />
        </Boundary>
      </HarnessProvider>,
    );
    await act(async () => client.view(1, snapshot(1)));
    expect(page.container.textContent).toBe("open");
    await act(async () => client.lose(new NotFound("Conversation 1 does not exist.")));
    expect(page.container.textContent).toBe("NotFound: Conversation 1 does not exist.");
    page.unmount();
    expect(client.listenerCount()).toBe(0);
  });

  it("0114: useTasks throws the host's refusal into the error boundary when its task graph subscription is lost", async () => {
    const client = new LosingClient();
    const page = render(
      <HarnessProvider client={client}>
        <Boundary>
          <Tasks />
        </Boundary>
      </HarnessProvider>,
    );
    await act(async () => client.tasks({ tasks: [] } as never as Inspection));
    expect(page.container.textContent).toBe("0 tasks");
    await act(async () => client.lose(new NotAuthorized("watchTasks", "this page may no longer watch the tasks.")));
    expect(page.container.textContent).toMatch(/^NotAuthorized: /);
  });

  it("0114: DurableChatTransport ends the answer's stream with the refusal as an error chunk, and opens the view anew for its next request (before: the stream waited on a view that heard nothing more)", async () => {
    const client = new LosingClient();
    const transport = new DurableChatTransport({ client, conversationId: 1 });
    const sending = transport.sendMessages({
      trigger: "submit-message",
      chatId: "chat",
      messageId: undefined,
      messages: [{ id: "m1", role: "user", parts: [{ type: "text", text: "hello" }] }],
      abortSignal: undefined,
    } as never);
    await act(async () => client.view(1, snapshot(1)));
    const stream = await sending;
    const chunks: UIMessageChunk[] = [];
    const reading = (async () => {
      for await (const chunk of stream as unknown as AsyncIterable<UIMessageChunk>) chunks.push(chunk);
    })();
    client.lose(new NotFound("Conversation 1 does not exist."));
    await reading;
    expect(chunks.at(-1)).toEqual({ type: "error", errorText: "Conversation 1 does not exist." });
    const loading = transport.loadMessages();
    await act(async () => client.view(1, snapshot(1)));
    await loading;
    expect(client.opens).toBe(2);
    transport.close();
  });

  it("0114 after review: through the AI SDK's real useChat, a lost view shows the host's error (status `error`), the next message is sent (a new view, a new submission) and the chat streams again", async () => {
    const client = new LosingClient();
    const transport = new DurableChatTransport({ client, conversationId: 1 });
    function Chat() {
      const { sendMessage, status, error } = useChat<DurableUIMessage>({ id: "chat", transport });
      return (
        <div>
          <button type="button" onClick={() => void sendMessage({ text: "hello" })}>
            send
          </button>
          <span data-testid="status">{status}</span>
          <span data-testid="error">{error?.message ?? ""}</span>
        </div>
      );
    }
    render(<Chat />);
    fireEvent.click(screen.getByText("send"));
    await waitFor(() => expect(client.losers.length).toBe(1));
    await act(async () => client.view(1, snapshot(1)));
    await waitFor(() => expect(client.calls.submit).toHaveLength(1));
    await act(async () => client.lose(new NotFound("Conversation 1 does not exist.")));
    await waitFor(() => expect(screen.getByTestId("status").textContent).toBe("error"));
    expect(screen.getByTestId("error").textContent).toBe("Conversation 1 does not exist.");
    fireEvent.click(screen.getByText("send"));
    await waitFor(() => expect(client.opens).toBe(2));
    await act(async () => client.view(1, snapshot(1)));
    await waitFor(() => expect(client.calls.submit).toHaveLength(2));
    await waitFor(() => expect(screen.getByTestId("status").textContent).toMatch(/^(submitted|streaming)$/));
    expect(screen.getByTestId("error").textContent).toBe("");
    transport.close();
  });

  it("0114 after review: an app's error boundary that resets remounts useConversation, which opens the view anew and shows it (the refusal is not sticky)", async () => {
    const client = new LosingClient();
    let reset!: () => void;
    class Resettable extends Boundary {
      override componentDidMount() {
        reset = () => this.setState({ error: undefined });
      }
    }
    const page = render(
      <HarnessProvider client={client}>
        <Resettable>
          <Entries id={1} />
        </Resettable>
      </HarnessProvider>,
    );
    await act(async () => client.view(1, snapshot(1)));
    await act(async () => client.lose(new NotFound("Conversation 1 does not exist.")));
    expect(page.container.textContent).toBe("NotFound: Conversation 1 does not exist.");
    await act(async () => reset());
    expect(client.opens).toBe(2);
    await act(async () => client.view(1, snapshot(1)));
    expect(page.container.textContent).toBe("open");
    page.unmount();
  });

  it("0114 after review: under StrictMode (effects mounted twice) a lost task subscription reaches the boundary, and after unmount nothing is held", async () => {
    const client = new LosingClient();
    const page = render(
      <StrictMode>
        <HarnessProvider client={client}>
          <Boundary>
            <Tasks />
          </Boundary>
        </HarnessProvider>
      </StrictMode>,
    );
    await act(async () => client.tasks({ tasks: [] } as never as Inspection));
    expect(page.container.textContent).toBe("0 tasks");
    await act(async () => client.lose(new NotAuthorized("watchTasks", "this page may no longer watch the tasks.")));
    expect(page.container.textContent).toMatch(/^NotAuthorized: /);
    page.unmount();
    expect(client.listenerCount()).toBe(0);
  });
});
