import type { Context } from "../../base/context.ts";
import { errorMessage } from "../../base/error-message.ts";
import type { Json } from "../../base/json.ts";
import { LeaseNotHeld, StaleEpoch } from "../../errors.ts";
import { SERVER_PHASE } from "../conversation/documents.ts";
import type { ToolCall } from "../model-types.ts";
import type { ServerCallAnswer } from "../server-port.ts";
import { type ApprovalRecord, writeApproval } from "./approvals.ts";
import type { AfterHooks } from "./tool-page.ts";
import {
  type Ending,
  errorResult,
  type Runtime,
  readCall,
  type ServerCheckpoint,
  settle,
  settleFromProgress,
  type Task,
} from "./tool-result.ts";

/**
 * The task side of a server tool at a place that does not run it (decision 0036): the intent commit says the call
 * goes to the server, then the task waits for the answer while it runs. Every run of the `server` phase — the first,
 * one after a crash of this place, one at the next holder after a hand-over — asks the server under the same call
 * id, and the server answers with what it stored: the tool runs there at most once per call id, the result is
 * committed here once.
 */

/** The intent commit of a server tool's call (with a rule's approval record), then the wait for the server's answer. */
export async function callServer(
  task: Task,
  runtime: Runtime,
  args: { [key: string]: Json },
  replay: "safe" | "unsafe",
  context: Context,
  after: AfterHooks,
  ruled?: ApprovalRecord,
): Promise<void> {
  const checkpoint: ServerCheckpoint = { phase: SERVER_PHASE, arguments: args, replay };
  await runtime.commit((tx) => {
    if (ruled) writeApproval(tx, task.conversationId, ruled);
    return { status: "running", checkpoint };
  }, context);
  await runtime.crashPoint("tool:after-server-intent");
  await serverPhase(task, runtime, context, after, checkpoint);
}

/**
 * Asks the server for the call's answer and commits it as the call's result. A place that cannot ask (opened
 * without `serverCalls` or without a lease) does not know whether the server ran it: the call ends interrupted, as
 * a cut-off unsafe call does (S8). A refused epoch means this place lost the lease: it stops writing.
 */
export async function serverPhase(
  task: Task,
  runtime: Runtime,
  context: Context,
  after: AfterHooks,
  checkpoint = task.state.checkpoint as ServerCheckpoint,
): Promise<void> {
  const toolCall = await readCall(task, runtime, context);
  const calling = runtime.serverCalls;
  const lease = calling?.lease();
  if (!calling || !lease) {
    const message = `Tool ${toolCall.name} was sent to the server, and this place cannot ask the server for its result`;
    await settleFromProgress(task, runtime, "interrupted", message, { status: "failed", message, interrupted: "interrupted" }, context);
    return;
  }
  // Decision 0032: a call is asked for only once its intent is held where a takeover would recover from; and the
  // server runs only a call its copy holds (decision 0051), so a safe one waits for that acknowledgement too. Every
  // run of the phase waits (after a crash, the new epoch's copy may not have reached the server yet).
  await runtime.beforeEffect(context);
  let answer: ServerCallAnswer;
  try {
    answer = await calling.port.call(
      {
        ...lease,
        conversationId: task.conversationId,
        taskId: task.id,
        callId: toolCall.id,
        tool: toolCall.name,
        arguments: checkpoint.arguments,
        replay: checkpoint.replay,
      },
      context,
    );
  } catch (error) {
    if (runtime.signal.aborted) return; // closed or aborted: recovery or the abort handler ends the call
    if (error instanceof StaleEpoch || error instanceof LeaseNotHeld) {
      calling.lose(error);
      throw error; // nothing more is written here: the next holder asks again
    }
    await serverFailed(task, runtime, toolCall, errorMessage(error), context);
    return;
  }
  await runtime.crashPoint("tool:server-answered");
  const result = (await after(task, runtime, toolCall, checkpoint.arguments, answer.result, context)) ?? answer.result;
  if (runtime.signal.aborted) return;
  const message = answer.message ?? `Tool ${toolCall.name} ended on the server`;
  const [code, ending]: [Parameters<typeof settle>[4], Ending] =
    answer.ending === "returned"
      ? [undefined, { status: "completed" }]
      : answer.ending === "threw"
        ? ["tool_error", { status: "failed", message }]
        : ["interrupted", { status: "failed", message, interrupted: "interrupted" }];
  await settle(task, runtime, toolCall, result, code, ending, context, answer.output);
}

/** The server could not be asked or refused the call (not for the lease): the model reads why. */
async function serverFailed(task: Task, runtime: Runtime, toolCall: ToolCall, why: string, context: Context): Promise<void> {
  const message = `Tool ${toolCall.name} could not run on the server: ${why}`;
  await settle(task, runtime, toolCall, errorResult([], message), "tool_error", { status: "failed", message }, context);
}
