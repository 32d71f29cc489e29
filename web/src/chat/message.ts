import type { AssistantEntryPayload, LiveFailure } from "pi-durable-web";
import { h } from "../dom.ts";
import { renderMarkdown } from "../markdown.ts";
import { toolCard } from "./tool-cards.ts";

/**
 * How an answer and a failed run look, in the transcript (committed) and in the live area (streaming).
 * Model and tool text only ever reaches the page as text nodes (see dom.ts and markdown.ts).
 */
type AssistantMessage = AssistantEntryPayload["message"];
type ToolCall = Extract<AssistantMessage["content"][number], { type: "toolCall" }>;

const FAILURES: Record<string, string> = {
  interrupted: "Interrupted: the model request was cut by a crash and the retries ran out. The input is unanswered; send it again.",
  restart_limit: "Stopped at the restart limit: this run was cut off too many times in a row. The input is unanswered; send it again.",
  aborted: "Stopped: the run was aborted.",
  model_error: "The model failed.",
  no_model: "No model is available for this conversation.",
  faulted: "The run failed.",
};

/** An answer's parts; a committed answer's tool calls are their cards, a streaming one's are placeholders. */
export function assistantBody(message: AssistantMessage, streaming: boolean): HTMLElement {
  const body = h("div", { class: "msg-body" });
  for (const part of message.content) {
    if (part.type === "text") {
      if (part.text) body.append(h("div", { class: "md" }, renderMarkdown(part.text)));
    } else if (part.type === "thinking") {
      if (part.thinking) body.append(h("details", { class: "thinking" }, h("summary", null, "thinking"), h("p", null, part.thinking)));
    } else if (part.type === "toolCall") {
      body.append(
        streaming
          ? h(
              "div",
              { class: "tool is-forming" },
              h(
                "div",
                { class: "tool-head" },
                h("span", { class: "tool-icon", "aria-hidden": "true" }, "⚙"),
                h("code", { class: "tool-name" }, part.name),
                h("span", { class: "tool-status" }, "calling…"),
              ),
            )
          : toolCard(part as ToolCall),
      );
    }
  }
  return body;
}

export function failureNotice(failure: Pick<LiveFailure, "reason" | "message">, what: "run" | "compaction"): HTMLElement {
  const text =
    what === "compaction"
      ? `Compaction failed (${failure.reason}).`
      : (FAILURES[failure.reason] ?? `The run ended without an answer (${failure.reason}).`);
  return h(
    "div",
    { class: "notice warn run-failure", "data-reason": failure.reason, role: "status" },
    h("strong", null, text),
    failure.message ? h("span", null, ` ${failure.message}`) : null,
  );
}
