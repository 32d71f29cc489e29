import type { Context } from "../../base/context.ts";
import { cloneJson, type Json } from "../../base/json.ts";
import { NotFound } from "../../errors.ts";
import type { KernelTx } from "../../session/tx.ts";
import { commitStored } from "../../tasks/commit-stored.ts";
import type { RunningTask } from "../../tasks/types.ts";
import { type ResolvedAgent, resolveAgent } from "../agent.ts";
import { appendEntry, clearToolProgress } from "../conversation/documents.ts";
import { toolCallsOf } from "../conversation/transcript.ts";
import type { TextContent, ToolCall, ToolResultMessage } from "../model-types.ts";
import type { AgentRuntime } from "../runtime.ts";
import type { ToolCallInfo, ToolContent, ToolResult, ToolResultView } from "../tool.ts";
import type { AssistantEntryPayload, ToolErrorCode } from "../types.ts";
import { type ApprovalCheckpoint, endApproval, readApproval, summary } from "./approvals.ts";
import type { PageCheckpoint } from "./page-calls.ts";

/** `pi.tool`'s records (S8) and the result commit every way of ending a call goes through. */
export type ToolTaskInput = { assistant: number; callId: string; name: string };
export type ToolCheckpoint =
  | { phase: "call" }
  | ApprovalCheckpoint
  | PageCheckpoint
  | ServerCheckpoint
  | { phase: "execute"; arguments: { [key: string]: Json }; replay: "safe" | "unsafe" };
/** A server tool's call sent to the server (decision 0036): its final arguments and replay, as the intent committed them. */
export type ServerCheckpoint = { phase: "server"; arguments: { [key: string]: Json }; replay: "safe" | "unsafe" };
export type ToolTaskResult = { entryId: number };

export type Task = RunningTask<ToolTaskInput, ToolCheckpoint, ToolTaskResult>;
export type Runtime = AgentRuntime<ToolCheckpoint, ToolTaskResult>;

/** How a harness-written result ends the task. */
export type Ending =
  | { status: "completed" }
  | { status: "failed"; message: string; interrupted?: "interrupted" | "restart_limit" }
  | { status: "aborted" };

/** The text item the harness adds to a result it wrote: `<harness>\n[error] message\n</harness>`. */
export function toolErrorMessage(message: string): TextContent {
  return { type: "text", text: `<harness>\n[error] ${message}\n</harness>` };
}

/** A harness-written result built from the committed progress (what a crash left is all there is). */
export async function settleFromProgress(
  task: Task,
  runtime: Runtime,
  code: ToolErrorCode,
  message: string,
  ending: Ending,
  context: Context,
): Promise<void> {
  const progress = runtime.toolProgress(task.id);
  const toolCall: ToolCall = { type: "toolCall", id: task.input.callId, name: task.input.name, arguments: {} };
  await settle(
    task,
    runtime,
    toolCall,
    errorResult(textContent(progress?.output ?? ""), message, progress?.details),
    code,
    ending,
    context,
    progress?.output,
  );
}

/**
 * The result commit: one `pi.tool-result` entry, the slot marked done, the task terminal. The entry keeps the
 * tool's streamed `output` beside the result (for a UI after a reload: the progress document goes now).
 */
export async function settle(
  task: Task,
  runtime: Runtime,
  toolCall: ToolCall,
  result: ToolResultView,
  code: ToolErrorCode | undefined,
  ending: Ending,
  context: Context,
  output?: string,
  also?: (tx: KernelTx) => void,
): Promise<void> {
  const conversationId = task.conversationId;
  // B9: a refused result commit is retried as a commit; rerunning the step would call it "interrupted".
  await commitStored(
    runtime,
    (tx) => {
      also?.(tx);
      // A call that was decided keeps how, beside its result (a UI after a reload shows "denied: reason").
      const record = readApproval(tx, conversationId, task.input.callId);
      const decided = record?.taskId === task.id && (record.status === "approved" || record.status === "denied");
      const approval = decided ? summary(record) : undefined;
      if (record?.taskId === task.id) endApproval(tx, conversationId, task.input.callId, task.id);
      const message: ToolResultMessage = {
        role: "toolResult",
        toolCallId: toolCall.id,
        toolName: toolCall.name,
        content: result.content,
        isError: result.isError,
        ...(result.details !== undefined ? { details: result.details } : {}),
        timestamp: tx.now(),
      } as ToolResultMessage;
      const entryId = appendEntry(tx, conversationId, "pi.tool-result", {
        message,
        ...(code ? { code } : {}),
        ...(output ? { output } : {}),
        ...(approval ? { approval } : {}),
      });
      clearToolProgress(tx, conversationId, task.id);
      if (ending.status === "failed" && ending.interrupted) {
        tx.report({
          kind: "task_interrupted",
          taskId: task.id,
          taskKind: task.kind,
          conversationId,
          reason: ending.interrupted,
          message: ending.message,
        });
      }
      const result_ = { entryId };
      if (ending.status === "completed") return { status: "terminal", outcome: { status: "completed", result: result_ } };
      if (ending.status === "aborted")
        return { status: "terminal", outcome: { status: "aborted", reason: "aborted by request", result: result_ } };
      return { status: "terminal", outcome: { status: "failed", error: { message: ending.message }, result: result_ } };
    },
    context,
  );
}

export async function readCall(task: Task, runtime: Runtime, context: Context): Promise<ToolCall> {
  const entry = await runtime.entry(task.input.assistant, context);
  const message = (entry?.payload as unknown as AssistantEntryPayload | undefined)?.message;
  const found = message?.role === "assistant" ? toolCallsOf(message).find((candidate) => candidate.id === task.input.callId) : undefined;
  if (!found) throw new NotFound(`Entry ${task.input.assistant} has no tool call ${task.input.callId}.`);
  return found;
}

export function currentAgent(_task: Task, runtime: Runtime): ResolvedAgent {
  return resolveAgent(runtime.registry, runtime.agentConfig());
}

export function callInfo(task: Task, toolCall: ToolCall, args: Record<string, unknown>): ToolCallInfo {
  return { conversationId: task.conversationId, taskId: task.id, callId: toolCall.id, name: toolCall.name, arguments: cloneJson(args) };
}

export function textContent(text: string): ToolContent {
  return text === "" ? [] : [{ type: "text", text }];
}

export function errorResult(partial: ToolContent, message: string, details?: Json): ToolResultView {
  return { content: [...partial, toolErrorMessage(message)], isError: true, ...(details !== undefined ? { details } : {}) };
}

/** A tool's return value as a result: explicit content wins, else the output it streamed. */
export function normalize(returned: ToolResult | string | void, output: string, details: Json | undefined): ToolResultView {
  if (typeof returned === "string")
    return { content: textContent(returned), isError: false, ...(details !== undefined ? { details } : {}) };
  const value = returned ?? {};
  const content =
    typeof value.content === "string" ? textContent(value.content) : value.content ? cloneJson(value.content) : textContent(output);
  const finalDetails = value.details !== undefined ? cloneJson(value.details) : details;
  return { content, isError: value.isError === true, ...(finalDetails !== undefined ? { details: finalDetails } : {}) };
}
