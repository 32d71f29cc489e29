import type { Context } from "../../base/context.ts";
import { errorMessage } from "../../base/error-message.ts";
import type { Tx } from "../../session/tx.ts";
import { commitStored } from "../../tasks/commit-stored.ts";
import type { RunningTask } from "../../tasks/types.ts";
import { resolveAgent } from "../agent.ts";
import { appendAssistant, appendEntry, dropUndefined, failedAnswer, readLive, writeLive } from "../conversation/documents.ts";
import { clearRound, endRun, postToolsBoundary } from "../conversation/runs.ts";
import { deriveContext, toolCallsOf } from "../conversation/transcript.ts";
import type { AssistantMessage } from "../model-types.ts";
import { findModel } from "../models.ts";
import { currentSystemMessage, isRetryableAnswer, planSystemMessage } from "../pi-calls.ts";
import { type AgentRuntime, defineAgentTask } from "../runtime.ts";
import type { LiveToolRef, UnansweredReason } from "../types.ts";
import type { LiveEvent } from "../view/view.ts";
import { GENERATION_KIND, type GenerationCheckpoint, type GenerationResult } from "./generation-kind.ts";
import { LazyProgress } from "./progress.ts";
import { ToolTask, toolErrorMessage } from "./tool-task.ts";

export type { GenerationCheckpoint, GenerationResult };

type RequestCheckpoint = Extract<GenerationCheckpoint, { phase: "request" }>;
type ToolsCheckpoint = Extract<GenerationCheckpoint, { phase: "tools" }>;
type Task = RunningTask<Record<string, never>, GenerationCheckpoint, GenerationResult>;
type Runtime = AgentRuntime<GenerationCheckpoint, GenerationResult>;

export const GenerationTask = defineAgentTask<Record<string, never>, GenerationCheckpoint, GenerationResult>({
  ...GENERATION_KIND,
  phases: {
    prepare: (task, runtime, context) => prepare(task, runtime, context),
    request: (task, runtime, context) => request(task, runtime, context),
    tools: (task, runtime, context) => tools(task, runtime, context),
  },
  abort: async (task, runtime, context) => {
    const conversationId = task.conversationId;
    const checkpoint = task.state.checkpoint;
    await runtime.commit((tx) => {
      convertPartial(tx, conversationId);
      if (checkpoint.phase === "tools") {
        // Calls a sequential round never started get their result here, so every call has one.
        const refs = readLive(tx, conversationId).tools ?? [];
        for (const callId of checkpoint.pending) {
          const ref = refs.find((candidate) => candidate.callId === callId);
          if (!ref) continue;
          appendEntry(tx, conversationId, "pi.tool-result", {
            message: {
              role: "toolResult",
              toolCallId: ref.callId,
              toolName: ref.name,
              content: [toolErrorMessage(`Tool ${ref.name} was aborted`)],
              isError: true,
              timestamp: tx.now(),
            },
            code: "aborted",
          });
        }
      }
      endRun(tx, conversationId, task.id, { status: "unanswered", reason: "aborted", message: "The run was aborted." });
      return { status: "terminal", outcome: { status: "aborted", reason: "aborted by request" } };
    }, context);
  },
  // S6: the turn was cut off too often; the run ends with a visible failure and the user resubmits.
  onRestartLimit: async (task, runtime, context) => {
    const message =
      `The model turn was cut off ${task.restarts ?? 0} times in a row without progress, so it was not run again ` +
      `(restart limit ${runtime.settings.restartLimit}). Submit the input again to retry.`;
    await failRun(task, runtime, "restart_limit", message, context);
  },
});

async function prepare(task: Task, runtime: Runtime, context: Context): Promise<void> {
  const conversationId = task.conversationId;
  const turn = (task.state.checkpoint as Extract<GenerationCheckpoint, { phase: "prepare" }>).turn;
  const config = runtime.agentConfig();
  if (!config.model) {
    await failRun(
      task,
      runtime,
      "no_model",
      "No model is configured: give the conversation one (conversation.configure({ model }), or the agent of root()/createConversation(); a page: client.rootConversation({ model })), then submit again.",
      context,
    );
    return;
  }
  const found = findModel(runtime.models, config.model);
  if (typeof found === "string") {
    await failRun(task, runtime, "no_model", found, context);
    return;
  }
  const agent = resolveAgent(runtime.registry, config);
  const entries = await runtime.entries({}, context);
  const current = currentSystemMessage(deriveContext(entries));
  const planned = planSystemMessage(current, agent, runtime.now());
  const model = config.model;
  await runtime.commit((tx) => {
    let cutoff = entries.at(-1)?.id ?? 0;
    if (planned) cutoff = appendEntry(tx, conversationId, "pi.system", { message: planned });
    return { status: "running", checkpoint: { phase: "request", turn, attempt: 1, model, cutoff } };
  }, context);
}

