import { errorMessage } from "../base/error-message.ts";
import { jsonEqual } from "../base/json.ts";
import { DurableError } from "../errors.ts";
import { deliver, type ReportHandler } from "../reports.ts";
import type { Session } from "../session/session.ts";
import type { Checkpoint } from "../storage/records.ts";
import type { Invocation } from "./invocation.ts";
import type { LiveIndex } from "./live-index.ts";
import type { Registry } from "./registry.ts";
import { type FaultReason, fault } from "./transitions.ts";
import type { RunningTask, TaskRuntime } from "./types.ts";

export interface SchedulerPort {
  readonly session: Session;
  readonly registry: Registry;
  readonly index: LiveIndex;
  readonly onReport: ReportHandler | undefined;
  readonly closing: () => boolean;
  /** After a storage failure: report it and try again after a backoff. */
  readonly backOff: (error: unknown) => void;
  /** The invocation has ended (its handlers returned): forget it and look at its task again. */
  readonly ended: (invocation: Invocation) => void;
}

/**
 * Runs an invocation off the line: phase after phase while the task stays running (each phase must make
 * durable progress), or the abort / restart-limit handler once. A failure, a phase without progress or a
 * handler that leaves its task running ends the task `faulted`, in one commit.
 */
export function invoke(host: SchedulerPort, invocation: Invocation, runtime: TaskRuntime): void {
  // Nobody waits on an invocation's run (its end is `host.ended`, its `done` is made for a close): no promise, no
  // resolving functions and no executor a started task (decision 0109: 10,000 of them before the last by id).
  if (invocation.mode !== "run") void invokeHandler(host, invocation, runtime);
  else new PhaseLoop(host, invocation, runtime).next();
}

/**
 * The phase loop of a `run` invocation as a small state machine (decision 0087): each phase's promise is followed
 * with `then` and two reactions made once per invocation, not with an `await` in an async loop (in Node 20 an
 * `await` made about 200 bytes every phase, a `then` about half). The order of everything is the async loop's:
 * a phase's end is taken one microtask after its promise settles, as `await` took it; a handler that throws before
 * it returns is taken at once, as the loop's `catch` took it; the invocation ends (`host.ended`) once, after the
 * fault's commit when there is one. The fault's two reactions are made when a fault is committed (decision 0109: a
 * phase held until the invocation is stopped, every running task at a reload, never needs them).
 */
