import type { Json } from "../base/json.ts";
import type { DecisionSummary } from "../errors.ts";
import type {
  AssistantMessage,
  ImageContent,
  Message,
  SystemMessage,
  TextContent,
  ToolResultMessage,
  Usage,
  UserMessage,
} from "./model-types.ts";

/** Which model a conversation talks to: a pi-ai provider id and model id. */
export type ModelRef = { provider: string; id: string };

/**
 * The `pi.agent` document: what a conversation is configured with. `tools` lists the tool names offered to
 * the model (absent: every installed tool).
 */
export interface AgentConfig {
  model?: ModelRef;
  instructions?: string;
  tools?: string[];
}

/**
 * What `configure()` and `root(ctx, { agent })` accept. `model` may be a pi-ai `Model` (anything with
 * `provider` and `id`) or `"provider/id"`; `null` clears a field, `undefined` keeps it.
 */
export interface AgentChange {
  model?: ModelRef | string | null;
  instructions?: string | null;
  tools?: readonly string[] | null;
}

/** Built-in entry kinds (upstream §8.1). Each entry that feeds the model carries `message`. */
export type BuiltinEntryKind = "pi.user" | "pi.assistant" | "pi.tool-result" | "pi.system" | "pi.compaction" | "pi.run-failure";

export interface UserEntryPayload {
  message: UserMessage;
  /** The input submission this entry placed. */
  submissionId?: number;
  /** That submission's `requestId`, when it had one. */
  requestId?: string;
}
export interface AssistantEntryPayload {
  message: AssistantMessage;
}
export interface ToolResultEntryPayload {
  message: ToolResultMessage;
  /** Set on results the harness wrote itself (never on a tool's own result). */
  code?: ToolErrorCode;
  /** What the tool streamed with `api.output()` (all of it, or what was persisted before a crash); not sent to the model. */
  output?: string;
  /** How the call was decided, when its tool asked for a decision (a person, its approval rule, or the expiry). */
  approval?: DecisionSummary;
}
/**
 * A run that ended without an answer, kept in the transcript (never sent to the model): after any reload and
 * any later run the answer still reads as failed. Committed with the inputs' `unanswered` settlement.
 */
export interface RunFailureEntryPayload {
  /** The run's generation task. */
  taskId: number;
  reason: UnansweredReason;
  /** What went wrong, for people (the inputs' `unanswered` message). */
  error: string;
  /** The input submissions the run answered. */
  inputs: number[];
}
export interface SystemEntryPayload {
  message: SystemMessage;
}
export interface CompactionEntryPayload {
  /** The summary as the model sees it, in place of every entry before `firstKept`. */
  message: UserMessage;
  firstKept: number;
  reason: "manual";
}

/** Why the harness (not the tool) wrote a tool result. */
export type ToolErrorCode =
  | "tool_unavailable"
  | "invalid_arguments"
  | "blocked"
  | "interrupted"
  | "restart_limit"
  | "aborted"
  | "tool_error"
  /** Not run: a person, the tool's approval rule or the approval's expiry denied the call. */
  | "denied";

/** A user's content: text, or text and images. */
export type UserContent = string | (TextContent | ImageContent)[];

/** A draft entry for a `write` submission. Entries with `message` are part of the model's context. */
export interface EntryDraft {
  kind: string;
  message?: Message;
  data?: Json;
}

/** What `conversation.submit()` accepts. */
export type SubmissionDraft =
  | {
      type: "input";
      content: UserContent;
      /** Idempotence key: the same key in the same conversation returns the existing submission. */
      requestId?: string;
      /** What to do when the conversation is answering. Default `"followUp"`. */
      whenBusy?: "followUp" | "steer" | "reject";
    }
  | { type: "write"; entry: EntryDraft; requestId?: string };

/** Why an input ended without an answer. */
export type UnansweredReason = "interrupted" | "restart_limit" | "model_error" | "no_model" | "aborted" | "faulted";

/** `submission.wait()` result. */
export type SubmissionOutcome =
  | { status: "done"; answer?: { entryId: number; text: string; message: AssistantMessage }; entryId?: number }
  | { status: "unanswered"; reason: UnansweredReason; message?: string };

/** `pi.live.run`: present exactly while the conversation is answering. */
export interface LiveRun {
  taskId: number;
  /** Input submissions this run answers (steers join while it runs). */
  inputs: number[];
  startedAt: number;
}

