import type { UIMessage } from "ai";
import type { UserEntryPayload } from "../agent/types.ts";
import type { ConversationViewState } from "../agent/view/view.ts";
import { type DurableDataTypes, liveTurn, type Reply, replyOf, turnsOf, userMessageId } from "./reply.ts";

/** A `useChat` message of a durable conversation: its data parts are `DurableDataTypes`. */
export type DurableUIMessage = UIMessage<unknown, DurableDataTypes>;
type Part = DurableUIMessage["parts"][number];

/**
 * The conversation's transcript as `useChat` messages (for `useChat({ messages })`): a user message per input
 * and an assistant message per answer, one step per model answer, tools as `dynamic-tool` parts, recovery
 * as data parts. A run still going is included as far as it got (the transport's `reconnectToStream` then
 * replaces that message with the live one, by id).
 */
export function toUIMessages(state: ConversationViewState): DurableUIMessage[] {
  const turns = turnsOf(state.entries);
  const live = liveTurn(state, turns);
  const messages: DurableUIMessage[] = [];
  for (const turn of turns) {
    if (turn.user)
      messages.push({ id: userMessageId(turn), role: "user", parts: userParts(turn.user.payload as unknown as UserEntryPayload) });
    const reply = replyOf(state, turn, turn === live);
    if (reply.steps.length > 0) messages.push({ id: reply.id, role: "assistant", parts: replyParts(reply) });
  }
  return messages;
}

function userParts(payload: UserEntryPayload): Part[] {
  const content = payload.message.content;
  if (typeof content === "string") return [{ type: "text", text: content }];
  return content.map(
    (item): Part =>
      item.type === "text"
        ? { type: "text", text: item.text }
        : { type: "file", mediaType: item.mimeType, url: `data:${item.mimeType};base64,${item.data}` },
  );
}

/** The parts of a reply as the AI SDK's message assembly builds them from the transport's chunks. */
export function replyParts(reply: Reply): Part[] {
  const parts: Part[] = [];
  for (const step of reply.steps) {
    parts.push({ type: "step-start" });
    for (const item of step.content) {
      if (item.type === "tool") {
        const outcome = reply.tools.get(item.toolCallId);
        const base = { type: "dynamic-tool" as const, toolName: item.toolName, toolCallId: item.toolCallId, input: item.input };
        if (!outcome) parts.push({ ...base, state: "input-available" });
        else if ("errorText" in outcome) parts.push({ ...base, state: "output-error", errorText: outcome.errorText });
        else if ("approvalRequested" in outcome)
          parts.push({ ...base, state: "approval-requested", approval: { id: outcome.approvalRequested.approvalId } });
        else if ("denied" in outcome) {
          const { approvalId, reason } = outcome.denied;
          parts.push({ ...base, state: "output-denied", approval: { id: approvalId, approved: false, ...(reason ? { reason } : {}) } });
        } else
          parts.push({ ...base, state: "output-available", output: outcome.output, ...(outcome.preliminary ? { preliminary: true } : {}) });
      } else parts.push({ type: item.type, text: item.text, state: item.done ? "done" : "streaming" });
    }
    for (const data of step.data) parts.push(data as Part);
  }
  return parts;
}