async function request(task: Task, runtime: Runtime, context: Context): Promise<void> {
  const checkpoint = task.state.checkpoint as RequestCheckpoint;
  const conversationId = task.conversationId;
  const { attempt } = checkpoint;
  // S9. `restarts` is counted only by an open after a crash (close() leaves it alone), and `requestedAt` is
  // committed right before a request goes out. Both together: this attempt was in flight when the process
  // died. It is not resent at once; it counts as a failed attempt and the retry backoff applies.
  const live = runtime.liveState();
  if ((task.restarts ?? 0) > 0 && live.generation?.attempt === attempt && live.generation.requestedAt !== undefined) {
    await failAttempt(
      task,
      runtime,
      { reason: "interrupted", message: `Attempt ${attempt} of the model request was cut off while in flight.`, retryable: true },
      context,
    );
    return;
  }
  const found = findModel(runtime.models, checkpoint.model);
  if (typeof found === "string") {
    await failRun(task, runtime, "no_model", found, context);
    return;
  }
  const { models: catalog, model } = found;
  // A partial left by a close (not a crash) becomes an aborted entry, and the same request goes out again.
  await runtime.commit((tx) => {
    convertPartial(tx, conversationId);
    writeLive(tx, conversationId, { ...readLive(tx, conversationId), generation: { attempt, requestedAt: tx.now() } });
    return undefined;
  }, context);
  // Decision 0032: the request goes out once that commit is held where a takeover would recover from.
  await runtime.beforeEffect(context);

  const messages = deriveContext(await runtime.entries({}, context), checkpoint.cutoff);
  let latest: AssistantMessage | undefined;
  const progress = new LazyProgress(
    runtime,
    runtime.settings.progress.persistWithinMs,
    (tx) => {
      const current = readLive(tx, conversationId);
      if (!latest || current.generation?.attempt !== attempt) return;
      // The provider keeps mutating its partial: persist a copy as it is now.
      writeLive(tx, conversationId, { ...current, generation: { ...current.generation, message: dropUndefined(latest) } });
    },
    context,
    (error) => runtime.report({ kind: "error", error, taskId: task.id }),
    () => runtime.crashPoint("generation:streaming"),
  );
  let message: AssistantMessage;
  try {
    const stream = catalog.streamSimple(model, { messages }, { signal: runtime.signal });
    for await (const event of stream) {
      if (event.type === "done" || event.type === "error" || !event.partial || event.partial.content.length === 0) continue;
      latest = event.partial;
      progress.touch();
      runtime.live({ kind: "answer", attempt, message: latest } satisfies LiveEvent); // shown now, stored within persistWithinMs
    }
    message = await stream.result();
  } catch (error) {
    message = failedAnswer(model, errorMessage(error), runtime.now());
  } finally {
    await progress.stop();
  }
  // Closed or abort-marked: the reopened harness or the abort handler takes it from here.
  if (runtime.signal.aborted) return;

  if (message.stopReason === "toolUse" && toolCallsOf(message).length > 0) {
    await startToolRound(task, runtime, message, context);
    return;
  }
  // B9: the commits below record an answer that was paid for; a refused one is retried, never re-requested.
  if (message.stopReason === "stop" || message.stopReason === "length" || message.stopReason === "toolUse") {
    await commitStored(
      runtime,
      (tx) => {
        const entryId = appendAssistant(tx, conversationId, message);
        endRun(tx, conversationId, task.id, { status: "done", answer: entryId });
        return { status: "terminal", outcome: { status: "completed", result: { entryId } } };
      },
      context,
    );
    return;
  }
  const failure = message.errorMessage ?? `The model ended its answer with stop reason "${message.stopReason}".`;
  await failAttempt(
    task,
    runtime,
    {
      reason: "model_error",
      message: failure,
      retryable: message.stopReason === "error" && isRetryableAnswer(message),
      response: message,
    },
    context,
  );
}

async function startToolRound(task: Task, runtime: Runtime, message: AssistantMessage, context: Context): Promise<void> {
  const conversationId = task.conversationId;
  const { turn } = task.state.checkpoint as RequestCheckpoint;
  const sequential = runtime.settings.toolExecution === "sequential";
  await commitStored(
    runtime,
    (tx) => {
      const assistant = appendAssistant(tx, conversationId, message);
      const refs: LiveToolRef[] = [];
      const created: number[] = [];
      const pending: string[] = [];
      for (const call of toolCallsOf(message)) {
        if (sequential && created.length > 0) {
          refs.push({ callId: call.id, name: call.name });
          pending.push(call.id);
          continue;
        }
        const taskId = tx.createTask(ToolTask, { assistant, callId: call.id, name: call.name });
        refs.push({ callId: call.id, name: call.name, taskId });
        created.push(taskId);
      }
      const { generation: _generation, ...live } = readLive(tx, conversationId);
      writeLive(tx, conversationId, { ...live, tools: refs });
      return { status: "waiting", checkpoint: { phase: "tools" as const, turn, assistant, tools: created, pending }, on: created };
    },
    context,
  );
}

