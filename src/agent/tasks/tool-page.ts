import type { Context } from "../../base/context.ts";
import type { Json } from "../../base/json.ts";
import { PAGE_PHASE } from "../conversation/documents.ts";
import type { ToolCall } from "../model-types.ts";
import type { ToolResultView } from "../tool.ts";
import { type ApprovalRecord, writeApproval } from "./approvals.ts";
import { endPageCall, type PageCallRecord, type PageCheckpoint, type PageToolResult, readPageCall, writePageCall } from "./page-calls.ts";
import { currentAgent, type Ending, errorResult, normalize, type Runtime, readCall, settle, type Task } from "./tool-result.ts";

/**
 * The task side of a page tool (DESIGN §4c, decision 0028): the commit that makes a call wait for a page, the
 * `page` phase it is woken into (a result came, or a claim was released), and the endings.
 */

/** Runs the tool's `afterTool` hooks over a result (tool-task.ts). */
export type AfterHooks = (
  task: Task,
  runtime: Runtime,
  toolCall: ToolCall,
  args: { [key: string]: Json },
  result: ToolResultView,
  context: Context,
) => Promise<ToolResultView | undefined>;

/** The call waits for a page: its final arguments and its page-call record in one commit, asleep until answered. */
export async function awaitPage(
  task: Task,
  runtime: Runtime,
  args: { [key: string]: Json },
  replay: "safe" | "unsafe",
  context: Context,
  ruled?: ApprovalRecord,
): Promise<void> {
  await runtime.commit((tx) => {
    if (ruled) writeApproval(tx, task.conversationId, ruled);
    const record: PageCallRecord = {
      taskId: task.id,
      callId: task.input.callId,
      toolName: task.input.name,
      status: "waiting",
      requestedAt: tx.now(),
      attempts: 0,
    };
    writePageCall(tx, task.conversationId, record);
    const checkpoint: PageCheckpoint = { phase: PAGE_PHASE, arguments: args, replay };
    return { status: "sleeping", checkpoint };
  }, context);
}

/**
 * Woken from the wait for a page: by a result's commit, by a released claim, or (the commit came between) by
 * a crash. A result: the call's result, once. Released: safe runs again in the next page (the call waits
 * again), unsafe ends with an interrupted result. Still waiting or claimed: back to sleep, in a commit that
 * reads the record again so a result cannot slip between.
 */
export async function pagePhase(task: Task, runtime: Runtime, context: Context, after: AfterHooks): Promise<void> {
  const checkpoint = task.state.checkpoint as PageCheckpoint;
  const { conversationId } = task;
  const { callId } = task.input;
  const reader = { document: (scope: string, key: string) => runtime.document(scope, key) };
  let record = readPageCall(reader, conversationId, callId);
  const asleep = (status: PageCallRecord["status"] | undefined) => status === "waiting" || status === "claimed";
  if (asleep(record?.status)) {
    let slept = false;
    await runtime.commit((tx) => {
      record = readPageCall(tx, conversationId, callId);
      if (!asleep(record?.status)) return undefined;
      slept = true;
      return { status: "sleeping", checkpoint };
    }, context);
    if (slept) return;
  }
  await runtime.crashPoint("tool:page-woken");
  const toolCall = await readCall(task, runtime, context);
  const current = record?.taskId === task.id ? record : undefined;
  if (current?.status === "answered") {
    const returned = normalize(current.result as unknown as PageToolResult, "", undefined);
    const result = (await after(task, runtime, toolCall, checkpoint.arguments, returned, context)) ?? returned;
    if (runtime.signal.aborted) return;
    await end(task, runtime, toolCall, result, undefined, { status: "completed" }, "done", context);
    return;
  }
  if (current?.status === "released") {
    const tool = currentAgent(task, runtime).offered.get(toolCall.name);
    const safe = checkpoint.replay === "safe" && tool?.replay === "safe" && tool.runsOn === "page";
    if (safe && current.attempts < runtime.settings.restartLimit) {
      await runtime.commit((tx) => {
        const now = readPageCall(tx, conversationId, callId);
        if (now?.status === "released") {
          const { claim: _claim, ...rest } = now;
          writePageCall(tx, conversationId, { ...rest, status: "waiting" });
        }
        return { status: "sleeping", checkpoint };
      }, context);
      return;
    }
    const message = safe
      ? `Tool ${toolCall.name} was cut off in the page ${current.attempts} times in a row without finishing, so it was not run again (restart limit ${runtime.settings.restartLimit})`
      : `Tool ${toolCall.name} was interrupted while a page ran it (the page reloaded or closed) and may have partially run`;
    const interrupted = safe ? "restart_limit" : "interrupted";
    await end(
      task,
      runtime,
      toolCall,
      errorResult([], message),
      interrupted,
      { status: "failed", message, interrupted },
      "interrupted",
      context,
    );
    return;
  }
  await withdrawPage(task, runtime, context);
}

/** The call's result commit, with its record marked ended (the result itself moves into the entry). */
function end(
  task: Task,
  runtime: Runtime,
  toolCall: ToolCall,
  result: ToolResultView,
  code: "interrupted" | "restart_limit" | undefined,
  ending: Ending,
  status: "done" | "interrupted",
  context: Context,
): Promise<void> {
  return settle(task, runtime, toolCall, result, code, ending, context, undefined, (tx) => {
    const record = readPageCall(tx, task.conversationId, task.input.callId);
    if (record?.taskId !== task.id) return;
    const { result: _result, ...rest } = record;
    const ended: PageCallRecord = { ...rest, status, endedAt: tx.now() };
    writePageCall(tx, task.conversationId, ended);
    endPageCall(tx, task.conversationId, ended);
  });
}

/** The conversation was aborted while the call waited for (or ran in) a page: withdrawn, its record says so. */
export async function withdrawPage(task: Task, runtime: Runtime, context: Context): Promise<void> {
  const message = `Tool ${task.input.name} was withdrawn before a page answered it: its conversation was aborted`;
  const toolCall: ToolCall = { type: "toolCall", id: task.input.callId, name: task.input.name, arguments: {} };
  await settle(task, runtime, toolCall, errorResult([], message), "aborted", { status: "aborted" }, context, undefined, (tx) => {
    const record = readPageCall(tx, task.conversationId, task.input.callId);
    if (record?.taskId !== task.id || record.status === "done" || record.status === "interrupted") return;
    const { result: _result, ...rest } = record;
    const ended: PageCallRecord = { ...rest, status: "withdrawn", endedAt: tx.now() };
    writePageCall(tx, task.conversationId, ended);
    endPageCall(tx, task.conversationId, ended);
  });
}
