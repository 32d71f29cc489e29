// main.tsx — the page: the provider makes the worker, App finds its conversation and renders it.
import { HarnessProvider, useHarnessClient, useHarnessStatus } from "pi-durable-web/react";
import { useEffect, useState } from "react";
import { createRoot } from "react-dom/client";
import { DurableChat } from "./chat.tsx";

const worker = () => new Worker(new URL("./worker.ts", import.meta.url), { type: "module" });
createRoot(document.getElementById("root")!).render(
  <HarnessProvider worker={worker}>
    <App />
  </HarnessProvider>,
);

function App() {
  const { status, requestTakeover } = useHarnessStatus(); // starting … ready | failed | waiting-for-lock
  const client = useHarnessClient();
  const [conversationId, setConversationId] = useState<number>();
  const [error, setError] = useState<Error>();
  useEffect(() => {
    // The root conversation: made by the first call, the same one after every reload and in every tab.
    // (client.createConversation(agent) makes another; keep its id, e.g. in the URL.)
    if (status.kind === "ready" && client) client.rootConversation({ model: "faux/faux-1" }).then(setConversationId, setError);
  }, [status.kind, client]);
  if (error) return <p role="alert">{error.message}</p>;
  if (status.kind === "failed") return <p role="alert">{status.error.message}</p>;
  if (status.kind === "waiting-for-lock")
    return (
      <button type="button" onClick={() => requestTakeover().catch(setError)}>
        Open here instead
      </button>
    );
  if (status.kind !== "ready" || conversationId === undefined) return <p>{status.kind}…</p>;
  return <DurableChat conversationId={conversationId} />;
}
