export type { AgentExtension } from "./agent.ts";
export { BUILTIN_TASKS, createRegistry } from "./builtins.ts";
export { Conversation } from "./conversation/conversation.ts";
export { scopeOf as conversationScope } from "./conversation/documents.ts";
export { Submission } from "./conversation/submission.ts";
export { deriveContext, MISSING_RESULT_TEXT } from "./conversation/transcript.ts";
export type { AnswerEvent, AnswerStream, ModelCatalog, ModelRequest } from "./model-types.ts";
export type { ServerCallAnswer, ServerCallPort, ServerCallRequest } from "./server-port.ts";
export { type ApprovalRecord, argumentsHash, type Decision, type PendingApproval } from "./tasks/approvals.ts";
export { type CompactionCheckpoint, type CompactionInput, type CompactionResult, CompactionTask } from "./tasks/compaction.ts";
export { type GenerationCheckpoint, type GenerationResult, GenerationTask } from "./tasks/generation.ts";
export type { PageCallClaimed, PageCallRecord, PageToolResult, PendingPageCall } from "./tasks/page-calls.ts";
export { type ToolCheckpoint, ToolTask, type ToolTaskInput, type ToolTaskResult } from "./tasks/tool-task.ts";
export {
  type AgentHooks,
  type AnyTool,
  type ApprovalRequest,
  type ApprovalRule,
  type ApprovalVerdict,
  type BeforeToolDecision,
  definePageTool,
  defineTool,
  type PageToolDefinition,
  type ToolApi,
  type ToolCallInfo,
  type ToolContent,
  type ToolDefinition,
  type ToolPlace,
  type ToolResult,
  type ToolResultView,
} from "./tool.ts";
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
  ToolSlotPage,
  ToolSlotView,
  UnansweredReason,
  UsageState,
  UserContent,
  UserEntryPayload,
} from "./types.ts";
export type { AnswerDelta, LiveFrame, ToolFrame } from "./view/live-delta.ts";
export { coalesceLiveFrames, type LivePace } from "./view/live-frames.ts";
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
} from "./view/view.ts";
export {
  applyViewUpdate,
  ConversationView,
  ConversationViewStore,
  prependEntries,
  type ViewSource,
  type ViewStateListener,
} from "./view/view-store.ts";
