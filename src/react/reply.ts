import type { AssistantMessage, ImageContent, TextContent, ToolResultMessage } from "../agent/model-types.ts";
import type {
  AssistantEntryPayload,
  LiveRetry,
  RunFailureEntryPayload,
  ToolErrorCode,
  ToolResultEntryPayload,
  UserEntryPayload,
} from "../agent/types.ts";
import type { ConversationViewState } from "../agent/view/view.ts";
import type { EntryRecord } from "../storage/records.ts";

/**
 * One answer as a chat UI shows it: everything the conversation committed (and, while it runs, streams)
 * after one user input, up to the next. The chat transport streams it; the transcript converts it.
 */
export interface Reply {
  /** The UI message id: stable across reloads (derived from the input's submission id). */
  id: string;
  /** One step per model answer (committed, or the partial of the attempt in flight). */
  steps: ReplyStep[];
  /** Tool outcomes by tool call id (a running tool's output so far is `preliminary`). */
  tools: Map<string, ToolOutcome>;
  /** How the run ended without an answer, when it did. */
  failure?: RunFailureData;
}

export interface ReplyStep {
  content: StepContent[];
  data: DataPart[];
}

export type StepContent =
  | { type: "text" | "reasoning"; text: string; done: boolean }
  | { type: "tool"; toolCallId: string; toolName: string; input: unknown };

/**
 * How a tool call stands: its output (a running tool's is `preliminary`), its error, waiting for a person's
 * decision (`approvalId`, what `addToolApprovalResponse({ id })` takes), or denied by one.
 */
export type ToolOutcome =
  | { output: string; preliminary: boolean }
  | { errorText: string }
  | { approvalRequested: { approvalId: string } }
  | { denied: { approvalId: string; reason?: string } };

/** The AI SDK's `approvalId` of a tool call that asked for a decision: its tool task's id. */
export const approvalIdOf = (taskId: number): string => `approval-${taskId}`;
/** The tool task id in an `approvalId`, or undefined when it is not one of ours. */
export function taskOfApproval(approvalId: string): number | undefined {
  const match = /^approval-(\d+)$/.exec(approvalId);
  return match ? Number(match[1]) : undefined;
}

/** The data parts a durable chat adds to a `useChat` message (`message.parts`, `type: "data-…"`). */
export type DurableDataTypes = {
  /** A partial answer that a crash or an error cut off; the model's next attempt follows it. */
  aborted: { stopReason: "aborted" | "error"; errorMessage?: string };
  /** Attempt `attempt` (of `maxAttempts`) waits until `at` (harness clock, ms) after `error` (not durable: live only). */
  retry: { attempt: number } & LiveRetry;
  /** The harness, not the tool, wrote this tool's result: `interrupted` by a crash, `restart_limit`, … */
  "tool-notice": { toolCallId: string; toolName: string; code: ToolErrorCode };
  /** The run ended without an answer (the input is `unanswered`). */
  "run-failure": RunFailureData;
};

export interface RunFailureData {
  reason: string;
  message: string;
}

export type DataPart = {
  [K in "aborted" | "retry" | "tool-notice" | "run-failure"]: { type: `data-${K}`; id: string; data: DurableDataTypes[K] };
}["aborted" | "retry" | "tool-notice" | "run-failure"];

/** A transcript cut into turns: each user input (absent before the first) and what followed it. */
export interface Turn {
  user?: EntryRecord;
  after: EntryRecord[];
}

export function turnsOf(entries: readonly EntryRecord[]): Turn[] {
  const turns: Turn[] = [];
  let turn: Turn | undefined;
  for (const entry of entries) {
    if (entry.kind === "pi.user") turns.push((turn = { user: entry, after: [] }));
    else if (entry.kind === "pi.assistant" || entry.kind === "pi.tool-result" || entry.kind === "pi.run-failure") {
      if (!turn) turns.push((turn = { after: [] }));
      turn.after.push(entry);
    }
  }
  return turns;
}

/**
 * The user message's id: the `requestId` it was submitted with (useChat's own message id, so the message a tab
 * sent keeps its id after a reload), else `input-<submissionId>`, else `entry-<entryId>`.
 */
export function userMessageId(turn: Turn): string {
  const payload = turn.user?.payload as unknown as UserEntryPayload | undefined;
  if (payload?.requestId !== undefined) return payload.requestId;
  return payload?.submissionId !== undefined ? `input-${payload.submissionId}` : `entry-${turn.user?.id ?? turn.after[0]?.id}`;
}

export function replyId(turn: Turn): string {
  const submissionId = submissionOf(turn);
  return submissionId !== undefined ? `reply-${submissionId}` : `reply-entry-${turn.user?.id ?? turn.after[0]?.id}`;
}

/** The submission id of the turn's input (undefined for a turn no input started). */
export function submissionOf(turn: Turn): number | undefined {
  return (turn.user?.payload as unknown as UserEntryPayload | undefined)?.submissionId;
}

/**
 * The reply of one turn: its committed answers, tool results and run failure (a `pi.run-failure` entry).
 * `current` says it is the turn `pi.live` speaks of (`liveTurn`): then the persisted or streaming partial
 * answer, a pending retry and running tools' output are part of it.
 */
