import type { BlockedReason, TaskRecord } from "../storage/records.ts";
import type { Invocation } from "./invocation.ts";
import type { LiveIndex } from "./live-index.ts";
import type { Registry } from "./registry.ts";
import type { DefinitionResolver } from "./resolve.ts";

/** What `inspect()` says about a live task, derived from the committed record and the scheduler's memory. */
export type TaskInspectionState =
  | { kind: "running" }
  | { kind: "ready"; migrates?: boolean }
  | { kind: "waiting"; on: number[] }
  /** Without `until`: until a commit wakes it (a tool call waiting for a person's decision). */
  | { kind: "sleeping"; until?: number }
  | { kind: "completing" }
  | { kind: "blocked"; reason: BlockedReason; message: string };

export interface InspectionSource {
  readonly live: ReadonlyMap<number, TaskRecord>;
  readonly invocations: ReadonlyMap<number, Invocation>;
  readonly index: LiveIndex;
  readonly resolver: DefinitionResolver;
  readonly registry: Registry;
}

/** What a live task is doing or waiting for at `now`. Writes nothing, runs no migration. */
export function inspectTask(source: InspectionSource, record: TaskRecord, now: number): TaskInspectionState {
  const state = record.state;
  if (source.invocations.has(record.id) || state.status === "running") return { kind: "running" };
  if (state.status === "completing") return { kind: "completing" };
  const resolution = source.resolver.peek(record);
  if (!resolution.ok) return { kind: "blocked", reason: resolution.reason, message: resolution.message };
  if (state.status === "waiting") {
    const on = state.on.filter((member) => source.live.has(member));
    if (on.length > 0) return { kind: "waiting", on };
  }
  if (record.abortRequested) {
    const owned = [...source.index.children(record.id)];
    if (owned.length > 0) return { kind: "waiting", on: owned };
  }
  if (state.status === "sleeping") {
    if (state.until === undefined) return { kind: "sleeping" };
    if (state.until > now) return { kind: "sleeping", until: state.until };
  }
  return { kind: "ready", ...(record.version !== source.registry.task(record.kind)?.version ? { migrates: true } : {}) };
}
