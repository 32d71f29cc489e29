import { createModels } from "@earendil-works/pi-ai/models";
import { type FauxResponseFactory, fauxAssistantMessage, fauxProvider, fauxText, fauxToolCall } from "@earendil-works/pi-ai/providers/faux";
import { defineExtension, defineTool } from "pi-durable-web";

/** A tool with a side effect (a console line per call). Unsafe to run twice, the default: after a crash mid-call it is not rerun. */
export const remember = defineTool<{ text: string }>({
  name: "remember",
  description: "Remembers a line of text.",
  parameters: { type: "object", properties: { text: { type: "string" } }, required: ["text"] },
  execute: async ({ text }, api) => {
    console.log(`effect: remembered ${api.callId}`);
    return `remembered: ${text}`;
  },
});

/** An offline model, "faux/faux-1": it answers an input with a call of `remember`, then the call's result with a line. */
export function offlineModels() {
  const faux = fauxProvider();
  const reply: FauxResponseFactory = ({ messages }) => {
    faux.appendResponses([reply]);
    const last = messages.at(-1);
    if (last?.role === "toolResult") return fauxAssistantMessage(fauxText("Noted."));
    return fauxAssistantMessage([fauxToolCall("remember", { text: "the checklist started" }, { id: `call-${messages.length}` })], {
      stopReason: "toolUse",
    });
  };
  faux.setResponses([reply]);
  const models = createModels();
  models.setProvider(faux.provider);
  return models;
}

export const agentTools = defineExtension({ name: "agent-tools", tools: [remember] });