async function tools(task: Task, runtime: Runtime, context: Context): Promise<void> {
  const checkpoint = task.state.checkpoint as ToolsCheckpoint;
  const conversationId = task.conversationId;
  const [next, ...rest] = checkpoint.pending;
  if (next !== undefined) {
    // Sequential round: the next call starts only now, so it sees what the previous one did.
    await runtime.commit((tx) => {
      const live = readLive(tx, conversationId);
      const ref = live.tools?.find((candidate) => candidate.callId === next);
      const taskId = tx.createTask(ToolTask, { assistant: checkpoint.assistant, callId: next, name: ref?.name ?? "" });
      writeLive(tx, conversationId, {
        ...live,
        tools: (live.tools ?? []).map((candidate) => (candidate.callId === next ? { ...candidate, taskId } : candidate)),
      });
      return { status: "waiting", checkpoint: { ...checkpoint, tools: [...checkpoint.tools, taskId], pending: rest }, on: [taskId] };
    }, context);
    return;
  }
  await runtime.commit((tx) => {
    clearRound(tx, conversationId);
    const { tools: _tools, ...live } = readLive(tx, conversationId);
    writeLive(tx, conversationId, live);
    postToolsBoundary(tx, conversationId);
    return { status: "running", checkpoint: { phase: "prepare", turn: checkpoint.turn + 1 } };
  }, context);
}

interface AttemptFailure {
  reason: "interrupted" | "model_error";
  message: string;
  retryable: boolean;
  /** The provider's failed answer, kept in the transcript (never resent). */
  response?: AssistantMessage;
}

/**
 * A failed attempt: retried after `settings.retry` backoff (doubling from `baseDelayMs`, capped at
 * `maxAgentDelayMs`) as a durable sleep, or, with retries used up, the end of the run.
 */
async function failAttempt(task: Task, runtime: Runtime, failure: AttemptFailure, context: Context): Promise<void> {
  const checkpoint = task.state.checkpoint as RequestCheckpoint;
  const conversationId = task.conversationId;
  const policy = runtime.settings.retry;
  const retriesUsed = checkpoint.attempt - 1;
  if (!(failure.retryable && policy.enabled && retriesUsed < policy.maxRetries)) {
    await failRun(task, runtime, failure.reason, failure.message, context, failure.response);
    return;
  }
  const delay = Math.min(policy.baseDelayMs * 2 ** retriesUsed, policy.maxAgentDelayMs);
  await commitStored(
    runtime,
    (tx) => {
      convertPartial(tx, conversationId);
      if (failure.response) appendAssistant(tx, conversationId, failure.response);
      const until = tx.now() + delay;
      const attempt = checkpoint.attempt + 1;
      writeLive(tx, conversationId, {
        ...readLive(tx, conversationId),
        generation: { attempt, retry: { at: until, error: failure.message, cause: failure.reason, maxAttempts: policy.maxRetries + 1 } },
      });
      return { status: "sleeping", until, checkpoint: { ...checkpoint, attempt } };
    },
    context,
  );
}

/**
 * Ends the run without an answer: `pi.live.runFailure`, the inputs `unanswered`, the task `failed`. A run cut
 * off by the harness (interrupted, restart limit) is also reported as `task_interrupted` (S7).
 */
async function failRun(
  task: Task,
  runtime: Runtime,
  reason: UnansweredReason,
  message: string,
  context: Context,
  response?: AssistantMessage,
): Promise<void> {
  const conversationId = task.conversationId;
  await commitStored(
    runtime,
    (tx) => {
      convertPartial(tx, conversationId);
      if (response) appendAssistant(tx, conversationId, response);
      endRun(tx, conversationId, task.id, { status: "unanswered", reason, message });
      if (reason === "interrupted" || reason === "restart_limit") {
        tx.report({ kind: "task_interrupted", taskId: task.id, taskKind: task.kind, conversationId, reason, message });
      }
      return { status: "terminal", outcome: { status: "failed", error: { message, detail: { reason } } } };
    },
    context,
  );
}

/** The committed partial answer (if any) becomes an `aborted` assistant entry: kept, never resent. */
export function convertPartial(tx: Tx, conversationId: number): void {
  const live = readLive(tx, conversationId);
  const partial = live.generation?.message;
  if (!partial || !live.generation) return;
  appendAssistant(tx, conversationId, {
    ...partial,
    stopReason: "aborted",
    errorMessage: partial.errorMessage ?? "Cut off before the answer was complete.",
  });
  const { message: _message, ...generation } = live.generation;
  writeLive(tx, conversationId, { ...live, generation });
}
