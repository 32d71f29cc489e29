export type { AgentExtension } from "./agent.ts";
export { type ApprovalRecord, argumentsHash, type Decision, type PendingApproval } from "./approvals.ts";
export { BUILTIN_TASKS, createRegistry } from "./builtins.ts";
export { type CompactionCheckpoint, type CompactionInput, type CompactionResult, CompactionTask } from "./compaction.ts";
export { deriveContext, MISSING_RESULT_TEXT } from "./context.ts";
export { Conversation, Submission } from "./conversation.ts";
export { scopeOf as conversationScope } from "./documents.ts";
export { type GenerationCheckpoint, type GenerationResult, GenerationTask } from "./generation.ts";
export type { AnswerDelta, LiveFrame, ToolFrame } from "./live-delta.ts";
export { coalesceLiveFrames, type LivePace } from "./live-frames.ts";
export {
  type AgentHooks,
  type AnyTool,
  type ApprovalRequest,
  type ApprovalRule,
  type ApprovalVerdict,
  type BeforeToolDecision,
  defineTool,
  type ToolApi,
  type ToolCallInfo,
  type ToolContent,
  type ToolDefinition,
  type ToolResult,
  type ToolResultView,
} from "./tool.ts";
export { type ToolCheckpoint, ToolTask, type ToolTaskInput, type ToolTaskResult } from "./tool-task.ts";
export type {
  AgentChange,
  AgentConfig,
  AssistantEntryPayload,
  CompactionEntryPayload,
  EntryDraft,
  InboxState,
  LiveCompaction,
  LiveFailure,
  LiveGeneration,
  LiveRetry,
  LiveRun,
  LiveState,
  LiveToolRef,
  LiveView,
  ModelRef,
  RunFailureEntryPayload,
  SubmissionDraft,
  SubmissionOutcome,
  SystemEntryPayload,
  ToolErrorCode,
  ToolProgress,
  ToolResultEntryPayload,
  ToolSlotApproval,
  ToolSlotView,
  UnansweredReason,
  UsageState,
  UserContent,
  UserEntryPayload,
} from "./types.ts";
export {
  type ConversationViewState,
  type ConversationViewUpdate,
  DEFAULT_VIEW_PAGE,
  type EntryPage,
  type LiveEvent,
  type StreamingAnswer,
  type StreamingView,
  type ViewDocuments,
  type ViewListener,
  type ViewUpdateListener,
} from "./view.ts";
export {
  applyViewUpdate,
  ConversationView,
  ConversationViewStore,
  prependEntries,
  type ViewSource,
  type ViewStateListener,
} from "./view-store.ts";
