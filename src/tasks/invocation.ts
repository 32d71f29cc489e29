import type { ContextKey } from "@earendil-works/chord";
import type { Context } from "../base/context.ts";
import type { TaskRecord } from "../storage/records.ts";
import type { AnyTaskDefinition } from "./types.ts";

/** What an invocation runs: the phases, the abort handler, or the restart-limit handler. */
export type Mode = "run" | "abort" | "limit";

/** One run of a task's handlers, from its reservation (in a pass's commit) to its end. */
export interface Invocation {
  readonly taskId: number;
  readonly mode: Mode;
  readonly definition: AnyTaskDefinition;
  /** Its abort signal, created only when somebody asks for it (aborting a signal nobody holds is wasted work). */
  readonly cancellation: LazyAbort;
  readonly context: Context;
  ended: boolean;
  /** A commit of this invocation was refused by storage: the phase's failure is not the task's fault. */
  storageFailure?: unknown;
  readonly done: Promise<void>;
  readonly finish: () => void;
}

export function newInvocation(task: TaskRecord, definition: AnyTaskDefinition, mode: Mode): Invocation {
  return new RunningInvocation(task.id, mode, definition);
}

/**
 * An abort signal made on first use. Most phases never look at their signal, and creating and aborting one
 * for every invocation is measurable (tens of µs in Node). Aborting before anyone asked records the reason;
 * a signal made afterwards starts aborted with it. Internal listeners (timers) need no signal at all.
 */
export class LazyAbort {
  #controller: AbortController | undefined;
  #reason: (() => unknown) | undefined;
  /** Made on the first `onAbort` (most invocations never register one). */
  #listeners: Set<() => void> | undefined;
  #ended: Promise<void> | undefined;
  /** Resolves `#ended`: kept apart from the listeners, so a held phase makes no listener set (decision 0054). */
  #end: (() => void) | undefined;

  get aborted(): boolean {
    return this.#reason !== undefined;
  }

  get signal(): AbortSignal {
    if (!this.#controller) {
      this.#controller = new AbortController();
      if (this.#reason) this.#controller.abort(this.#reason());
    }
    return this.#controller.signal;
  }

  abort(reason: () => unknown): void {
    if (this.#reason) return;
    this.#reason = reason;
    this.#controller?.abort(reason());
    const end = this.#end;
    this.#end = undefined;
    end?.();
    const listeners = this.#listeners;
    this.#listeners = undefined;
    if (listeners) for (const listener of listeners) listener();
  }

  onAbort(listener: () => void): void {
    if (this.#reason) listener();
    else (this.#listeners ??= new Set()).add(listener);
  }

  forget(listener: () => void): void {
    this.#listeners?.delete(listener);
  }

  /**
   * Resolves once aborted, without making a signal (decision 0050): one promise per invocation, made on the
   * first call. A signal and its listener cost several times as much (an `AbortController` is an EventTarget),
   * which a reload pays once per held task before the last task by id starts.
   */
  whenAborted(): Promise<void> {
    this.#ended ??= this.#reason ? Promise.resolve() : new Promise<void>((resolve) => (this.#end = resolve));
    return this.#ended;
  }
}

/**
 * An invocation whose `done` promise is made only when somebody waits for it (a close, a hand-over): after a crash
 * with thousands of running tasks every one gets an invocation before the last by id starts, and a promise with
 * its resolving functions each is most of what one costs to make (decision 0054). It is its own `cancellation`
 * (decision 0059): one object less kept per started invocation, which a reload pays for every running task
 * before the last by id starts. The phase's context is a separate object, so a handler cannot reach `abort()`.
 */
class RunningInvocation extends LazyAbort implements Invocation {
  readonly taskId: number;
  readonly mode: Mode;
  readonly definition: AnyTaskDefinition;
  readonly context: Context;
  ended = false;
  storageFailure?: unknown;
  #done: Promise<void> | undefined;
  #resolve: (() => void) | undefined;
  #finished = false;

  constructor(taskId: number, mode: Mode, definition: AnyTaskDefinition) {
    super();
    this.taskId = taskId;
    this.mode = mode;
    this.definition = definition;
    this.context = new InvocationContext(this);
  }

  get cancellation(): LazyAbort {
    return this;
  }

  get done(): Promise<void> {
    this.#done ??= this.#finished ? Promise.resolve() : new Promise<void>((resolve) => (this.#resolve = resolve));
    return this.#done;
  }

  finish(): void {
    this.#finished = true;
    this.#resolve?.();
  }
}

/**
 * The context a phase gets: chord's Context, cancelled with the invocation, whose signal is made on first
 * use. Contexts derived from it (chord's `withContextValue`, `withAbortSignal`) find the signal through
 * `value()` under chord's abort-signal key.
 */
class InvocationContext implements Context {
  readonly #cancellation: LazyAbort;

  constructor(cancellation: LazyAbort) {
    this.#cancellation = cancellation;
  }

  get abortSignal(): AbortSignal {
    return this.#cancellation.signal;
  }

  /** True once the invocation is cancelled, without making a signal. */
  get cancelled(): boolean {
    return this.#cancellation.aborted;
  }

  value<T>(key: ContextKey<T>): T | undefined {
    return key.token.description === CHORD_ABORT_SIGNAL_KEY ? (this.abortSignal as T) : undefined;
  }

  toString(): string {
    return "[Context task invocation]";
  }
}

/** The description of chord's (unexported) abort-signal context key; pinned with chord's version. */
const CHORD_ABORT_SIGNAL_KEY = "chord.abortSignal";
