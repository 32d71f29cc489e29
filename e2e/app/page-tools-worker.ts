/// <reference lib="webworker" />
// A worker of the e2e page with two page tools (e2e/page-tools.e2e.ts): `ask_unsafe` and `ask_safe` are declared
// here and run by the page. Its model, pi-ai's faux provider, calls the tool the input names, then answers with
// the tool's result.
import type { AssistantMessage, Message } from "@earendil-works/pi-ai";
import { createModels } from "@earendil-works/pi-ai/models";
import { type FauxResponseFactory, fauxAssistantMessage, fauxProvider, fauxText, fauxToolCall } from "@earendil-works/pi-ai/providers/faux";
import { serveHarness } from "../../src/browser/worker.ts";
import { defineExtension, definePageTool } from "../../src/index.ts";

const ask = (replay: "safe" | "unsafe") =>
  definePageTool({
    name: `ask_${replay}`,
    description: `Asks the person (${replay} to run again)`,
    parameters: { type: "object", properties: { question: { type: "string" } }, required: ["question"] },
    replay,
  });

const text = (message: Message | undefined): string =>
  typeof message?.content === "string"
    ? message.content
    : (message?.content ?? []).map((item) => ("text" in item ? item.text : "")).join("");

const faux = fauxProvider({ api: "faux", provider: "faux", tokensPerSecond: 0 });
const brain: FauxResponseFactory = (context): AssistantMessage => {
  faux.appendResponses([brain]);
  const last = context.messages.at(-1);
  if (last?.role === "toolResult") return fauxAssistantMessage(fauxText(`the page said: ${text(last)}`));
  const tool = text(last).includes("safe") && !text(last).includes("unsafe") ? "ask_safe" : "ask_unsafe";
  return fauxAssistantMessage([fauxToolCall(tool, { question: "Which colour?" }, { id: `call-${tool}` })], { stopReason: "toolUse" });
};
faux.setResponses([brain, brain]);
const models = createModels();
models.setProvider(faux.provider);

serveHarness({
  extensions: [defineExtension({ name: "page-tools", tools: [ask("unsafe"), ask("safe")] })],
  poolDirectory: ".e2e-page-tools-pool",
  models,
});
