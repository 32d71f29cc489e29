import type { Context } from "../../base/context.ts";
import { errorMessage } from "../../base/error-message.ts";
import type { Tx } from "../../session/tx.ts";
import type { RunningTask } from "../../tasks/types.ts";
import { addUsage, appendEntry, failedAnswer, readLive, writeLive } from "../conversation/documents.ts";
import { activeEntries, deriveContext, messageOf, toolCallsOf } from "../conversation/transcript.ts";
import type { AssistantMessage, Message, UserMessage } from "../model-types.ts";
import { findModel } from "../models.ts";
import { isRetryableAnswer } from "../pi-calls.ts";
import { type AgentRuntime, defineAgentTask } from "../runtime.ts";
import type { LiveFailure, ModelRef } from "../types.ts";

/**
 * `pi.compaction` (S10): `conversation.compact()` summarizes the entries before the newest user input through
 * the model and appends a `pi.compaction` entry; from then on the summary stands in for them in every
 * request. A failure (also at the restart limit) is written to `pi.live.compactionFailure` and ends the task;
 * the conversation keeps working.
 */
export type CompactionInput = { reason: "manual"; instructions?: string };
export type CompactionCheckpoint =
  | { phase: "select" }
  | { phase: "summarize"; attempt: number; model: ModelRef; firstKept: number; tail: number };
export type CompactionResult = { entryId?: number };

type Task = RunningTask<CompactionInput, CompactionCheckpoint, CompactionResult>;
type Runtime = AgentRuntime<CompactionCheckpoint, CompactionResult>;
type SummarizeCheckpoint = Extract<CompactionCheckpoint, { phase: "summarize" }>;

export const SUMMARY_PREFIX = "The conversation history before this point was compacted into the following summary:\n\n<summary>\n";
export const SUMMARY_SUFFIX = "\n</summary>";

const SUMMARIZER_PROMPT =
  "You summarize conversations between a user and an AI assistant so the assistant can continue without the " +
  "full history. Keep the user's goals, decisions, facts learned, files and tools used, and open work. Be concise.";

export const CompactionTask = defineAgentTask<CompactionInput, CompactionCheckpoint, CompactionResult>({
  name: "pi.compaction",
  version: 1,
  initial: () => ({ phase: "select" }),
  phases: {
    select: (task, runtime, context) => select(task, runtime, context),
    summarize: (task, runtime, context) => summarize(task, runtime, context),
  },
  abort: async (task, runtime, context) => {
    await runtime.commit((tx) => {
      removeStatus(tx, task.conversationId, task.id);
      return { status: "terminal", outcome: { status: "aborted", reason: "aborted by request" } };
    }, context);
  },
  onRestartLimit: async (task, runtime, context) => {
    const message =
      `Compaction was cut off ${task.restarts ?? 0} times in a row without progress, so it was not run again ` +
      `(restart limit ${runtime.settings.restartLimit}). Call compact() again to retry.`;
    await fail(task, runtime, "restart_limit", message, context);
  },
});

/** Adds the compaction's status to `pi.live` (the commit that creates the task). */
export function addCompactionStatus(tx: Tx, conversationId: number, taskId: number): void {
  const { compactionFailure: _failure, ...live } = readLive(tx, conversationId);
  writeLive(tx, conversationId, { ...live, compactions: [...(live.compactions ?? []), { taskId, attempt: 1 }] });
}

function removeStatus(tx: Tx, conversationId: number, taskId: number, failure?: LiveFailure): void {
  const live = readLive(tx, conversationId);
  const compactions = (live.compactions ?? []).filter((status) => status.taskId !== taskId);
  const { compactions: _all, ...rest } = live;
  writeLive(tx, conversationId, {
    ...rest,
    ...(compactions.length > 0 ? { compactions } : {}),
    ...(failure ? { compactionFailure: failure } : {}),
  });
}

async function select(task: Task, runtime: Runtime, context: Context): Promise<void> {
  const config = runtime.agentConfig();
  const found = config.model ? findModel(runtime.models, config.model) : "No model is configured.";
  if (typeof found === "string") {
    await fail(task, runtime, "no_model", found, context);
    return;
  }
  const entries = await runtime.entries({}, context);
  const { head, kept } = activeEntries(entries);
  const previousCut = head ? (head.payload as { firstKept: number }).firstKept : 0;
  // Keep the newest input and everything after it; summarize the rest. Cutting at a user input never
  // separates a tool call from its result.
  const users = kept.filter((entry) => entry.kind === "pi.user" && entry.id > previousCut);
  const firstKept = users.at(-1)?.id;
  const summarizable =
    firstKept === undefined ? [] : kept.filter((entry) => entry.id < firstKept && messageOf(entry) && messageOf(entry)!.role !== "system");
  if (firstKept === undefined || summarizable.length === 0) {
    await runtime.commit((tx) => {
      removeStatus(tx, task.conversationId, task.id);
      return { status: "terminal", outcome: { status: "completed", result: {} } };
    }, context);
    return;
  }
  const tail = entries.at(-1)!.id;
  await runtime.commit(
    () => ({ status: "running", checkpoint: { phase: "summarize", attempt: 1, model: found.ref, firstKept, tail } }),
    context,
  );
}