/** `pi.live.generation`: the model request in progress. */
export interface LiveGeneration {
  attempt: number;
  /** Set by the commit right before the request is sent: a crash after it had the request in flight (S9). */
  requestedAt?: number;
  /** The streamed partial answer, persisted within `persistWithinMs`. */
  message?: AssistantMessage;
  /** The next attempt's time and the error that caused it. */
  retry?: LiveRetry;
}

/** A model request that failed and is retried at `at` (harness clock). */
export interface LiveRetry {
  at: number;
  error: string;
  /** `interrupted`: the previous request was cut off by a crash (a reload); `model_error`: the model failed. */
  cause?: "interrupted" | "model_error";
  /** How many attempts the retry policy allows in all (`retry.maxRetries + 1`), so "attempt 2 of 4". */
  maxAttempts?: number;
}

/** One tool call of the current round, in call order. Progress lives in its own document (see `ToolProgress`). */
export interface LiveToolRef {
  callId: string;
  name: string;
  /** Absent while a sequential round has not started this call yet. */
  taskId?: number;
}

/**
 * `pi.live.tool:<taskId>`: one running tool call's persisted output, written only when the tool reports some
 * and removed by its result commit. A call's status and result entry are not stored twice: views derive them
 * from the tool task and its `pi.tool-result` entry, so the common call costs two small commits.
 */
export interface ToolProgress {
  /** Output persisted so far (`api.output()`), at most `persistWithinMs` behind the tool. */
  output?: string;
  details?: Json;
}

/** A tool slot as a view shows it. */
export interface ToolSlotView extends LiveToolRef, ToolProgress {
  /**
   * `pending` until the intent commit, `running` after it, `done` once the task ended; `awaiting-approval`
   * while the call waits for a person's decision; `awaiting-page` while a page tool's call waits for a page
   * to claim it (`running` once one did).
   */
  status: "pending" | "awaiting-approval" | "awaiting-page" | "running" | "done";
  /** The result entry, once written (absent for a call whose task faulted). */
  entry?: number;
  /** For a call whose tool asks for decisions: what it waits for, or how it was decided. */
  approval?: ToolSlotApproval;
  /** For a page tool's call (decision 0028): whether it waits for a page, runs in one, or how it ended. */
  page?: ToolSlotPage;
}

/** A page tool's call as a view shows it (`arguments` while it waits for a page or runs in one). */
export interface ToolSlotPage {
  status: "waiting" | "claimed" | "answered" | "released" | "done" | "interrupted" | "withdrawn";
  arguments?: { [key: string]: Json };
  requestedAt: number;
  attempts: number;
  claimedAt?: number;
  endedAt?: number;
}

/** A call's approval as a view shows it (`arguments` only while it waits: the person decides on those). */
export interface ToolSlotApproval {
  status: "awaiting" | "approved" | "denied" | "withdrawn";
  argumentsHash: string;
  arguments?: { [key: string]: Json };
  requestedAt: number;
  expiresAt?: number;
  reason?: string;
  by?: "person" | "rule" | "expiry";
  decidedAt?: number;
}

export interface LiveFailure {
  taskId: number;
  reason: UnansweredReason | "faulted";
  message: string;
  at: number;
}

export interface LiveCompaction {
  taskId: number;
  attempt: number;
  retry?: { at: number; error: string };
}

/** The `pi.live` document as stored. */
export interface LiveState {
  run?: LiveRun;
  generation?: LiveGeneration;
  tools?: LiveToolRef[];
  /**
   * How the last run ended when it ended without an answer; cleared when the next run starts. The transcript
   * keeps it for good as a `pi.run-failure` entry.
   */
  runFailure?: LiveFailure;
  compactions?: LiveCompaction[];
  /** How the last compaction failed; cleared when the next one starts. */
  compactionFailure?: LiveFailure;
}

/** `pi.live` as a view shows it: each tool slot merged with its progress document. */
export interface LiveView extends Omit<LiveState, "tools"> {
  tools?: ToolSlotView[];
}

/** The `pi.inbox` document: admitted submissions waiting for a boundary, in id order. */
export interface InboxState {
  items: Array<{ submissionId: number; mode: "steer" | "followUp" | "write" }>;
}

/** The `pi.usage` document: tokens and cost per `provider/model`. */
export interface UsageState {
  models: Record<string, Usage>;
}

/** Live text ahead of the committed view. */
export interface StreamingView {
  /** The partial answer of attempt `attempt` of the run whose task is `taskId`. */
  answer?: StreamingAnswer;
  /** Running tools' output so far, by tool task id. */
  tools?: Readonly<Record<string, string>>;
}

export interface StreamingAnswer {
  taskId: number;
  attempt: number;
  message: AssistantMessage;
}
