import { useChat } from "@ai-sdk/react";
import { lastAssistantMessageIsCompleteWithApprovalResponses } from "ai";
import { DurableChatTransport, type DurableUIMessage, useHarnessClient, useHarnessStatus, useTasks } from "pi-durable-web/react";
import { useEffect, useMemo, useRef, useState } from "react";

export function App() {
  const { status, requestTakeover } = useHarnessStatus();
  const client = useHarnessClient();
  const [conversationId, setConversationId] = useState<number>();
  useEffect(() => {
    if (status.kind === "ready" && client) void client.rootConversation({ model: "offline/demo" }).then(setConversationId);
  }, [status.kind, client]);
  return (
    <main>
      <h1>react-chat</h1>
      <p data-testid="status">{status.kind}</p>
      {status.kind === "waiting-for-lock" && (
        <button type="button" onClick={() => void requestTakeover()}>
          Open here instead
        </button>
      )}
      {conversationId !== undefined && <DurableChat conversationId={conversationId} />}
      <TaskList />
    </main>
  );
}

function DurableChat({ conversationId }: { conversationId: number }) {
  const client = useHarnessClient()!;
  const transport = useMemo(() => new DurableChatTransport({ client, conversationId }), [client, conversationId]);
  const [initial, setInitial] = useState<DurableUIMessage[]>();
  useEffect(() => void transport.loadMessages().then(setInitial), [transport]);
  return initial ? <Chat transport={transport} initial={initial} /> : <p>loading the transcript…</p>;
}

function Chat({ transport, initial }: { transport: DurableChatTransport; initial: DurableUIMessage[] }) {
  const { messages, sendMessage, status, error, setMessages, addToolApprovalResponse } = useChat<DurableUIMessage>({
    id: `conversation-${transport.conversationId}`,
    transport,
    messages: initial,
    resume: true,
    // The AI SDK's approval flow: once every call of the last step is approved or denied, useChat sends the
    // responses (the transport turns each into the durable decision of its call).
    sendAutomaticallyWhen: lastAssistantMessageIsCompleteWithApprovalResponses,
  });
  const [input, setInput] = useState("");
  // Every tab live: another tab's messages and answers (as they stream) reach this useChat while it is idle.
  const idle = useRef(true);
  idle.current = status === "ready" || status === "error";
  useEffect(() => {
    const stop = transport.onTranscriptChange((next) => idle.current && setMessages(next));
    return () =>
      void stop.then(
        (unsubscribe) => unsubscribe(),
        () => {},
      );
  }, [transport, setMessages]);
  return (
    <section>
      <ol aria-label="messages">
        {messages.map((message) => (
          <li key={message.id} data-role={message.role}>
            {message.parts.map((part, index) => (
              // biome-ignore lint/suspicious/noArrayIndexKey: a message's parts have no ids and only ever grow at the end
              <Part key={index} part={part} respond={addToolApprovalResponse} />
            ))}
          </li>
        ))}
      </ol>
      <form
        onSubmit={(event) => {
          event.preventDefault();
          if (input.trim()) void sendMessage({ text: input });
          setInput("");
        }}
      >
        <input aria-label="message" value={input} onChange={(event) => setInput(event.target.value)} />
        <button type="submit" disabled={status === "submitted" || status === "streaming"}>
          Send
        </button>
      </form>
      <p data-testid="chat-status">{status}</p>
      {error && (
        <p role="alert" data-testid="chat-error">
          {error.message}
        </p>
      )}
    </section>
  );
}

type Respond = ReturnType<typeof useChat<DurableUIMessage>>["addToolApprovalResponse"];

function Part({ part, respond }: { part: DurableUIMessage["parts"][number]; respond: Respond }) {
  switch (part.type) {
    case "text":
      return <p className="text">{part.text}</p>;
    case "reasoning":
      return <p className="reasoning">{part.text}</p>;
    case "dynamic-tool":
      return (
        <div>
          <pre className="tool" data-state={part.state}>
            {part.toolName}: {toolText(part)}
          </pre>
          {part.state === "approval-requested" && (
            <p className="approval">
              <button type="button" onClick={() => void respond({ id: part.approval.id, approved: true })}>
                Approve
              </button>
              <button type="button" onClick={() => void respond({ id: part.approval.id, approved: false, reason: "not now" })}>
                Deny
              </button>
            </p>
          )}
        </div>
      );
    case "data-aborted":
      return <p className="notice">(cut off: {part.data.errorMessage ?? part.data.stopReason})</p>;
    case "data-retry":
      return <p className="notice">(retrying: attempt {part.data.attempt})</p>;
    case "data-tool-notice":
      return (
        <p className="notice">
          ({part.data.toolName} was {part.data.code === "interrupted" ? "interrupted by a reload" : part.data.code})
        </p>
      );
    case "data-run-failure":
      return <p className="notice">(no answer: {part.data.message})</p>;
    default:
      return null;
  }
}

function toolText(part: Extract<DurableUIMessage["parts"][number], { type: "dynamic-tool" }>): string {
  switch (part.state) {
    case "output-available":
      return String(part.output);
    case "output-error":
      return part.errorText;
    case "approval-requested":
      return `${JSON.stringify(part.input)} waits for your decision`;
    case "output-denied":
      return `denied${part.approval.reason ? ` (${part.approval.reason})` : ""}`;
    default:
      return "…";
  }
}

function TaskList() {
  const tasks = useTasks();
  return (
    <section>
      <h2>Tasks</h2>
      <ul aria-label="tasks">
        {tasks.map((task) => (
          <li key={task.id}>
            {task.id} {task.kind} {task.state.status}
          </li>
        ))}
      </ul>
    </section>
  );
}
