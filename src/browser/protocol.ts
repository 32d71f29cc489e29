import type { AgentChange, AgentConfig, SubmissionDraft, SubmissionOutcome } from "../agent/types.ts";
import type { ConversationViewState } from "../agent/view.ts";
import type { Inspection } from "../harness.ts";
import type { Json } from "../json.ts";
import type { Report } from "../reports.ts";
import type { Row } from "../storage/storage.ts";
import type { TaskRecord } from "../storage/records.ts";

/** Where the worker is in its life; the page shows it. */
export type HarnessStatus =
  | { kind: "starting" }
  /** Another tab (or a worker that is still shutting down) owns the database; this one waits for it. */
  | { kind: "waiting-for-lock"; database: string }
  | { kind: "opening"; database: string }
  | { kind: "recovering"; database: string }
  | { kind: "ready"; database: string; recovered: number[]; openMs: number }
  | { kind: "failed"; error: ErrorShape }
  /** Closed cleanly: by `close()`, or because another tab took the database over. */
  | { kind: "closed"; reason: "close" | "takeover" };

export interface ErrorShape {
  name: string;
  message: string;
}

export interface CrashPointHit {
  name: string;
  taskId: number;
  taskKind: string;
  conversationId: number;
}

/** What the worker exposes over comlink. Callbacks are `Comlink.proxy` functions. */
export interface HarnessHost {
  status(): HarnessStatus;
  /** The name of a Web Lock the worker holds for its whole life (undefined without Web Locks). */
  lifeLock(): Promise<string | undefined>;
  onStatus(listener: (status: HarnessStatus) => void): void;
  onReport(listener: (report: Report) => void): void;
  /** The live task graph, after every commit that changes a task (coalesced). */
  watchTasks(listener: (inspection: Inspection) => void): void;
  createTask(kind: string, input: Json, options?: { conversationId?: number }): Promise<number>;
  getTask(id: number): Promise<TaskRecord | undefined>;
  waitForTask(id: number): Promise<TaskRecord>;
  abortTask(id: number): Promise<"marked" | "terminal">;
  inspect(): Promise<Inspection>;
  /** Starts scheduling (when the worker was served with `autoResume: false`). */
  resume(): void;
  /** Read-only SQL on the database. */
  query(sql: string, params?: Json[]): Promise<Row[]>;
  /** The database file's bytes (for "download database"). */
  exportDatabase(): Promise<Uint8Array>;
  /** Stops at the named crash point the next time it is reached: tells `listener`, then hangs there for good. */
  armCrashPoint(name: string, listener: (hit: CrashPointHit) => void): void;
  disarmCrashPoint(): void;
  /** Closes the harness and the database cleanly and releases the database lock. */
  close(): Promise<void>;
  /** Asks the tab that owns the database to close it cleanly, so this one can open it. */
  requestTakeover(): void;
  // The agent: conversations, submissions and their live views.
  /** The root conversation's id (created on first use); `agent` is applied when it changes the stored config. */
  rootConversation(agent?: AgentChange): Promise<number>;
  createConversation(agent?: AgentChange): Promise<number>;
  listConversations(): Promise<Array<{ id: number; agent: AgentConfig; busy: boolean }>>;
  configure(conversationId: number, change: AgentChange): Promise<AgentConfig>;
  /** Admits an input or write; resolves with the submission id (ConversationBusy for `whenBusy: "reject"`). */
  submit(conversationId: number, draft: SubmissionDraft): Promise<number>;
  waitForSubmission(submissionId: number): Promise<SubmissionOutcome>;
  abortConversation(conversationId: number): Promise<void>;
  compact(conversationId: number, instructions?: string): Promise<number>;
  /** The committed view now and after every commit that touches the conversation. */
  watchConversation(conversationId: number, listener: (view: ConversationViewState) => void): Promise<void>;
  /** Extra methods the app's worker added with `serveHarness({ methods })`. */
  call(method: string, args: Json[]): Promise<unknown>;
}
