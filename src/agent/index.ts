import "./builtins.ts";

export { Conversation, Submission } from "./conversation.ts";
export { defineTool, type ToolDefinition, type AnyTool, type ToolApi, type ToolResult, type ToolContent, type AgentHooks, type ToolCallInfo, type ToolResultView, type BeforeToolDecision } from "./tool.ts";
export type { AgentExtension } from "./agent.ts";
export { GenerationTask, type GenerationCheckpoint, type GenerationResult } from "./generation.ts";
export { ToolTask, type ToolCheckpoint, type ToolTaskInput, type ToolTaskResult } from "./tool-task.ts";
export { CompactionTask, type CompactionCheckpoint, type CompactionInput, type CompactionResult } from "./compaction.ts";
export { deriveContext, MISSING_RESULT_TEXT } from "./context.ts";
export { scopeOf as conversationScope } from "./documents.ts";
export { DEFAULT_VIEW_PAGE, type ConversationViewState, type ViewListener, type ConversationViewUpdate, type ViewUpdateListener, type StreamingView, type StreamingAnswer, type LiveEvent, type EntryPage, type ViewDocuments } from "./view.ts";
export { coalesceLiveFrames, type RequestFrame } from "./live-frames.ts";
export { ConversationView, ConversationViewStore, applyViewUpdate, prependEntries, type ViewSource, type ViewStateListener } from "./view-store.ts";
export type {
  AgentChange,
  AgentConfig,
  ModelRef,
  SubmissionDraft,
  SubmissionOutcome,
  UnansweredReason,
  UserContent,
  EntryDraft,
  LiveState,
  LiveView,
  LiveRun,
  LiveGeneration,
  LiveRetry,
  LiveToolRef,
  ToolProgress,
  ToolSlotView,
  LiveFailure,
  LiveCompaction,
  InboxState,
  UsageState,
  ToolErrorCode,
  UserEntryPayload,
  AssistantEntryPayload,
  ToolResultEntryPayload,
  SystemEntryPayload,
  CompactionEntryPayload,
} from "./types.ts";
