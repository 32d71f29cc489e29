import type { Context } from "../base/context.ts";
import type { Json } from "../base/json.ts";
import type { ExecutionEnv } from "../env/types.ts";
import type { Report } from "../reports.ts";
import type { Tx } from "../session/tx.ts";
import type { ResolvedSettings } from "../settings.ts";
import type { Checkpoint, EntryRecord, TaskOutcome, TaskRecord, WaitPolicy } from "../storage/records.ts";

/** What a phase may commit as its task's next state (S3). */
export type NextTaskState<S extends Checkpoint = Checkpoint, R = Json> =
  | { status: "running"; checkpoint: S }
  | { status: "waiting"; checkpoint: S; on: number[]; policy?: WaitPolicy }
  | { status: "sleeping"; checkpoint: S; until?: number }
  | { status: "terminal"; outcome: TaskOutcome<R> };

/** The record a phase sees: its task, running, as committed before the phase started. */
export type RunningTask<I = Json, S extends Checkpoint = Checkpoint, R = Json> = TaskRecord<I, S, R> & {
  state: { status: "running"; checkpoint: S };
};

/**
 * S3: what a phase can do. Every call rejects once the invocation has ended. Call the methods on the runtime
 * (`runtime.commit(...)`); a method taken off it (`const { commit } = runtime`) has no runtime to act for.
 */
export interface TaskRuntime<S extends Checkpoint = Checkpoint, R = Json> {
  readonly taskId: number;
  readonly conversationId: number;
  /** Aborts when the invocation ends: close, an abort mark, or the phase's own end. */
  readonly signal: AbortSignal;
  /**
   * Resolves when `signal` would abort, without making the signal (decision 0050): the cheap way for a phase
   * that only holds its invocation until it is stopped (waiting on something outside, parked work). Use
   * `signal` to pass on to `fetch` and the like; never rejects.
   */
  untilAborted(): Promise<void>;
  /** The resolved settings, read fresh at each access. */
  readonly settings: ResolvedSettings;
  /** What the layer above the kernel gave its tasks (`SchedulerOptions.layer`); the kernel never reads it. */
  readonly layer: unknown;
  /**
   * Commits `change(tx, current)` atomically with everything written through `tx`. Returning a state replaces
   * the task's state (running with a new checkpoint, waiting, sleeping, terminal); `undefined` keeps it.
   * `current` is the committed record, shared and read-only: build new objects, never mutate it.
   */
  commit(change: (tx: Tx, current: TaskRecord<Json, S, R>) => NextTaskState<S, R> | undefined, context: Context): Promise<void>;
  /** Reads memo `name` (undefined when unset). */
  memo(name: string, context: Context): Promise<Json | undefined>;
  /** Writes memo `name` unless it is set; first write wins, and the winner is returned. */
  memo(name: string, value: Json, context: Context): Promise<Json>;
  /** Commits `{ status: "sleeping", until: at, checkpoint }`; the task runs `checkpoint` once the clock reaches `at`. */
  sleepUntil(at: number, checkpoint: S, context: Context): Promise<void>;
  /** The harness clock. */
  now(): number;
  /** Outcomes of terminal tasks, in order; rejects if one is still live. */
  outcomes(ids: readonly number[], context: Context): Promise<TaskOutcome[]>;
  getTask(id: number, context: Context): Promise<TaskRecord | undefined>;
  /**
   * Call after the commit that records an external effect's intent (an unsafe tool's, a model request's) and
   * before the effect starts (decision 0032): resolves once that commit is held by the place that could take the
   * lease over, so a takeover can lose only steps without effects. At once (no round trip) with no lease, a
   * pinned one, or no other place to wait for; rejects once the lease is lost or `context` is cancelled.
   */
  beforeEffect(context: Context): Promise<void>;
  /** Sends a typed report to `HarnessOptions.onReport`. */
  report(report: Report): void;
  /**
   * Shows `event` to live subscribers at once (the agent's partial answers and tool output). Never stored:
   * a crash loses it, and the committed state stays the truth. The event is read when it is delivered, so
   * pass a copy of anything you go on changing.
   */
  live(event: unknown): void;
  /**
   * A named instant where a test may cut the process (for example `"tool:after-intent"`). Resolves at once
   * unless `HarnessOptions.crashPoint` decides to stop here; then it never resolves (the process is gone).
   */
  crashPoint(name: string): Promise<void>;
  /** The conversation's execution environment (`HarnessOptions.env`), if any. */
  env<E extends ExecutionEnv = ExecutionEnv>(context: Context): Promise<E>;
  /** The installed extensions (the agent layer resolves tools, hooks and instructions from them). */
  readonly registry: InstalledExtensions;
  /** Committed entries of a conversation (default: the task's) in id order; `afterId` skips older ones. */
  entries(options: { conversationId?: number; afterId?: number }, context: Context): Promise<EntryRecord[]>;
  /** One committed entry (frozen and shared: entries never change), or undefined. */
  entry(id: number, context: Context): Promise<EntryRecord | undefined>;
  /** The committed value of a document (a detached copy), or undefined. */
  document(scope: string, key: string): Json | undefined;
  /**
   * Calls `fire` once `delayMs` have passed on the harness clock; returns a cancel function. Cancelled
   * automatically when the invocation ends, so a timer never outlives the phase that armed it.
   */
  setTimer(delayMs: number, fire: () => void): () => void;
}

export type PhaseHandler<I, S extends Checkpoint, R> = (
  task: RunningTask<I, S, R>,
  runtime: TaskRuntime<S, R>,
  context: Context,
) => Promise<void>;

/** S2: a task definition. */
export interface TaskDefinition<I = Json, S extends Checkpoint = Checkpoint, R = Json> {
  readonly name: string;
  /** A positive integer; a stored record of an older version goes through `migrate`. */
  readonly version: number;
  initial(input: I): S;
  readonly phases: { readonly [phase: string]: PhaseHandler<I, S, R> };
  /** Runs once when the task carries an abort mark and its owned work is done; must commit a terminal outcome. */
  abort(task: RunningTask<I, S, R>, runtime: TaskRuntime<S, R>, context: Context): Promise<void>;
  /** Brings a record of an older version up to this one. */
  migrate?(input: Json, checkpoint: Checkpoint, fromVersion: number): { input: I; checkpoint: S };
  /**
   * S6: runs instead of the phase when the task reached the restart limit; must commit a terminal outcome
   * the user can see. Without it the scheduler ends the task `faulted` (reason `restart_limit`).
   */
  onRestartLimit?(task: RunningTask<I, S, R>, runtime: TaskRuntime<S, R>, context: Context): Promise<void>;
}

// Definitions are stored in registries of mixed types; phases see their own types.
// biome-ignore lint/suspicious/noExplicitAny: a registry holds definitions of every input, checkpoint and result type
export type AnyTaskDefinition = TaskDefinition<any, any, any>;
export type { TaskKind } from "../session/tx.ts";

/** An extension: a named bundle of task definitions (and, in the agent layer, tools, hooks and instructions). */
export interface Extension {
  readonly name: string;
  readonly tasks?: readonly AnyTaskDefinition[];
  readonly [more: string]: unknown;
}

/** What a phase sees of the installed extensions (the `Registry` is the one implementation). */
export interface InstalledExtensions {
  readonly extensions: readonly Extension[];
  task(kind: string): AnyTaskDefinition | undefined;
}

export function defineTask<I = Json, S extends Checkpoint = Checkpoint, R = Json>(
  definition: TaskDefinition<I, S, R>,
): TaskDefinition<I, S, R> {
  return Object.freeze({ ...definition });
}
