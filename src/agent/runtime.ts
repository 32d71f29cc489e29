import type { Context } from "../context.ts";
import type { Json } from "../json.ts";
import type { KernelTx } from "../session/tx.ts";
import type { Checkpoint, TaskRecord } from "../storage/records.ts";
import { defineTask, type NextTaskState, type RunningTask, type TaskDefinition, type TaskRuntime } from "../tasks/types.ts";
import { LiveDocument, readAgentConfig, scopeOf, toolKey } from "./documents.ts";
import type { AgentConfig, LiveState, ToolProgress } from "./types.ts";
import type { LiveEvent } from "./view.ts";

/**
 * A task runtime as the agent's tasks see it: the kernel's runtime, with its live events typed as the
 * agent's and the agent's documents read typed. The kernel's members are
 * the runtime's own (nothing is copied: `signal` is still made on first use).
 */
export interface AgentRuntime<S extends Checkpoint = Checkpoint, R = Json> extends TaskRuntime<S, R> {
  /**
   * `TaskRuntime.commit` with the kernel's transaction: the agent settles submissions in the same commit
   * as its task's next state (`putSubmission`), which the public `Tx` does not offer.
   */
  commit(change: (tx: KernelTx, current: TaskRecord<Json, S, R>) => NextTaskState<S, R> | undefined, context: Context): Promise<void>;
  /** Shows a partial answer or a tool's output to the conversation's views now (never stored). */
  live(event: LiveEvent): void;
  /** The committed `pi.agent` configuration of the task's conversation. */
  agentConfig(): AgentConfig;
  /** The committed `pi.live` state of the task's conversation. */
  liveState(): LiveState;
  /** The committed progress of tool task `taskId` in the task's conversation, if it wrote any. */
  toolProgress(taskId: number): ToolProgress | undefined;
}

type AgentHandler<I, S extends Checkpoint, R> = (
  task: RunningTask<I, S, R>,
  runtime: AgentRuntime<S, R>,
  context: Context,
) => Promise<void>;

/** A task definition of the agent layer: its handlers get an `AgentRuntime`. */
export interface AgentTaskDefinition<I, S extends Checkpoint, R>
  extends Omit<TaskDefinition<I, S, R>, "phases" | "abort" | "onRestartLimit"> {
  readonly phases: { readonly [phase: string]: AgentHandler<I, S, R> };
  abort: AgentHandler<I, S, R>;
  onRestartLimit?: AgentHandler<I, S, R>;
}

/** The agent's view of `runtime`. */
export function agentRuntime<S extends Checkpoint, R>(runtime: TaskRuntime<S, R>): AgentRuntime<S, R> {
  const scope = scopeOf(runtime.conversationId);
  const typed: Pick<AgentRuntime<S, R>, "agentConfig" | "liveState" | "toolProgress"> = {
    agentConfig: () => readAgentConfig(runtime, runtime.conversationId),
    liveState: () => LiveDocument.read(runtime, scope),
    toolProgress: (taskId) => runtime.document(scope, toolKey(taskId)) as ToolProgress | undefined,
  };
  // The kernel's runtime stays the prototype: its getters and methods are its own, not copies.
  // The kernel always commits with its own transaction (`KernelTx`), which is what `commit` promises here.
  return Object.assign(Object.create(runtime) as AgentRuntime<S, R>, typed);
}

/** `defineTask` for the agent layer: each handler is called with the agent's view of its runtime. */
export function defineAgentTask<I, S extends Checkpoint, R>(definition: AgentTaskDefinition<I, S, R>): TaskDefinition<I, S, R> {
  const wrap =
    (handler: AgentHandler<I, S, R>) =>
    (task: RunningTask<I, S, R>, runtime: TaskRuntime<S, R>, context: Context): Promise<void> =>
      handler(task, agentRuntime(runtime), context);
  const { phases, abort, onRestartLimit, ...rest } = definition;
  return defineTask<I, S, R>({
    ...rest,
    phases: Object.fromEntries(Object.entries(phases).map(([name, handler]) => [name, wrap(handler)])),
    abort: wrap(abort),
    ...(onRestartLimit ? { onRestartLimit: wrap(onRestartLimit) } : {}),
  });
}
