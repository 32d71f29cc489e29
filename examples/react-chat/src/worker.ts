/// <reference lib="webworker" />
// The worker owns the OPFS database and runs the agent; the page reaches it through HarnessProvider.
import {
  createModels,
  type FauxResponseFactory,
  fauxAssistantMessage,
  fauxProvider,
  fauxText,
  fauxToolCall,
  type Message,
} from "@earendil-works/pi-ai";
import { defineExtension, defineTool, type ExecutionEnv } from "pi-durable-web";
import { opfsEnvs, serveHarness } from "pi-durable-web/worker";

export const STORY =
  "Once a lighthouse kept a ledger of every turn of its lamp. When a storm cut the power mid-turn, the lamp " +
  "woke, read the last line, saw the turn begun but not ended, wrote that it was interrupted, and began the " +
  "next one. Reload this tab while the story streams: the part you read stays as an aborted answer, a retry " +
  "follows, and then the whole story comes again, once.";

/** A tool that ticks once every 400 ms for `ticks` ticks, its output streaming to the page as it goes. */
const countdown = defineTool<{ ticks: number }>({
  name: "countdown",
  description: "Counts down, one tick at a time",
  parameters: { type: "object", properties: { ticks: { type: "number" } }, required: ["ticks"] },
  async execute({ ticks }, api, context) {
    for (let tick = ticks; tick > 0; tick--) {
      api.output(`tick ${tick}\n`);
      await new Promise((resolve) => setTimeout(resolve, 400));
      if (context.abortSignal?.aborted) throw new Error("aborted");
    }
    return "lift-off";
  },
});

/**
 * A tool that asks the person first (`approval: "always"`, the AI SDK's `needsApproval`): it appends a line to
 * notes.txt in the conversation's OPFS directory and answers with the whole file, so a second run would show.
 */
const addNote = defineTool<{ text: string }>({
  name: "add_note",
  description: "Appends a line to notes.txt",
  parameters: { type: "object", properties: { text: { type: "string" } }, required: ["text"] },
  approval: "always",
  async execute({ text }, api, context) {
    const env = await api.env<ExecutionEnv>();
    await env.append("notes.txt", `${text}\n`, context);
    return `notes.txt reads: ${JSON.stringify(await env.read("notes.txt", context))}`;
  },
});

/**
 * The offline model: "story" streams a long answer, "countdown" calls the tool, "note" asks to add a note,
 * "fail" answers with an error; it answers from the request alone.
 */
function offlineModel() {
  const faux = fauxProvider({
    api: "offline-demo",
    provider: "offline",
    models: [{ id: "demo", name: "Offline demo model", input: ["text"], contextWindow: 32_768, maxTokens: 4096 }],
    tokensPerSecond: 20,
    tokenSize: { min: 1, max: 1 },
  });
  const brain: FauxResponseFactory = (context) => {
    faux.appendResponses([brain]);
    return respond(context.messages);
  };
  faux.setResponses([brain, brain]);
  const models = createModels();
  models.setProvider(faux.provider);
  return models;
}

function respond(messages: readonly Message[]) {
  const last = messages.at(-1);
  if (last?.role === "toolResult") {
    const text = last.content.map((item) => (item.type === "text" ? item.text : "")).join("");
    if (last.toolName === "add_note") return fauxAssistantMessage(last.isError ? `No note: ${text}` : `Noted. ${text}`);
    return fauxAssistantMessage(last.isError ? `The countdown was cut off: ${text}` : `The countdown said: ${text}`);
  }
  const input =
    last?.role === "user"
      ? typeof last.content === "string"
        ? last.content
        : last.content.map((item) => (item.type === "text" ? item.text : "")).join("")
      : "";
  if (/countdown/i.test(input))
    return fauxAssistantMessage([fauxText("Counting down."), fauxToolCall("countdown", { ticks: 8 }, { id: "call_1" })], {
      stopReason: "toolUse",
    });
  if (/note/i.test(input))
    return fauxAssistantMessage([fauxText("I will ask you first."), fauxToolCall("add_note", { text: "buy milk" }, { id: "call_note" })], {
      stopReason: "toolUse",
    });
  if (/story/i.test(input)) return fauxAssistantMessage(STORY);
  // Not a transient error (pi-ai's rule), so it is not retried: the run ends without an answer.
  if (/fail/i.test(input)) return fauxAssistantMessage([], { stopReason: "error", errorMessage: "400 the demo model refuses on purpose" });
  return fauxAssistantMessage(`You said "${input}". Say "story", "countdown" or "note".`);
}

serveHarness({
  path: "/react-chat.sqlite3",
  extensions: [defineExtension({ name: "react-chat", tools: [countdown, addNote] })],
  env: opfsEnvs(),
  models: offlineModel(),
  settings: { retry: { baseDelayMs: 300 } },
});