async function summarize(task: Task, runtime: Runtime, context: Context): Promise<void> {
  const checkpoint = task.state.checkpoint as SummarizeCheckpoint;
  const conversationId = task.conversationId;
  const found = findModel(runtime.models, checkpoint.model);
  if (typeof found === "string") {
    await fail(task, runtime, "no_model", found, context);
    return;
  }
  const { models, model } = found;
  const entries = await runtime.entries({}, context);
  const summarized = deriveContext(entries, checkpoint.firstKept - 1);
  const prompt: UserMessage = {
    role: "user",
    content:
      `<conversation>\n${serialize(summarized)}\n</conversation>\n\nSummarize the conversation above.` +
      (task.input.instructions ? `\n\nAdditional focus: ${task.input.instructions}` : ""),
    timestamp: runtime.now(),
  };
  await runtime.crashPoint("compaction:summarizing");
  // Decision 0032: the request's commit (checkpoint `summarize`) is held where a takeover recovers from first.
  await runtime.beforeEffect(context);
  let response: AssistantMessage;
  try {
    response = await models.completeSimple(model, { systemPrompt: SUMMARIZER_PROMPT, messages: [prompt] }, { signal: runtime.signal });
  } catch (error) {
    response = failedAnswer(model, errorMessage(error), runtime.now());
  }
  if (runtime.signal.aborted) return;
  const text = response.content
    .filter((block) => block.type === "text")
    .map((block) => block.text)
    .join("")
    .trim();
  const usageKey = `${response.provider}/${response.model}`;
  if (response.stopReason === "stop" && text !== "" && toolCallsOf(response).length === 0) {
    await runtime.commit((tx) => {
      addUsage(tx, conversationId, usageKey, response.usage);
      const message: UserMessage = { role: "user", content: `${SUMMARY_PREFIX}${text}${SUMMARY_SUFFIX}`, timestamp: tx.now() };
      const entryId = appendEntry(tx, conversationId, "pi.compaction", {
        message,
        firstKept: checkpoint.firstKept,
        reason: task.input.reason,
      });
      removeStatus(tx, conversationId, task.id);
      return { status: "terminal", outcome: { status: "completed", result: { entryId } } };
    }, context);
    return;
  }
  const failure =
    response.stopReason === "length"
      ? "Summarization hit the token limit; the summary is incomplete"
      : response.stopReason === "stop" || response.stopReason === "toolUse"
        ? toolCallsOf(response).length > 0
          ? "Summarization attempted to call a tool"
          : "Summarization produced no text"
        : `Summarization failed: ${response.errorMessage ?? response.stopReason}`;
  const policy = runtime.settings.retry;
  const retriesUsed = checkpoint.attempt - 1;
  if (response.stopReason === "error" && isRetryableAnswer(response) && policy.enabled && retriesUsed < policy.maxRetries) {
    const delay = Math.min(policy.baseDelayMs * 2 ** retriesUsed, policy.maxAgentDelayMs);
    await runtime.commit((tx) => {
      addUsage(tx, conversationId, usageKey, response.usage);
      const until = tx.now() + delay;
      const attempt = checkpoint.attempt + 1;
      const live = readLive(tx, conversationId);
      const compactions = (live.compactions ?? []).map((status) =>
        status.taskId === task.id ? { taskId: task.id, attempt, retry: { at: until, error: failure } } : status,
      );
      writeLive(tx, conversationId, { ...live, compactions });
      return { status: "sleeping", until, checkpoint: { ...checkpoint, attempt } };
    }, context);
    return;
  }
  await fail(task, runtime, "model_error", failure, context, response);
}

async function fail(
  task: Task,
  runtime: Runtime,
  reason: LiveFailure["reason"],
  message: string,
  context: Context,
  response?: AssistantMessage,
): Promise<void> {
  const conversationId = task.conversationId;
  await runtime.commit((tx) => {
    if (response) addUsage(tx, conversationId, `${response.provider}/${response.model}`, response.usage);
    removeStatus(tx, conversationId, task.id, { taskId: task.id, reason, message, at: tx.now() });
    if (reason === "restart_limit") {
      tx.report({ kind: "task_interrupted", taskId: task.id, taskKind: task.kind, conversationId, reason: "restart_limit", message });
    }
    return { status: "terminal", outcome: { status: "failed", error: { message, detail: { reason } } } };
  }, context);
}

/** The transcript as the summarizer reads it (system messages left out, long tool results cut). */
function serialize(messages: Message[]): string {
  const lines: string[] = [];
  for (const message of messages) {
    if (message.role === "user") lines.push(`[User]: ${textOf(message.content)}`);
    else if (message.role === "assistant") {
      for (const block of message.content) {
        if (block.type === "text") lines.push(`[Assistant]: ${block.text}`);
        else if (block.type === "thinking") lines.push(`[Assistant thinking]: ${block.thinking}`);
        else lines.push(`[Assistant tool call]: ${block.name}(${JSON.stringify(block.arguments)})`);
      }
    } else if (message.role === "toolResult") {
      const text = textOf(message.content);
      lines.push(
        `[Tool result]: ${text.length > 2000 ? `${text.slice(0, 2000)}\n[... ${text.length - 2000} more characters truncated]` : text}`,
      );
    }
  }
  return lines.join("\n");
}

function textOf(content: string | ReadonlyArray<{ type: string; text?: string }>): string {
  if (typeof content === "string") return content;
  return content.map((block) => (block.type === "text" ? block.text : `[${block.type}]`)).join("");
}
