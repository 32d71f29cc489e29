import type { Tool } from "@earendil-works/pi-ai";
import { validateToolArguments } from "@earendil-works/pi-ai/utils/validation";
import type { Context } from "../../base/context.ts";
import { errorMessage } from "../../base/error-message.ts";
import { cloneJson, type Json } from "../../base/json.ts";
import type { ExecutionEnv } from "../../env/types.ts";
import { ToolCallEnded } from "../../errors.ts";
import { APPROVAL_PHASE, clearToolProgress, PAGE_PHASE, readLive, writeToolProgress } from "../conversation/documents.ts";
import type { ToolCall } from "../model-types.ts";
import { defineAgentTask } from "../runtime.ts";
import type { AnyTool, BeforeToolDecision, ToolApi, ToolResultView } from "../tool.ts";
import type { LiveEvent } from "../view/view.ts";
import { type ApprovalRecord, writeApproval } from "./approvals.ts";
import { LazyProgress } from "./progress.ts";
import { approvalPhase, approvalRecord, awaitDecision, deny, ruling, withdraw } from "./tool-approval.ts";
import { awaitPage, pagePhase, withdrawPage } from "./tool-page.ts";
import {
  callInfo,
  currentAgent,
  type Ending,
  errorResult,
  normalize,
  type Runtime,
  readCall,
  settle,
  settleFromProgress,
  type Task,
  type ToolCheckpoint,
  type ToolTaskInput,
  type ToolTaskResult,
  textContent,
} from "./tool-result.ts";
import { callServer, serverPhase } from "./tool-server.ts";

export { type ToolCheckpoint, type ToolTaskInput, type ToolTaskResult, toolErrorMessage } from "./tool-result.ts";

/**
 * `pi.tool` (S8): one tool call. `call` resolves the tool, validates the arguments and runs `beforeTool`; the
 * intent commit then records `{ phase: "execute", arguments, replay }` — from here on the call may have
 * touched the world — and the tool runs in the same invocation until the result commit appends the
 * `pi.tool-result` entry and ends the task. `execute` is therefore reached only by recovery.
 *
 * A call that needs a person (DESIGN §4c) commits, instead of its intent, `{ phase: "approval", arguments,
 * replay }` asleep without a deadline (or until its expiry) beside its approval record; the decision's commit
 * wakes it, and `approval` then commits the intent and runs the tool, or answers with the denial. A page tool's call
 * waits for a page (`page`, tool-page.ts), a server tool's call sent to its server waits for the answer (`server`,
 * tool-server.ts).
 */
export const ToolTask = defineAgentTask<ToolTaskInput, ToolCheckpoint, ToolTaskResult>({
  name: "pi.tool",
  version: 1,
  initial: () => ({ phase: "call" }),
  phases: {
    call: (task, runtime, context) => call(task, runtime, context),
    approval: (task, runtime, context) => approvalPhase(task, runtime, context, start),
    page: (task, runtime, context) => pagePhase(task, runtime, context, afterHooks),
    server: (task, runtime, context) => serverPhase(task, runtime, context, afterHooks),
    execute: (task, runtime, context) => recover(task, runtime, context),
  },
  abort: async (task, runtime, context) => {
    if (task.state.checkpoint.phase === APPROVAL_PHASE) {
      await withdraw(task, runtime, context);
      return;
    }
    if (task.state.checkpoint.phase === PAGE_PHASE) {
      await withdrawPage(task, runtime, context);
      return;
    }
    const message = `Tool ${task.input.name} was aborted`;
    await settleFromProgress(task, runtime, "aborted", message, { status: "aborted" }, context);
  },
  // S6/S8: never rerun at the restart limit; the model gets an error result instead.
  onRestartLimit: async (task, runtime, context) => {
    const message =
      `Tool ${task.input.name} was cut off ${task.restarts ?? 0} times in a row without finishing, so it was not run again ` +
      `(restart limit ${runtime.settings.restartLimit})`;
    await settleFromProgress(task, runtime, "restart_limit", message, { status: "failed", message, interrupted: "restart_limit" }, context);
  },
});

