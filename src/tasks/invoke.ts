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
export async function invoke(host: SchedulerPort, invocation: Invocation, runtime: TaskRuntime): Promise<void> {
  const id = invocation.taskId;
  try {
    if (invocation.mode !== "run") {
      await invokeOnce(host, invocation, runtime);
      return;
    }
    let failure: unknown;
    let failed = false;
    let phaseStart: Checkpoint | undefined;
    for (let first = true; ; first = false) {
      const current = host.session.live.get(id);
      if (current?.state.status !== "running" || host.closing() || current.abortRequested) break;
      if (!first) {
        if (invocation.storageFailure !== undefined) {
          // Storage refused a commit (nothing was written): run this step again later, as after a crash.
          host.backOff(invocation.storageFailure);
          break;
        }
        if (failed) {
          await commitFault(host, invocation, "phase_failed", errorMessage(failure));
          break;
        }
        if (jsonEqual(current.state.checkpoint, phaseStart)) {
          await commitFault(
            host,
            invocation,
            "no_progress",
            `Task ${current.kind} phase ${phaseStart?.phase} returned without durable progress.`,
          );
          break;
        }
        if (host.registry.task(current.kind) !== invocation.definition) break; // hand over at a phase boundary
      }
      failed = false;
      failure = undefined;
      phaseStart = current.state.checkpoint;
      const handler = invocation.definition.phases[phaseStart.phase];
      try {
        if (!handler) throw new DurableError(`Task kind ${current.kind} has no phase named "${phaseStart.phase}".`);
        await handler(current as RunningTask, runtime, invocation.context); // frozen: committed records are immutable
      } catch (error) {
        failed = true;
        failure = error;
      }
    }
  } catch (error) {
    if (!host.closing()) deliver(host.onReport, { kind: "error", error, taskId: id });
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
