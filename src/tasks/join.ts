import { DurableError } from "../errors.ts";
import { deliver } from "../reports.ts";
import type { Invocation } from "./invocation.ts";
import type { SchedulerOptions } from "./options.ts";

/**
 * How a close (or a drained hand-over) waits for the phases still running: joined at most `settings.closeTimeoutMs` on
 * the harness clock, then given up on. Apart from `scheduler.ts` because it is close's one timed wait, not part of the
 * drain, and runs once per harness, never per step.
 */

/**
 * Waits for every invocation to return, at most `settings.closeTimeoutMs` on the harness clock. Phases still
 * running then are given up on (their runtime refuses every later call: each is marked ended and dropped from
 * `invocations`) and their task ids returned.
 */
export async function joinInvocations(invocations: Map<number, Invocation>, options: SchedulerOptions): Promise<Set<number>> {
  const joining = [...invocations.values()];
  const joined = Promise.all(joining.map((invocation) => invocation.done));
  const limit = options.settings.closeTimeoutMs;
  if (joining.length === 0 || limit === Infinity) {
    await joined;
    return new Set();
  }
  let cancel: (() => void) | undefined;
  const timedOut = await Promise.race([
    joined.then(() => false),
    new Promise<boolean>((resolve) => (cancel = options.clock.setTimer(limit, () => resolve(true)))),
  ]);
  cancel?.();
  if (!timedOut) return new Set();
  const stuck = joining.filter((invocation) => invocations.get(invocation.taskId) === invocation);
  for (const invocation of stuck) {
    invocation.ended = true;
    invocations.delete(invocation.taskId);
  }
  const ids = stuck.map((invocation) => invocation.taskId);
  deliver(options.onReport, {
    kind: "error",
    error: new DurableError(
      `close(): the phase of task${ids.length > 1 ? "s" : ""} ${ids.join(", ")} ignored its abort signal for settings.closeTimeoutMs (${limit} ms); ` +
        `close went on without it. The task stays running in storage and the next open counts a restart, as after a crash.`,
    ),
  });
  return new Set(ids);
}
