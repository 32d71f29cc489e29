// chat.tsx — the conversation under useChat (App in main.tsx renders it).
import { useChat } from "@ai-sdk/react";
import { DurableChatTransport, type DurableUIMessage, useHarnessClient } from "pi-durable-web/react";
import { useEffect, useMemo, useRef, useState } from "react";

export function DurableChat({ conversationId }: { conversationId: number }) {
  const client = useHarnessClient()!; // rendered once useHarnessStatus() says ready
  const transport = useMemo(() => new DurableChatTransport({ client, conversationId }), [client, conversationId]);
  const [initial, setInitial] = useState<DurableUIMessage[]>();
  const [error, setError] = useState<Error>();
  useEffect(() => void transport.loadMessages().then(setInitial, setError), [transport]);
  if (error) return <p role="alert">{error.message}</p>;
  return initial ? <Chat transport={transport} initial={initial} /> : <p>loading…</p>;
}

function Chat({ transport, initial }: { transport: DurableChatTransport; initial: DurableUIMessage[] }) {
  const { messages, sendMessage, error, setMessages, status } = useChat<DurableUIMessage>({ transport, messages: initial, resume: true });
  // Every tab live: what another tab sends, and its answer as it streams, while this tab streams nothing itself.
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
  // messages[i].parts render as usual: text, reasoning, dynamic-tool, and the data-* parts below
  return (
    <>
      {messages.map((message) => (
        <p key={message.id} data-role={message.role}>
          {message.role}: {message.parts.map((part) => (part.type === "text" ? part.text : "")).join("")}
        </p>
      ))}
      {error && <p role="alert">{error.message}</p>}
      <button type="button" onClick={() => sendMessage({ text: "hello" }).catch(() => {})}>
        Send
      </button>
    </>
  );
}
