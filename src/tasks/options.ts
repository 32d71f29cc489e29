import type { Clock } from "../base/clock.ts";
import type { EnvFactory } from "../env/types.ts";
import type { ReportHandler } from "../reports.ts";
import type { ResolvedSettings } from "../settings.ts";

export interface SchedulerOptions {
  settings: ResolvedSettings;
  clock: Clock;
  onReport?: ReportHandler;
  /**
   * What the layer above the kernel gives its own tasks (the agent keeps its models here). The kernel passes
   * it on untouched, as `TaskRuntime.layer`, and never reads it.
   */
  layer?: unknown;
  env?: EnvFactory;
  crashPoint?: CrashPointHandler;
  /** Receives what running tasks show live (`runtime.live`): not stored, gone in a crash. */
  onLive?: LiveHandler;
}

/** Gets a running task's live event (for example a partial answer) the moment the task reports it. */
export type LiveHandler = (live: { taskId: number; conversationId: number; event: unknown }) => void;

/**
 * Called at every named crash point. Return (or resolve) to go on; a test that wants to crash there copies
 * the database (or tells the page to reload) and never resolves.
 */
export type CrashPointHandler = (name: string, at: { taskId: number; taskKind: string; conversationId: number }) => void | Promise<void>;