async function call(task: Task, runtime: Runtime, context: Context): Promise<void> {
  const toolCall = await readCall(task, runtime, context);
  const agent = currentAgent(task, runtime);
  const tool = agent.offered.get(toolCall.name);
  if (!tool) {
    await settle(
      task,
      runtime,
      toolCall,
      errorResult([], `Tool ${toolCall.name} is not available`),
      "tool_unavailable",
      { status: "completed" },
      context,
    );
    return;
  }
  let args: Record<string, unknown>;
  try {
    args = validate(tool, toolCall, toolCall.arguments);
  } catch (error) {
    await settle(task, runtime, toolCall, errorResult([], errorMessage(error)), "invalid_arguments", { status: "completed" }, context);
    return;
  }
  // beforeTool may run again after a crash before the intent commit: hooks must be safe to rerun (S8).
  for (const { hooks } of agent.hooks) {
    if (!hooks.beforeTool) continue;
    let decision: BeforeToolDecision;
    try {
      decision = await hooks.beforeTool(callInfo(task, toolCall, args), context);
    } catch (error) {
      if (runtime.signal.aborted) throw error;
      decision = { block: errorMessage(error) };
    }
    if (decision && "block" in decision) {
      await settle(
        task,
        runtime,
        toolCall,
        errorResult([], `Tool call blocked: ${decision.block}`),
        "blocked",
        { status: "completed" },
        context,
      );
      return;
    }
    if (decision && "arguments" in decision) args = decision.arguments;
  }
  try {
    args = validate(tool, toolCall, args);
  } catch (error) {
    await settle(task, runtime, toolCall, errorResult([], errorMessage(error)), "invalid_arguments", { status: "completed" }, context);
    return;
  }
  const finalArgs = cloneJson(args) as { [key: string]: Json };
  const replay = tool.replay ?? "unsafe";
  const verdict = await ruling(tool, callInfo(task, toolCall, args), runtime, context);
  if (verdict === "user-approval") {
    await awaitDecision(task, runtime, tool, finalArgs, replay, context);
    return;
  }
  const ruled: ApprovalRecord | undefined = verdict && {
    ...approvalRecord(task, finalArgs, runtime.now()),
    status: verdict.approved ? "approved" : "denied",
    ...(verdict.reason !== undefined ? { reason: verdict.reason } : {}),
    decidedAt: runtime.now(),
    by: "rule",
  };
  if (ruled?.status === "denied") await deny(task, runtime, toolCall, ruled, context);
  else await start(task, runtime, toolCall, tool, finalArgs, replay, context, ruled);
}

/**
 * The intent commit (with a rule's approval record), then the tool; a page tool's call waits for a page instead, and
 * a server tool's call at a place that holds a lease and reaches its server through `serverCalls` goes there.
 */
async function start(
  task: Task,
  runtime: Runtime,
  toolCall: ToolCall,
  tool: AnyTool,
  args: { [key: string]: Json },
  replay: "safe" | "unsafe",
  context: Context,
  ruled?: ApprovalRecord,
): Promise<void> {
  if (tool.runsOn === "page") {
    await awaitPage(task, runtime, args, replay, context, ruled);
    return;
  }
  if (tool.runsOn === "server" && runtime.serverCalls?.lease()) {
    await callServer(task, runtime, args, replay, context, afterHooks, ruled);
    return;
  }
  // The intent commit: after it, a crash means "the tool may have partially run".
  await runtime.commit((tx) => {
    if (ruled) writeApproval(tx, task.conversationId, ruled);
    return { status: "running", checkpoint: { phase: "execute", arguments: args, replay } };
  }, context);
  await runtime.crashPoint("tool:after-intent");
  // Decision 0032: an unsafe tool starts only once its intent is held where a takeover would recover from (a safe
  // one may run again, so it never waits).
  if (replay === "unsafe") await runtime.beforeEffect(context);
  await run(task, runtime, toolCall, tool, args, context);
}

/**
 * Recovery after intent (S8). Rerun only when the stored replay and the current tool's replay are both
 * `"safe"` (a tool that no longer resolves counts as unsafe); otherwise answer with the persisted output
 * and the interruption, end `failed`, and report `task_interrupted`.
 */
