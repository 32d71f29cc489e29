import type { UIMessageChunk } from "ai";
import type { Reply, ReplyStep, RunFailureData, StepContent } from "./reply.ts";

/**
 * How a tool call's part is sent: `hold` (not yet: the rest of its step waits), `client` (this page runs it:
 * `onToolCall` fires), `provider` (another page ran or runs it: `providerExecuted`, no `onToolCall`), or
 * undefined (a tool that runs in the worker).
 */
export type ToolMode = (toolCallId: string, toolName: string) => "hold" | "client" | "provider" | undefined;

type Emitted = { type: "text" | "reasoning"; id: string; text: string; ended: boolean } | { type: "tool"; toolCallId: string };

interface EmittedStep {
  content: Emitted[];
  data: string[];
}

/**
 * Turns successive states of one reply into the `UIMessageChunk`s that take a `useChat` message from the
 * previous state to the next: text and reasoning as deltas, tool calls once committed, tool output (a running
 * tool's as `preliminary`), data parts by id. Only the last step is open. When its content stops being an
 * extension of what was sent (a crash committed less than the page had streamed, an attempt started over) or
 * a data part of it is gone (a retry notice once the retry went ahead), the step is sent again after a
 * `reset-step`, so the live message ends as the transcript shows it after a reload.
 */
export class ReplyChunks {
  readonly messageId: string;
  #started = false;
  readonly #steps: EmittedStep[] = [];
  /** Data part id → the JSON last sent. */
  readonly #data = new Map<string, string>();
  /** Tool call id → the JSON of the outcome last sent ("" for none yet). */
  readonly #tools = new Map<string, string>();

  readonly #toolMode: ToolMode | undefined;

  /** `toolMode` says how a tool call goes to the page (page tools under useChat, ./page-chat.ts); default as a worker's. */
  constructor(messageId: string, toolMode?: ToolMode) {
    this.messageId = messageId;
    this.#toolMode = toolMode;
  }

  update(reply: Reply): UIMessageChunk[] {
    const out: UIMessageChunk[] = [];
    if (!this.#started) {
      this.#started = true;
      out.push({ type: "start", messageId: this.messageId });
    }
    // The open step's partial is gone (a retry went ahead, its notice with it): the step empties, as a reload shows it.
    if (reply.steps.length < this.#steps.length) this.#resetOpenStep(out);
    reply.steps.forEach((step, index) => {
      if (index === this.#steps.length) {
        this.#closeStep(out);
        out.push({ type: "start-step" });
        this.#steps.push({ content: [], data: [] });
      }
      if (index === this.#steps.length - 1) this.#updateContent(index, step, out);
      this.#updateData(this.#steps[index]!, step, out);
    });
    for (const [toolCallId, outcome] of reply.tools) {
      const sent = this.#tools.get(toolCallId);
      const json = JSON.stringify(outcome);
      if (sent === undefined || sent === json) continue;
      this.#tools.set(toolCallId, json);
      if ("errorText" in outcome) out.push({ type: "tool-output-error", toolCallId, errorText: outcome.errorText, dynamic: true });
      else if ("approvalRequested" in outcome)
        out.push({ type: "tool-approval-request", toolCallId, approvalId: outcome.approvalRequested.approvalId });
      else if ("denied" in outcome) out.push({ type: "tool-output-denied", toolCallId });
      else
        out.push({
          type: "tool-output-available",
          toolCallId,
          output: outcome.output,
          dynamic: true,
          ...(outcome.preliminary ? { preliminary: true } : {}),
        });
    }
    return out;
  }

  /**
   * The last chunks: open parts ended, then `error` for a run that ended without an answer, then `finish`
   * (`tool-calls` when the answer stops to wait for a person's decision).
   */
  finish(reply: Reply, failure: RunFailureData | undefined, reason: "stop" | "tool-calls" = "stop"): UIMessageChunk[] {
    const out = this.update(reply);
    this.#closeStep(out);
    if (failure) out.push({ type: "error", errorText: failure.message });
    out.push({ type: "finish", ...(failure ? {} : { finishReason: reason }) });
    return out;
  }

  #updateContent(index: number, step: ReplyStep, out: UIMessageChunk[]): void {
    const emitted = this.#steps[index]!;
    const dataGone = emitted.data.some((id) => !step.data.some((part) => part.id === id));
    if (!extends_(emitted.content, step.content) || dataGone) this.#resetOpenStep(out);
    for (const [position, item] of step.content.entries()) {
      let sent = emitted.content[position];
      if (item.type === "tool") {
        if (sent) continue;
        const mode = this.#toolMode?.(item.toolCallId, item.toolName);
        if (mode === "hold") return; // its step goes on once the page's part is decided
        const executed = mode === "client" ? { providerExecuted: false } : mode === "provider" ? { providerExecuted: true } : {};
        out.push({
          type: "tool-input-available",
          toolCallId: item.toolCallId,
          toolName: item.toolName,
          input: item.input,
          dynamic: true,
          ...executed,
        });
        emitted.content.push({ type: "tool", toolCallId: item.toolCallId });
        this.#tools.set(item.toolCallId, "");
        continue;
      }
      if (!sent) {
        sent = { type: item.type, id: `${index}-${position}`, text: "", ended: false };
        emitted.content.push(sent);
        out.push({ type: `${item.type}-start`, id: sent.id });
      }
      if (sent.type === "tool") continue;
      if (item.text.length > sent.text.length) {
        out.push({ type: `${item.type}-delta`, id: sent.id, delta: item.text.slice(sent.text.length) });
        sent.text = item.text;
      }
      if (item.done && !sent.ended) {
        sent.ended = true;
        out.push({ type: `${item.type}-end`, id: sent.id });
      }
    }
  }

  #updateData(emitted: EmittedStep, step: ReplyStep, out: UIMessageChunk[]): void {
    for (const part of step.data) {
      const json = JSON.stringify(part.data);
      if (this.#data.get(part.id) === json) continue;
      if (!this.#data.has(part.id)) emitted.data.push(part.id);
      this.#data.set(part.id, json);
      out.push(part as UIMessageChunk);
    }
  }

  /** Empties the open (last) step on the page: `reset-step` drops its parts; what is still there is sent again. */
  #resetOpenStep(out: UIMessageChunk[]): void {
    const open = this.#steps.at(-1);
    if (!open || (open.content.length === 0 && open.data.length === 0)) return;
    out.push({ type: "reset-step" });
    for (const item of open.content) if (item.type === "tool") this.#tools.delete(item.toolCallId);
    for (const id of open.data) this.#data.delete(id);
    open.content = [];
    open.data = [];
  }

  #closeStep(out: UIMessageChunk[]): void {
    const last = this.#steps.at(-1);
    if (!last) return;
    for (const item of last.content) {
      if (item.type !== "tool" && !item.ended) {
        item.ended = true;
        out.push({ type: `${item.type}-end`, id: item.id });
      }
    }
    out.push({ type: "finish-step" });
  }
}

/** Whether `target` continues what was sent: same parts in the same order, texts only grown, ended texts unchanged. */
function extends_(sent: readonly Emitted[], target: readonly StepContent[]): boolean {
  if (sent.length > target.length) return false;
  return sent.every((item, position) => {
    const next = target[position]!;
    if (item.type === "tool" || next.type === "tool")
      return item.type === next.type && item.type === "tool" && next.type === "tool" && item.toolCallId === next.toolCallId;
    return item.type === next.type && (item.ended ? next.text === item.text : next.text.startsWith(item.text));
  });
}
