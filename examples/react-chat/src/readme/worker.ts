// worker.ts — the worker owns the database and runs the agent: its models and tools live here, not in the page.
import { createModels } from "@earendil-works/pi-ai/models";
import { type FauxResponseFactory, fauxAssistantMessage, fauxProvider } from "@earendil-works/pi-ai/providers/faux";
import { serveHarness } from "pi-durable-web/worker";

const models = createModels();
const faux = fauxProvider(); // an offline model, "faux/faux-1"; for a real one set any pi-ai provider (OpenAI, Anthropic, …)
const reply: FauxResponseFactory = ({ messages }) => {
  faux.appendResponses([reply]); // answers every request: the next one gets this reply too
  return fauxAssistantMessage(`Answer to message ${messages.length}.`);
};
faux.setResponses([reply]);
models.setProvider(faux.provider);
serveHarness({ models }); // at the top level, not after an await: the page's first calls reach it at once
// serveHarness({ models, extensions: [myTools], settings: { retry: { maxRetries: 3 } } }) for tools and settings
