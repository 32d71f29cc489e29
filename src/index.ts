export { Harness, ConversationHandle, type HarnessOptions, type Inspection, type Recovery } from "./harness.ts";
export { defineTask, type TaskDefinition, type TaskRuntime, type RunningTask, type NextTaskState, type AnyTaskDefinition } from "./tasks/types.ts";
export { createRegistry, defineExtension, Registry, type Extension } from "./tasks/registry.ts";
export type { TaskInspectionState, CrashPointHandler } from "./tasks/scheduler.ts";
export { Tx, type CreateTaskOptions } from "./session/tx.ts";
export type { Report, ReportHandler } from "./reports.ts";
export { resolveSettings, DEFAULT_SETTINGS, type Settings, type ResolvedSettings } from "./settings.ts";
export type { Clock } from "./clock.ts";
export type { Json } from "./json.ts";
export type { Context } from "./context.ts";
export { BACKGROUND_CONTEXT } from "./context.ts";
export type {
  TaskRecord,
  TaskState,
  TaskStatus,
  TaskOutcome,
  Checkpoint,
  ErrorInfo,
  BlockedReason,
  ConversationRecord,
  EntryRecord,
  SubmissionRecord,
  DocumentRecord,
  Batch,
} from "./storage/records.ts";
export type { Storage, StoredState, Row, EntryRange } from "./storage/storage.ts";
export { MemoryStorage } from "./storage/memory.ts";
export { SqliteStorage } from "./storage/sqlite/storage.ts";
export type { SqliteDatabase, SqliteTransaction, SqlValue, SqlRow } from "./storage/sqlite/database.ts";
export * from "./errors.ts";
export * from "./agent/index.ts";
export type { ExecutionEnv } from "./env/types.ts";
export { MemoryEnv, memoryEnvs } from "./env/memory.ts";
export { fileTools, readFileTool, listFilesTool, writeFileTool, editFileTool, appendFileTool, removeFileTool } from "./tools/files.ts";
