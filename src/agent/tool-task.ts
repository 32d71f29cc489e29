import type { TextContent, Tool, ToolCall, ToolResultMessage } from "@earendil-works/pi-ai";
import { validateToolArguments } from "@earendil-works/pi-ai/utils/validation";
import type { Context } from "../context.ts";
import type { ExecutionEnv } from "../env/types.ts";
import { errorMessage } from "../error-message.ts";
import { NotFound, ToolCallEnded } from "../errors.ts";
import { cloneJson, type Json } from "../json.ts";
import { commitStored } from "../tasks/commit-stored.ts";
import type { RunningTask } from "../tasks/types.ts";
import { type ResolvedAgent, resolveAgent } from "./agent.ts";
import { toolCallsOf } from "./context.ts";
import { appendEntry, clearToolProgress, readLive, writeToolProgress } from "./documents.ts";
import { LazyProgress } from "./progress.ts";
import { type AgentRuntime, defineAgentTask } from "./runtime.ts";
import type { AnyTool, BeforeToolDecision, ToolApi, ToolCallInfo, ToolContent, ToolResult, ToolResultView } from "./tool.ts";
import type { AssistantEntryPayload, ToolErrorCode } from "./types.ts";
import type { LiveEvent } from "./view.ts";

/**
 * `pi.tool` (S8): one tool call. `call` resolves the tool, validates the arguments and runs `beforeTool`; the
 * intent commit then records `{ phase: "execute", arguments, replay }` — from here on the call may have
 * touched the world — and the tool runs in the same invocation until the result commit appends the
 * `pi.tool-result` entry and ends the task. `execute` is therefore reached only by recovery.
 */
export type ToolTaskInput = { assistant: number; callId: string; name: string };
export type ToolCheckpoint = { phase: "call" } | { phase: "execute"; arguments: { [key: string]: Json }; replay: "safe" | "unsafe" };
export type ToolTaskResult = { entryId: number };

type Task = RunningTask<ToolTaskInput, ToolCheckpoint, ToolTaskResult>;
type Runtime = AgentRuntime<ToolCheckpoint, ToolTaskResult>;

/** How a harness-written result ends the task. */
type Ending =
  | { status: "completed" }
  | { status: "failed"; message: string; interrupted?: "interrupted" | "restart_limit" }
  | { status: "aborted" };

export const ToolTask = defineAgentTask<ToolTaskInput, ToolCheckpoint, ToolTaskResult>({
  name: "pi.tool",
  version: 1,
  initial: () => ({ phase: "call" }),
  phases: {
    call: (task, runtime, context) => call(task, runtime, context),
    execute: (task, runtime, context) => recover(task, runtime, context),
  },
  abort: async (task, runtime, context) => {
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

/** The text item the harness adds to a result it wrote: `<harness>\n[error] message\n</harness>`. */
export function toolErrorMessage(message: string): TextContent {
  return { type: "text", text: `<harness>\n[error] ${message}\n</harness>` };
}

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
  // The intent commit: after it, a crash means "the tool may have partially run".
  await runtime.commit(() => ({ status: "running", checkpoint: { phase: "execute", arguments: finalArgs, replay } }), context);
  await runtime.crashPoint("tool:after-intent");
  await run(task, runtime, toolCall, tool, finalArgs, context);
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
      if (runtime.signal.aborted) return;
      runtime.report({ kind: "error", error, taskId: task.id });
    }
  }
  const ending: Ending =
    thrown === undefined ? { status: "completed" } : { status: "failed", message: `Tool ${toolCall.name} threw: ${thrown}` };
  await settle(task, runtime, toolCall, result, thrown === undefined ? undefined : "tool_error", ending, context, output);
}

/** A harness-written result built from the committed progress (what a crash left is all there is). */
async function settleFromProgress(
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
async function settle(
  task: Task,
  runtime: Runtime,
  toolCall: ToolCall,
  result: ToolResultView,
  code: ToolErrorCode | undefined,
  ending: Ending,
  context: Context,
  output?: string,
): Promise<void> {
  const conversationId = task.conversationId;
  // B9: a refused result commit is retried as a commit; rerunning the step would call it "interrupted".
  await commitStored(
    runtime,
    (tx) => {
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

async function readCall(task: Task, runtime: Runtime, context: Context): Promise<ToolCall> {
  const entry = await runtime.entry(task.input.assistant, context);
  const message = (entry?.payload as unknown as AssistantEntryPayload | undefined)?.message;
  const found = message?.role === "assistant" ? toolCallsOf(message).find((candidate) => candidate.id === task.input.callId) : undefined;
  if (!found) throw new NotFound(`Entry ${task.input.assistant} has no tool call ${task.input.callId}.`);
  return found;
}

function currentAgent(_task: Task, runtime: Runtime): ResolvedAgent {
  return resolveAgent(runtime.registry, runtime.agentConfig());
}

function validate(tool: AnyTool, toolCall: ToolCall, args: Record<string, unknown>): Record<string, unknown> {
  return validateToolArguments(tool as unknown as Tool, { ...toolCall, arguments: args } as ToolCall) as Record<string, unknown>;
}

function callInfo(task: Task, toolCall: ToolCall, args: Record<string, unknown>): ToolCallInfo {
  return { conversationId: task.conversationId, taskId: task.id, callId: toolCall.id, name: toolCall.name, arguments: cloneJson(args) };
}

function textContent(text: string): ToolContent {
  return text === "" ? [] : [{ type: "text", text }];
}

function errorResult(partial: ToolContent, message: string, details?: Json): ToolResultView {
  return { content: [...partial, toolErrorMessage(message)], isError: true, ...(details !== undefined ? { details } : {}) };
}

/** A tool's return value as a result: explicit content wins, else the output it streamed. */
function normalize(returned: ToolResult | string | void, output: string, details: Json | undefined): ToolResultView {
  if (typeof returned === "string")
    return { content: textContent(returned), isError: false, ...(details !== undefined ? { details } : {}) };
  const value = returned ?? {};
  const content =
    typeof value.content === "string" ? textContent(value.content) : value.content ? cloneJson(value.content) : textContent(output);
  const finalDetails = value.details !== undefined ? cloneJson(value.details) : details;
  return { content, isError: value.isError === true, ...(finalDetails !== undefined ? { details: finalDetails } : {}) };
}