class PhaseLoop {
  readonly #host: SchedulerPort;
  readonly #invocation: Invocation;
  readonly #runtime: TaskRuntime;
  #first = true;
  #failed = false;
  #failure: unknown = undefined;
  #phaseStart: Checkpoint | undefined = undefined;
  /** A phase's promise fulfilled: look at the task again. */
  readonly #fulfilled = (): void => this.next();
  /** A phase's promise rejected: remembered as the phase's failure, then the task looked at again. */
  readonly #rejected = (error: unknown): void => {
    this.#failed = true;
    this.#failure = error;
    this.next();
  };

  constructor(host: SchedulerPort, invocation: Invocation, runtime: TaskRuntime) {
    this.#host = host;
    this.#invocation = invocation;
    this.#runtime = runtime;
  }

  /** Runs phases until one returns a promise (then waits for it) or the invocation is over (then ends it). */
  next(): void {
    const host = this.#host;
    const invocation = this.#invocation;
    const id = invocation.taskId;
    try {
      for (;;) {
        const current = host.session.live.get(id);
        if (current?.state.status !== "running" || host.closing() || current.abortRequested) break;
        if (!this.#first) {
          if (invocation.storageFailure !== undefined) {
            // Storage refused a commit (nothing was written): run this step again later, as after a crash.
            host.backOff(invocation.storageFailure);
            break;
          }
          if (this.#failed) {
            this.#fault("phase_failed", errorMessage(this.#failure));
            return;
          }
          if (jsonEqual(current.state.checkpoint, this.#phaseStart)) {
            const message = `Task ${current.kind} phase ${this.#phaseStart?.phase} returned without durable progress.`;
            this.#fault("no_progress", message);
            return;
          }
          if (host.registry.task(current.kind) !== invocation.definition) break; // hand over at a phase boundary
        }
        this.#first = false;
        this.#failed = false;
        this.#failure = undefined;
        const phaseStart = (this.#phaseStart = current.state.checkpoint);
        const handler = invocation.definition.phases[phaseStart.phase];
        let returned: unknown;
        try {
          if (!handler) throw new DurableError(`Task kind ${current.kind} has no phase named "${phaseStart.phase}".`);
          returned = handler(current as RunningTask, this.#runtime, invocation.context); // frozen: committed records are immutable
        } catch (error) {
          // Thrown before it returned: the async loop's `catch` took it at once, without a microtask.
          this.#failed = true;
          this.#failure = error;
          continue;
        }
        // What `await` does with a promise (the promise itself), a thenable or a value, one microtask or more later.
        Promise.resolve(returned).then(this.#fulfilled, this.#rejected);
        return;
      }
    } catch (error) {
      this.#report(error);
    }
    this.#end();
  }

  /** Commits the fault, then ends the invocation (the commit never rejects: it backs off itself). */
  #fault(reason: FaultReason, message: string): void {
    commitFault(this.#host, this.#invocation, reason, message).then(
      () => this.#end(),
      (error: unknown) => {
        this.#report(error);
        this.#end();
      },
    );
  }

  #report(error: unknown): void {
    if (!this.#host.closing()) deliver(this.#host.onReport, { kind: "error", error, taskId: this.#invocation.taskId });
  }

  #end(): void {
    this.#host.ended(this.#invocation);
  }
}

/** The abort or restart-limit handler, once; the invocation ends after it (and after its fault's commit). */
async function invokeHandler(host: SchedulerPort, invocation: Invocation, runtime: TaskRuntime): Promise<void> {
  try {
    await invokeOnce(host, invocation, runtime);
  } catch (error) {
    if (!host.closing()) deliver(host.onReport, { kind: "error", error, taskId: invocation.taskId });
  } finally {
    host.ended(invocation);
  }
}

/** An abort handler or a restart-limit handler: runs once and must leave the task terminal. */
async function invokeOnce(host: SchedulerPort, invocation: Invocation, runtime: TaskRuntime): Promise<void> {
  const current = host.session.live.get(invocation.taskId);
  if (current?.state.status !== "running" || host.closing()) return;
  const handler = invocation.mode === "abort" ? invocation.definition.abort : invocation.definition.onRestartLimit;
  let failure: unknown;
  let failed = false;
  try {
    await handler!.call(invocation.definition, current as RunningTask, runtime, invocation.context);
  } catch (error) {
    failed = true;
    failure = error;
  }
  const after = host.session.live.get(invocation.taskId);
  if (after?.state.status !== "running" || host.closing()) return;
  const what = invocation.mode === "abort" ? "Abort handler" : "Restart-limit handler";
  await commitFault(
    host,
    invocation,
    invocation.mode === "abort" ? "abort_failed" : "restart_limit",
    failed ? errorMessage(failure) : `${what} of task ${invocation.taskId} returned without a terminal outcome.`,
  );
}

/** Ends the invocation's task `faulted`, unless it is no longer running here or an abort mark came first. */
async function commitFault(host: SchedulerPort, invocation: Invocation, reason: FaultReason, message: string): Promise<void> {
  try {
    await host.session.commit((tx) => {
      const task = tx.task(invocation.taskId);
      if (task?.state.status !== "running" || host.closing()) return;
      if (invocation.mode === "run" && task.abortRequested) return; // an abort mark wins over a fault
      fault(tx, host.index, task, reason, message);
    });
  } catch (error) {
    // The fault could not be stored (storage refused): the task stays running without an invocation and
    // is taken again, after a backoff rather than at once.
    if (!host.closing()) host.backOff(error);
  }
}
