import type { TaskRecord } from "../storage/records.ts";

/**
 * When the kernel next has work to do: `busy` when a task is ready to run or running now, `at` the earliest
 * `until` of a sleeper that is not due yet. What a host that must wake its process (a Durable Object's alarm)
 * asks, instead of reading the live tasks itself.
 */
export interface NextWake {
  busy: boolean;
  at?: number;
}

/**
 * The live tasks as the scheduler would take them: a task whose kind is not installed is blocked (neither busy
 * nor a wake-up: installing its kind starts work anyway); a sleep without `until` waits for a decision (the
 * decision's commit wakes it); a due or abort-marked sleeper, and a waiting task whose members are all done,
 * are work the scheduler takes now (busy). Stops looking once it is busy and has a wake-up at or before
 * `horizon` (nothing found later would change what a caller does with it).
 */
export function nextWake(
  live: ReadonlyMap<number, TaskRecord>,
  installed: (kind: string) => boolean,
  now: number,
  horizon = Number.NEGATIVE_INFINITY,
): NextWake {
  let at: number | undefined;
  let busy = false;
  for (const task of live.values()) {
    if (!installed(task.kind)) continue;
    const state = task.state;
    if (state.status === "sleeping") {
      if (task.abortRequested) busy = true;
      else if (state.until === undefined) continue;
      else if (state.until <= now) busy = true;
      else if (at === undefined || state.until < at) at = state.until;
    } else if (state.status === "waiting") {
      if (task.abortRequested || !state.on.some((member) => live.has(member))) busy = true;
    } else if (state.status !== "terminal") busy = true; // pending, running, completing
    if (busy && at !== undefined && at <= horizon) break;
  }
  return at === undefined ? { busy } : { busy, at };
}
