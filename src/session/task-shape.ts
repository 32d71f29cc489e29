import { DatabaseCorrupt } from "../errors.ts";
import type { Batch, LogMark, TaskRecord } from "../storage/records.ts";
import type { DamagedRow } from "../storage/storage.ts";

const LIVE_STATUSES = new Set(["pending", "running", "waiting", "sleeping", "completing"]);

/** What makes a live task record unrunnable (B3), or undefined when its shape is sound. */
export function taskProblem(task: TaskRecord): string | undefined {
  const state = task.state as unknown as Record<string, unknown> | undefined;
  if (typeof task.kind !== "string" || !Number.isSafeInteger(task.conversationId)) return "no kind or conversation";
  if (typeof state !== "object" || state === null) return "no state";
  if (!LIVE_STATUSES.has(state.status as string)) return `unknown status ${JSON.stringify(state.status)}`;
  if (state.status === "completing")
    return typeof state.outcome === "object" && state.outcome !== null ? undefined : "completing without an outcome";
  const checkpoint = state.checkpoint as { phase?: unknown } | undefined;
  if (typeof checkpoint !== "object" || checkpoint === null || typeof checkpoint.phase !== "string")
    return `${String(state.status)} without a checkpoint`;
  if (state.status === "waiting" && !(Array.isArray(state.on) && state.on.every((id) => Number.isSafeInteger(id))))
    return "waiting without task ids";
  if (state.status === "sleeping" && state.until !== undefined && !(typeof state.until === "number" && Number.isFinite(state.until)))
    return "sleeping until no valid time";
  return undefined;
}

/** Why a writable open refuses a database with damaged rows (B3/B4): nothing was changed. */
export function damagedRows(label: string, damaged: readonly DamagedRow[]): DatabaseCorrupt {
  const list = damaged
    .slice(0, 5)
    .map((row) => `${row.table === "tasks" ? "task" : row.table} ${row.id}: ${row.problem}`)
    .join("; ");
  return new DatabaseCorrupt(
    `${label} has ${damaged.length} damaged row${damaged.length > 1 ? "s" : ""} (${list}${damaged.length > 5 ? "; …" : ""}). ` +
      `It was left unmodified; open it with readOnly: true to inspect it.`,
  );
}

/** What makes a pushed batch unfit for a copy's mirror (its shape was checked at the wire), or undefined. */
export function followProblem(batch: Batch & { fence?: LogMark }): string | undefined {
  if (!batch.fence) return "it carries no log position";
  for (const task of batch.tasks) {
    const state = task.state as { status?: unknown; outcome?: unknown } | undefined;
    const ended = state?.status === "terminal";
    const problem = ended
      ? typeof state.outcome === "object" && state.outcome !== null
        ? undefined
        : "terminal without an outcome"
      : taskProblem(task);
    if (problem) return `task ${task.id}: ${problem}`;
  }
  return undefined;
}