export function replyOf(state: ConversationViewState, turn: Turn, current: boolean): Reply {
  const reply: Reply = { id: replyId(turn), steps: [], tools: new Map() };
  const stepOfCall = new Map<string, ReplyStep>();
  for (const entry of turn.after) {
    if (entry.kind === "pi.assistant") {
      const message = (entry.payload as unknown as AssistantEntryPayload).message;
      const step = stepOf(message, true);
      for (const item of step.content) if (item.type === "tool") stepOfCall.set(item.toolCallId, step);
      if (message.stopReason === "aborted" || message.stopReason === "error") {
        step.data.push({
          type: "data-aborted",
          id: `aborted-${entry.id}`,
          data: { stopReason: message.stopReason, ...(message.errorMessage ? { errorMessage: message.errorMessage } : {}) },
        });
      }
      reply.steps.push(step);
    } else if (entry.kind === "pi.run-failure") {
      const { taskId, reason, error } = entry.payload as unknown as RunFailureEntryPayload;
      reply.failure = { reason, message: error };
      if (reply.steps.length === 0) reply.steps.push({ content: [], data: [] });
      reply.steps.at(-1)!.data.push({ type: "data-run-failure", id: `run-failure-${taskId}`, data: reply.failure });
    } else {
      const { message, code, approval } = entry.payload as unknown as ToolResultEntryPayload;
      if (code === "denied" && entry.byTaskId !== undefined) {
        // Denied (by a person, a rule or the expiry): the part says so itself, no notice beside it.
        const approvalId = approvalIdOf(entry.byTaskId);
        reply.tools.set(message.toolCallId, { denied: { approvalId, ...(approval?.reason ? { reason: approval.reason } : {}) } });
        continue;
      }
      reply.tools.set(message.toolCallId, outcomeOf(message));
      if (code) {
        const step = stepOfCall.get(message.toolCallId) ?? reply.steps.at(-1);
        step?.data.push({
          type: "data-tool-notice",
          id: `tool-notice-${message.toolCallId}`,
          data: { toolCallId: message.toolCallId, toolName: message.toolName, code },
        });
      }
    }
  }
  if (current) addLive(state, reply);
  return reply;
}

function addLive(state: ConversationViewState, reply: Reply): void {
  const { live, streaming } = state;
  if (live.run) {
    const generation = live.generation;
    const answer =
      streaming?.answer?.taskId === live.run.taskId && streaming.answer.attempt === generation?.attempt
        ? streaming.answer.message
        : generation?.message;
    const partial: ReplyStep = answer ? stepOf(answer, false) : { content: [], data: [] };
    // A partial's tool calls may still be growing; they show once the answer is committed.
    partial.content = partial.content.filter((item) => item.type !== "tool");
    if (generation?.retry)
      partial.data.push({
        type: "data-retry",
        id: `retry-${live.run.taskId}-${generation.attempt}`,
        data: { attempt: generation.attempt, ...generation.retry },
      });
    if (partial.content.length > 0 || partial.data.length > 0) reply.steps.push(partial);
    for (const slot of live.tools ?? []) {
      if (slot.status === "done" || reply.tools.has(slot.callId)) continue;
      if (slot.status === "awaiting-approval" && slot.taskId !== undefined) {
        reply.tools.set(slot.callId, { approvalRequested: { approvalId: approvalIdOf(slot.taskId) } });
        continue;
      }
      const output = (slot.taskId !== undefined ? streaming?.tools?.[slot.taskId] : undefined) ?? slot.output;
      if (output) reply.tools.set(slot.callId, { output, preliminary: true });
    }
  }
}

function stepOf(message: AssistantMessage, done: boolean): ReplyStep {
  const content: StepContent[] = [];
  for (const block of message.content) {
    if (block.type === "text") content.push({ type: "text", text: block.text, done });
    else if (block.type === "thinking") {
      if (!block.redacted) content.push({ type: "reasoning", text: block.thinking, done });
    } else content.push({ type: "tool", toolCallId: block.id, toolName: block.name, input: block.arguments });
  }
  return { content, data: [] };
}

function outcomeOf(message: ToolResultMessage): ToolOutcome {
  const text = contentText(message.content);
  return message.isError ? { errorText: text } : { output: text, preliminary: false };
}

export function contentText(content: readonly (TextContent | ImageContent)[] | string): string {
  if (typeof content === "string") return content;
  return content.map((item) => (item.type === "text" ? item.text : `[${item.mimeType} image]`)).join("\n");
}

/** The turn `pi.live` speaks of: the last turn whose input the live run answers (none without a run). */
export function liveTurn(state: ConversationViewState, turns: readonly Turn[]): Turn | undefined {
  const run = state.live.run;
  if (!run) return undefined;
  for (let index = turns.length - 1; index >= 0; index--) {
    const submissionId = submissionOf(turns[index]!);
    if (submissionId !== undefined && run.inputs.includes(submissionId)) return turns[index];
  }
  return undefined;
}