async function recover(task: Task, runtime: Runtime, context: Context): Promise<void> {
  const checkpoint = task.state.checkpoint as Extract<ToolCheckpoint, { phase: "execute" }>;
  const toolCall = await readCall(task, runtime, context);
  const tool = currentAgent(task, runtime).offered.get(toolCall.name);
  if (checkpoint.replay === "safe" && tool?.replay === "safe") {
    await runtime.commit((tx) => {
      // The rerun starts its output afresh; the interrupted attempt's partial output is not the result's.
      clearToolProgress(tx, task.conversationId, task.id);
      return undefined;
    }, context);
    await run(task, runtime, toolCall, tool, checkpoint.arguments, context);
    return;
  }
  const message = `Tool ${toolCall.name} was interrupted and may have partially run`;
  await settleFromProgress(task, runtime, "interrupted", message, { status: "failed", message, interrupted: "interrupted" }, context);
}

async function run(
  task: Task,
  runtime: Runtime,
  toolCall: ToolCall,
  tool: AnyTool,
  args: { [key: string]: Json },
  context: Context,
): Promise<void> {
  const conversationId = task.conversationId;
  let output = "";
  let details: Json | undefined;
  let ended = false;
  const progress = new LazyProgress(
    runtime,
    runtime.settings.progress.persistWithinMs,
    (tx) => {
      if (!readLive(tx, conversationId).tools?.some((ref) => ref.taskId === task.id)) return; // the round is gone
      writeToolProgress(tx, conversationId, task.id, { ...(output ? { output } : {}), ...(details !== undefined ? { details } : {}) });
    },
    context,
    (error) => runtime.report({ kind: "error", error, taskId: task.id }),
    () => runtime.crashPoint("tool:output-persisted"),
  );
  const assertRunning = (what: string) => {
    if (ended)
      throw new ToolCallEnded(
        `${what} was called after tool call ${toolCall.id} (${toolCall.name}) ended; report output before execute() returns.`,
      );
  };
  const api: ToolApi = {
    taskId: task.id,
    conversationId,
    callId: toolCall.id,
    toolName: toolCall.name,
    output(chunk) {
      assertRunning("api.output()");
      output += String(chunk);
      progress.touch();
      runtime.live({ kind: "tool-output", output } satisfies LiveEvent); // shown now, stored within persistWithinMs
    },
    details(value) {
      assertRunning("api.details()");
      details = cloneJson(value);
      progress.touch();
    },
    env: <E extends ExecutionEnv>() => runtime.env<E>(context),
  };
  let result: ToolResultView;
  let thrown: string | undefined;
  try {
    result = normalize(await tool.execute(cloneJson(args), api, context), output, details);
  } catch (error) {
    if (runtime.signal.aborted) {
      ended = true;
      await progress.stop();
      return;
    }
    thrown = errorMessage(error);
    result = errorResult(textContent(output), thrown, details);
  }
  ended = true;
  await progress.stop();
  // Closed or abort-marked while running: recovery or the abort handler writes the result.
  if (runtime.signal.aborted) return;
  await runtime.crashPoint("tool:before-result");
  result = (await afterHooks(task, runtime, toolCall, args, result, context)) ?? result;
  if (runtime.signal.aborted) return;
  const ending: Ending =
    thrown === undefined ? { status: "completed" } : { status: "failed", message: `Tool ${toolCall.name} threw: ${thrown}` };
  await settle(task, runtime, toolCall, result, thrown === undefined ? undefined : "tool_error", ending, context, output);
}

/** The `afterTool` hooks over a result: the result they leave (undefined once the task was stopped). */
async function afterHooks(
  task: Task,
  runtime: Runtime,
  toolCall: ToolCall,
  args: { [key: string]: Json },
  given: ToolResultView,
  context: Context,
): Promise<ToolResultView | undefined> {
  let result = given;
  const info = callInfo(task, toolCall, args);
  for (const { hooks } of currentAgent(task, runtime).hooks) {
    if (!hooks.afterTool) continue;
    try {
      const replaced = await hooks.afterTool(info, result, context);
      if (replaced)
        result = {
          content: [...replaced.content],
          isError: replaced.isError === true,
          ...(replaced.details !== undefined ? { details: replaced.details } : {}),
        };
    } catch (error) {
      if (runtime.signal.aborted) return undefined;
      runtime.report({ kind: "error", error, taskId: task.id });
    }
  }
  return result;
}

function validate(tool: AnyTool, toolCall: ToolCall, args: Record<string, unknown>): Record<string, unknown> {
  return validateToolArguments(tool as unknown as Tool, { ...toolCall, arguments: args } as ToolCall) as Record<string, unknown>;
}
