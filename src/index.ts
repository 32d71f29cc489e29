export * from "./agent/index.ts";
export type { Clock, TimerKind } from "./base/clock.ts";
export type { Context } from "./base/context.ts";
export { BACKGROUND_CONTEXT } from "./base/context.ts";
export type { Json } from "./base/json.ts";
export { MemoryEnv, memoryEnvs } from "./env/memory.ts";
export type { ExecutionEnv } from "./env/types.ts";
export * from "./errors.ts";
export type { Fork, ForkedTransaction, KeptFork } from "./follow/fork.ts";
export { Harness, type HarnessOptions, type Inspection, type Recovery } from "./harness.ts";
export { type CallerLimits, DEFAULT_CALLER_LIMITS } from "./host/caller-bounds.ts";
export type { Report, ReportHandler } from "./reports.ts";
export { isRetryable, RETRYABLE } from "./retryable.ts";
export { type DocumentDefinition, type DocumentReader, defineDocument } from "./session/documents.ts";
export type { CreateTaskOptions, Tx } from "./session/tx.ts";
export { DEFAULT_SETTINGS, type ResolvedSettings, resolveSettings, type Settings } from "./settings.ts";
export { MemoryStorage } from "./storage/memory.ts";
export type {
  Batch,
  BlockedReason,
  Checkpoint,
  ConversationRecord,
  DocumentRecord,
  EntryRecord,
  ErrorInfo,
  SubmissionRecord,
  TaskOutcome,
  TaskRecord,
  TaskState,
  TaskStatus,
} from "./storage/records.ts";
export type { SqliteDatabase, SqliteTransaction, SqlRow, SqlValue } from "./storage/sqlite/database.ts";
export type { EntryRange, Row, Storage, StoredState } from "./storage/storage.ts";
export type { TaskInspectionState } from "./tasks/inspect.ts";
export type { CrashPointHandler } from "./tasks/options.ts";
export { defineExtension, type Extension, Registry } from "./tasks/registry.ts";
export {
  type AnyTaskDefinition,
  defineTask,
  type NextTaskState,
  type RunningTask,
  type TaskDefinition,
  type TaskRuntime,
} from "./tasks/types.ts";
export { appendFileTool, editFileTool, fileTools, listFilesTool, readFileTool, removeFileTool, writeFileTool } from "./tools/files.ts";
