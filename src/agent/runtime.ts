import type { Context } from "../base/context.ts";
import type { Json } from "../base/json.ts";
import type { ExecutionEnv } from "../env/types.ts";
import type { Report } from "../reports.ts";
import type { KernelTx } from "../session/tx.ts";
import type { Checkpoint, EntryRecord, TaskOutcome, TaskRecord } from "../storage/records.ts";
import { defineTask, type NextTaskState, type RunningTask, type TaskDefinition, type TaskRuntime } from "../tasks/types.ts";
import { LiveDocument, readAgentConfig, scopeOf, toolKey } from "./conversation/documents.ts";
import type { ModelCatalog } from "./model-types.ts";
import type { ServerCalling } from "./server-port.ts";
import type { AgentConfig, LiveState, ToolProgress } from "./types.ts";
import type { LiveEvent } from "./view/view.ts";

/**
 * A task runtime as the agent's tasks see it: the kernel's runtime, with its live events typed as the
 * agent's, its commits given the kernel's transaction, and the agent's documents read typed.
 */
export interface AgentRuntime<S extends Checkpoint = Checkpoint, R = Json> extends TaskRuntime<S, R> {
  /** `HarnessOptions.models` (a pi-ai `ModelCatalog` catalogue), as given, or undefined. */
  readonly models: ModelCatalog | undefined;
  /** How server tools reach the server (`HarnessOptions.serverCalls`, decision 0036), or undefined: they run here. */
  readonly serverCalls: ServerCalling | undefined;
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

/** What the agent gives its own tasks through the kernel (`SchedulerOptions.layer`), which never reads it. */
export interface AgentLayer {
  readonly models?: ModelCatalog | undefined;
  /** How server tools reach the server from here (`HarnessOptions.serverCalls`), when they do not run here. */
  readonly serverCalls?: ServerCalling | undefined;
}

function agentLayer(layer: unknown): AgentLayer {
  return typeof layer === "object" && layer !== null ? (layer as AgentLayer) : {};
}

/** The agent's view of `runtime`. */
export function agentRuntime<S extends Checkpoint, R>(runtime: TaskRuntime<S, R>): AgentRuntime<S, R> {
  return new AgentTaskRuntime(runtime);
}

/**
 * Delegates every member to the kernel's runtime (nothing is copied: `signal` is still made on first use).
 * A class, so that every instance has one shape and the agent's hot paths stay monomorphic.
 */
class AgentTaskRuntime<S extends Checkpoint, R> implements AgentRuntime<S, R> {
  readonly #runtime: TaskRuntime<S, R>;
  readonly #scope: string;
  readonly taskId: number;
  readonly conversationId: number;
  readonly models: ModelCatalog | undefined;
  readonly serverCalls: ServerCalling | undefined;
  readonly layer: unknown;
  readonly registry: TaskRuntime<S, R>["registry"];

  constructor(runtime: TaskRuntime<S, R>) {
    this.#runtime = runtime;
    this.#scope = scopeOf(runtime.conversationId);
    this.taskId = runtime.taskId;
    this.conversationId = runtime.conversationId;
    this.layer = runtime.layer;
    const layer = agentLayer(runtime.layer);
    this.models = layer.models;
    this.serverCalls = layer.serverCalls;
    this.registry = runtime.registry;
  }

  get signal(): AbortSignal {
    return this.#runtime.signal;
  }

  untilAborted(): Promise<void> {
    return this.#runtime.untilAborted();
  }

  get settings(): TaskRuntime<S, R>["settings"] {
    return this.#runtime.settings;
  }

  // The kernel always commits with its own transaction (`KernelTx`), which is what `commit` promises here.
  commit(change: (tx: KernelTx, current: TaskRecord<Json, S, R>) => NextTaskState<S, R> | undefined, context: Context): Promise<void> {
    return this.#runtime.commit(change as Parameters<TaskRuntime<S, R>["commit"]>[0], context);
  }

  memo(name: string, context: Context): Promise<Json | undefined>;
  memo(name: string, value: Json, context: Context): Promise<Json>;
  memo(name: string, ...rest: [Context] | [Json, Context]): Promise<Json | undefined> {
    return (this.#runtime.memo as (name: string, ...rest: unknown[]) => Promise<Json | undefined>)(name, ...rest);
  }

  sleepUntil(at: number, checkpoint: S, context: Context): Promise<void> {
    return this.#runtime.sleepUntil(at, checkpoint, context);
  }

  now(): number {
    return this.#runtime.now();
  }

  outcomes(ids: readonly number[], context: Context): Promise<TaskOutcome[]> {
    return this.#runtime.outcomes(ids, context);
  }

  getTask(id: number, context: Context): Promise<TaskRecord | undefined> {
    return this.#runtime.getTask(id, context);
  }

  beforeEffect(context: Context): Promise<void> {
    return this.#runtime.beforeEffect(context);
  }

  report(report: Report): void {
    this.#runtime.report(report);
  }

  live(event: LiveEvent): void {
    this.#runtime.live(event);
  }

  crashPoint(name: string): Promise<void> {
    return this.#runtime.crashPoint(name);
  }

  env<E extends ExecutionEnv = ExecutionEnv>(context: Context): Promise<E> {
    return this.#runtime.env<E>(context);
  }

  entries(options: { conversationId?: number; afterId?: number }, context: Context): Promise<EntryRecord[]> {
    return this.#runtime.entries(options, context);
  }

  entry(id: number, context: Context): Promise<EntryRecord | undefined> {
    return this.#runtime.entry(id, context);
  }

  document(scope: string, key: string): Json | undefined {
    return this.#runtime.document(scope, key);
  }

  setTimer(delayMs: number, fire: () => void): () => void {
    return this.#runtime.setTimer(delayMs, fire);
  }

  agentConfig(): AgentConfig {
    return readAgentConfig(this.#runtime, this.conversationId);
  }

  liveState(): LiveState {
    return LiveDocument.read(this.#runtime, this.#scope);
  }

  toolProgress(taskId: number): ToolProgress | undefined {
    return this.#runtime.document(this.#scope, toolKey(taskId)) as ToolProgress | undefined;
  }
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
