import type { EntryRecord } from "../../storage/records.ts";
import type { AssistantMessage, Message, ToolCall, ToolResultMessage } from "../model-types.ts";
import { currentSystemMessage } from "../pi-calls.ts";
import type { CompactionEntryPayload } from "../types.ts";

/** The text of a result that context derivation adds for a call whose result never arrived (upstream §5.3). */
export const MISSING_RESULT_TEXT = "Tool result unavailable: history ends before this call completed.";

/** Assistant messages that are kept in the transcript but never sent again (upstream §5.3 step 5). */
const NOT_RESENT = new Set(["aborted", "error", "deferred"]);

/**
 * The entries a model request is built from: everything through `through` (inclusive), from the newest
 * compaction on. The compaction entry stands in for every entry before its `firstKept`, except that the
 * system entries before it are kept (collapsed into one leading system message) because they carry the
 * prompt and the tool declarations.
 */
export function activeEntries(
  entries: readonly EntryRecord[],
  through?: number,
): { head?: EntryRecord; before: EntryRecord[]; kept: EntryRecord[] } {
  const visible = through === undefined ? entries : entries.filter((entry) => entry.id <= through);
  let head: EntryRecord | undefined;
  for (const entry of visible) if (entry.kind === "pi.compaction") head = entry;
  if (!head) return { before: [], kept: visible.filter((entry) => entry.kind !== "pi.compaction") };
  const firstKept = (head.payload as unknown as CompactionEntryPayload).firstKept;
  return {
    head,
    before: visible.filter((entry) => entry.id < firstKept && entry.kind !== "pi.compaction"),
    kept: visible.filter((entry) => entry.id >= firstKept && entry.kind !== "pi.compaction"),
  };
}

/**
 * The messages a model request sends, derived from committed entries only (so a recovery derives exactly the
 * same request). Aborted and errored answers are left out; each call's result follows its call in call
 * order; a call without a result gets a synthesized error result (never stored).
 */
export function deriveContext(entries: readonly EntryRecord[], through?: number): Message[] {
  const { head, before, kept } = activeEntries(entries, through);
  const flat: Message[] = [];
  if (head) {
    const system = currentSystemMessage(before.map(messageOf).filter((m): m is Message => m?.role === "system"));
    if (system) flat.push(system);
    flat.push((head.payload as unknown as CompactionEntryPayload).message);
  }
  for (const entry of kept) {
    const message = messageOf(entry);
    if (!message) continue;
    if (message.role === "assistant" && NOT_RESENT.has(message.stopReason)) continue;
    flat.push(message);
  }
  return leadWithSystem(pairResults(flat));
}

/**
 * A system message preceded only by user messages moves to the front (upstream spec §2.1 rule 10): the first
 * run's input is committed before the prompt entry its generation prepares, and the prompt must still lead.
 */
function leadWithSystem(messages: Message[]): Message[] {
  const index = messages.findIndex((message) => message.role !== "user");
  if (index <= 0 || messages[index]!.role !== "system") return messages;
  return [messages[index]!, ...messages.slice(0, index), ...messages.slice(index + 1)];
}

/** The model message an entry contributes, if any. */
export function messageOf(entry: EntryRecord): Message | undefined {
  const payload = entry.payload as { message?: Message } | null;
  return payload && typeof payload === "object" && payload.message && typeof payload.message === "object" ? payload.message : undefined;
}

export function toolCallsOf(message: AssistantMessage): ToolCall[] {
  return message.content.filter((block): block is ToolCall => block.type === "toolCall");
}

function pairResults(flat: Message[]): Message[] {
  const out: Message[] = [];
  for (let index = 0; index < flat.length; index++) {
    const message = flat[index]!;
    if (message.role === "toolResult") continue; // a stray result (its call is not in context) is dropped
    out.push(message);
    if (message.role !== "assistant") continue;
    const calls = toolCallsOf(message);
    if (calls.length === 0) continue;
    // Everything up to the next assistant message belongs to this round: results first, in call order.
    let end = index + 1;
    while (end < flat.length && flat[end]!.role !== "assistant") end++;
    const round = flat.slice(index + 1, end);
    const results = new Map<string, ToolResultMessage>();
    for (const item of round) {
      if (item.role === "toolResult" && !results.has(item.toolCallId)) results.set(item.toolCallId, item);
    }
    for (const call of calls) out.push(results.get(call.id) ?? missingResult(call, message.timestamp));
    for (const item of round) if (item.role !== "toolResult") out.push(item);
    index = end - 1;
  }
  return out;
}

function missingResult(call: ToolCall, timestamp: number): ToolResultMessage {
  return {
    role: "toolResult",
    toolCallId: call.id,
    toolName: call.name,
    content: [{ type: "text", text: MISSING_RESULT_TEXT }],
    isError: true,
    timestamp,
  };
}
