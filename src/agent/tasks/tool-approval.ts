import type { Context } from "../../base/context.ts";
import { errorMessage } from "../../base/error-message.ts";
import type { Json } from "../../base/json.ts";
import { APPROVAL_PHASE } from "../conversation/documents.ts";
import type { ToolCall } from "../model-types.ts";
import type { AnyTool, ApprovalVerdict, ToolCallInfo } from "../tool.ts";
import { type ApprovalCheckpoint, type ApprovalRecord, argumentsHash, expired, readApproval, writeApproval } from "./approvals.ts";
import { currentAgent, errorResult, type Runtime, readCall, settle, type Task } from "./tool-result.ts";

/**
 * The person in the loop of `pi.tool` (DESIGN §4c): what a tool's approval declaration says of a call, the
 * commit that makes it wait, the `approval` phase it is woken into, and the denial and withdrawal results.
 */

/** Starts an approved call: the intent commit, then the tool (tool-task.ts). */
export type StartCall = (
  task: Task,
  runtime: Runtime,
  toolCall: ToolCall,
  tool: AnyTool,
  args: { [key: string]: Json },
  replay: "safe" | "unsafe",
  context: Context,
  ruled?: ApprovalRecord,
) => Promise<void>;

/** What the tool's approval declaration says of this call: nothing to ask (undefined), a verdict, or ask a person. */
export async function ruling(tool: AnyTool, info: ToolCallInfo, runtime: Runtime, context: Context): Promise<ApprovalVerdict | undefined> {
  const approval = tool.approval ?? "never";
  if (approval === "never") return undefined;
  if (approval === "always") return "user-approval";
  let verdict: unknown;
  try {
    verdict = await approval({ ...info, entries: () => runtime.entries({}, context) }, context);
  } catch (error) {
    if (runtime.signal.aborted) throw error;
    return { approved: false, reason: `its approval rule failed: ${errorMessage(error)}` };
  }
  if (verdict === "user-approval") return verdict;
  const given = verdict as { approved?: unknown; reason?: unknown } | null;
  if (typeof given?.approved === "boolean")
    return { approved: given.approved, ...(typeof given.reason === "string" ? { reason: given.reason } : {}) };
  return { approved: false, reason: `its approval rule returned ${String(JSON.stringify(verdict))}, not a verdict` };
}

export function approvalRecord(task: Task, args: { [key: string]: Json }, now: number): ApprovalRecord {
  return {
    taskId: task.id,
    callId: task.input.callId,
    toolName: task.input.name,
    argumentsHash: argumentsHash(args),
    requestedAt: now,
    status: "awaiting",
  };
}

/** The call waits for a person: its final arguments and approval record in one commit, asleep until decided. */
export async function awaitDecision(
  task: Task,
  runtime: Runtime,
  tool: AnyTool,
  args: { [key: string]: Json },
  replay: "safe" | "unsafe",
  context: Context,
): Promise<void> {
  await runtime.commit((tx) => {
    const now = tx.now();
    const expiresAt = tool.approvalExpiresAfterMs === undefined ? undefined : now + tool.approvalExpiresAfterMs;
    writeApproval(tx, task.conversationId, { ...approvalRecord(task, args, now), ...(expiresAt !== undefined ? { expiresAt } : {}) });
    const checkpoint: ApprovalCheckpoint = { phase: APPROVAL_PHASE, arguments: args, replay };
    return { status: "sleeping", checkpoint, ...(expiresAt !== undefined ? { until: expiresAt } : {}) };
  }, context);
}

/**
 * Woken from the wait for a person: by the decision's commit, by the expiry, or (the decision's commit came
 * between) by a crash. Approved: the intent commit and the tool, once. Denied or expired: the denial as the
 * result. Still undecided (woken early by a crash): back to sleep, in a commit that reads the record again.
 */
export async function approvalPhase(task: Task, runtime: Runtime, context: Context, start: StartCall): Promise<void> {
  const checkpoint = task.state.checkpoint as ApprovalCheckpoint;
  const { conversationId } = task;
  const { callId } = task.input;
  let record = readApproval({ document: (scope, key) => runtime.document(scope, key) }, conversationId, callId);
  if (record?.status === "awaiting" && !expired(record, runtime.now())) {
    let asleep = false;
    await runtime.commit((tx) => {
      record = readApproval(tx, conversationId, callId);
      if (record?.status !== "awaiting" || expired(record, tx.now())) return undefined;
      asleep = true;
      return { status: "sleeping", checkpoint, ...(record.expiresAt !== undefined ? { until: record.expiresAt } : {}) };
    }, context);
    if (asleep) return;
  }
  // Decided (or expired), nothing of the tool started yet: a crash here runs the tool once after the reopen.
  await runtime.crashPoint("tool:decided");
  const toolCall = await readCall(task, runtime, context);
  if (!record || record.taskId !== task.id || record.status === "withdrawn") {
    await withdraw(task, runtime, context);
    return;
  }
  if (record.status === "awaiting") {
    // Expired: fails closed.
    const decided = { ...record, status: "denied", reason: "expired", decidedAt: record.expiresAt!, by: "expiry" } as const;
    await deny(task, runtime, toolCall, decided, context);
    return;
  }
  if (record.status === "denied") {
    await deny(task, runtime, toolCall, record, context);
    return;
  }
  const tool = currentAgent(task, runtime).offered.get(toolCall.name);
  if (!tool) {
    const result = errorResult([], `Tool ${toolCall.name} was approved but is no longer available`);
    await settle(task, runtime, toolCall, result, "tool_unavailable", { status: "completed" }, context);
    return;
  }
  await start(task, runtime, toolCall, tool, checkpoint.arguments, checkpoint.replay, context);
}

/** A denial as the call's result (the model reads it on its next turn); the record is written with it. */
export async function deny(task: Task, runtime: Runtime, toolCall: ToolCall, record: ApprovalRecord, context: Context): Promise<void> {
  const why =
    record.by === "expiry"
      ? "no decision came before its approval expired"
      : record.by === "rule"
        ? "its approval rule denied it"
        : "the person denied it";
  const reason = record.reason !== undefined && record.by !== "expiry" ? ` (reason: ${record.reason})` : "";
  const result = errorResult([], `Tool ${toolCall.name} was not run: ${why}${reason}`);
  await settle(task, runtime, toolCall, result, "denied", { status: "completed" }, context, undefined, (tx) =>
    writeApproval(tx, task.conversationId, record),
  );
}

/** The conversation was aborted while the call waited: the call is withdrawn, its record says so. */
export async function withdraw(task: Task, runtime: Runtime, context: Context): Promise<void> {
  const { conversationId } = task;
  const message = `Tool ${task.input.name} was withdrawn before a decision: its conversation was aborted`;
  const toolCall: ToolCall = { type: "toolCall", id: task.input.callId, name: task.input.name, arguments: {} };
  await settle(task, runtime, toolCall, errorResult([], message), "aborted", { status: "aborted" }, context, undefined, (tx) => {
    const record = readApproval(tx, conversationId, task.input.callId);
    if (record?.status === "awaiting" && record.taskId === task.id) writeApproval(tx, conversationId, { ...record, status: "withdrawn" });
  });
}
