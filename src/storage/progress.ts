import type { Checkpoint, TaskState } from "./records.ts";

/**
 * A state's progress stamp (decision 0112): `progressed` when it is a safe integer, otherwise undefined (absent, or a
 * value the harness did not write: it ranks as absent and is not carried on).
 */
export function progressOf(state: TaskState): number | undefined {
  const progressed = (state as { progressed?: unknown }).progressed;
  return typeof progressed === "number" && Number.isSafeInteger(progressed) ? progressed : undefined;
}

/**
 * The `pending` state a crash's recovery (S4) or a close leaves a running task in: the same checkpoint, and its
 * progress stamp when it has one (the first pass after the next open ranks by it). SQLite's recovery statement
 * (`recount-owed.ts`) spells the same JSON.
 */
export function pendingAt(state: { checkpoint: Checkpoint; progressed?: number }): TaskState {
  const progressed = progressOf(state as TaskState);
  return progressed === undefined
    ? { status: "pending", checkpoint: state.checkpoint }
    : { status: "pending", checkpoint: state.checkpoint, progressed };
}
