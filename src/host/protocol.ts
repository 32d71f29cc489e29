/**
 * The one definition of the protocol between a page and the host that owns a harness (a Web Worker, a Durable
 * Object). `HarnessHost` is what a host implements; `PROTOCOL` says, for each of its methods, how it crosses a
 * transport: a `call` answers once, a `subscribe` takes a listener as its last argument and pushes values until
 * it is unsubscribed. Host endpoints and clients are derived from these two; nothing else lists the methods.
 */
import type { AgentChange, AgentConfig, SubmissionDraft, SubmissionOutcome } from "../agent/types.ts";
import type { ConversationViewUpdate, EntryPage } from "../agent/view.ts";
import type { Inspection, Recovery } from "../harness.ts";
import type { Json } from "../json.ts";
import type { Report } from "../reports.ts";
import type { TaskRecord } from "../storage/records.ts";
import type { Row } from "../storage/storage.ts";

/** Where the host is in its life; the page shows it. */
export type HarnessStatus =
  | { kind: "starting" }
  /** Another tab (or a worker that is still shutting down) owns the database; this one waits for it. */
  | { kind: "waiting-for-lock"; database: string }
  | { kind: "opening"; database: string }
  | { kind: "recovering"; database: string }
  /**
   * `recovery`: how the last harness stopped and which tasks a crash cut off (`recovered`: their ids). `role`,
   * set by a browser page's client: "leader" when this tab's worker has the database open, "follower" when
   * the tab reaches the leader tab's worker (the status is then the leader's).
   */
  | { kind: "ready"; database: string; recovered: number[]; recovery: Recovery; openMs: number; role?: TabRole }
  /**
   * A Durable Object reached by URL: the connection dropped and the page reconnects (`attempt`, the next in
   * `retryInMs`). Calls made now wait for the connection; a reconnect brings the host's own status back.
   */
  | { kind: "reconnecting"; attempt: number; retryInMs: number }
  | { kind: "failed"; error: ErrorShape }
  /** Closed cleanly: by `close()`, or because another tab took the database over. */
  | { kind: "closed"; reason: "close" | "takeover" };

/** A browser tab's part: its own worker has the database open (leader), or it talks to the leader's (follower). */
export type TabRole = "leader" | "follower";

/** An error as data: its stable name, its message, and the fields its class adds (`SchemaTooNew.found`, …). */
export interface ErrorShape {
  name: string;
  message: string;
  details?: Record<string, Json>;
}

export interface CrashPointHit {
  name: string;
  taskId: number;
  taskKind: string;
  conversationId: number;
}

/** Stops a subscription; the host drops the listener. Calling it again does nothing. */
export type Unsubscribe = () => void;

/** What a host serves. A subscription's listener is its last parameter; it returns the unsubscribe function. */
export interface HarnessHost {
  status(): HarnessStatus;
  /** The name of a Web Lock the worker holds for its whole life (undefined where there is none). */
  lifeLock(): Promise<string | undefined>;
  /** The status now and after every change. */
  onStatus(listener: (status: HarnessStatus) => void): Unsubscribe;
  /** The last 200 reports, then every new one. */
  onReport(listener: (report: Report) => void): Unsubscribe;
  /** The live task graph, now (once open) and after every commit that changes a task (coalesced). */
  watchTasks(listener: (inspection: Inspection) => void): Unsubscribe;
  /** `key`: the same key returns the same task (also after a reload); another kind or input is a `TaskKeyConflict`. */
  createTask(kind: string, input: Json, options?: { conversationId?: number; key?: string }): Promise<number>;
  getTask(id: number): Promise<TaskRecord | undefined>;
  waitForTask(id: number): Promise<TaskRecord>;
  abortTask(id: number): Promise<"marked" | "terminal">;
  inspect(): Promise<Inspection>;
  /** Starts scheduling (when the host was served with `autoResume: false`). */
  resume(): void;
  /** Read-only SQL on the database. */
  query(sql: string, ...params: Json[]): Promise<Row[]>;
  /** The database file's bytes (for "download database"). */
  exportDatabase(): Promise<Uint8Array>;
  /**
   * Resolves when the named crash point is next reached; the phase then hangs there for good (until the test
   * crashes the host, or a clean close). Rejects with `CrashPointsOff` on a host served with `crashPoints: false`.
   */
  armCrashPoint(name: string): Promise<CrashPointHit>;
  disarmCrashPoint(): void;
  /** Closes the harness and the database cleanly and releases the database lock. */
  close(): Promise<void>;
  /** Asks the host that owns the database to close it cleanly, so this one can open it. */
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
  /**
   * The view as updates (apply them with a `ConversationViewStore`): a snapshot of the last 200 entries and
   * the documents, then what each commit changed, and between commits live frames of the partial answer and
   * tools' output (not durable; at most one per frame where the host has frames).
   */
  watchConversation(conversationId: number, listener: (update: ConversationViewUpdate) => void): Unsubscribe;
  /** The `limit` committed entries before entry `beforeId` (older pages of a view, loaded on demand). */
  conversationEntries(conversationId: number, beforeId: number, limit: number): Promise<EntryPage>;
  /** Extra methods the app added with `serveHarness({ methods })`. */
  call(method: string, ...args: Json[]): Promise<unknown>;
}

export type MethodKind = "call" | "subscribe";

/** How each method crosses a transport. The compiler keeps it in step with `HarnessHost`. */
export const PROTOCOL = {
  status: "call",
  lifeLock: "call",
  onStatus: "subscribe",
  onReport: "subscribe",
  watchTasks: "subscribe",
  createTask: "call",
  getTask: "call",
  waitForTask: "call",
  abortTask: "call",
  inspect: "call",
  resume: "call",
  query: "call",
  exportDatabase: "call",
  armCrashPoint: "call",
  disarmCrashPoint: "call",
  close: "call",
  requestTakeover: "call",
  rootConversation: "call",
  createConversation: "call",
  listConversations: "call",
  configure: "call",
  submit: "call",
  waitForSubmission: "call",
  abortConversation: "call",
  compact: "call",
  watchConversation: "subscribe",
  conversationEntries: "call",
  call: "call",
} as const satisfies { [K in keyof HarnessHost]: HarnessHost[K] extends (...args: never[]) => Unsubscribe ? "subscribe" : "call" };

export type MethodName = keyof HarnessHost;
export type CallName = { [K in MethodName]: (typeof PROTOCOL)[K] extends "call" ? K : never }[MethodName];
export type SubscriptionName = { [K in MethodName]: (typeof PROTOCOL)[K] extends "subscribe" ? K : never }[MethodName];

/** A subscription's arguments before the listener, and the values its listener receives. */
type Split<F> = F extends (...args: [...infer Args, (value: infer Value) => void]) => Unsubscribe ? { args: Args; value: Value } : never;
export type SubscriptionArgs<K extends SubscriptionName> = Split<HarnessHost[K]>["args"];
export type SubscriptionValue<K extends SubscriptionName> = Split<HarnessHost[K]>["value"];

/**
 * The host as seen from the other side of a transport: every call answers asynchronously, and a subscription
 * resolves with its unsubscribe function once the host holds the listener (it rejects if the host refused it).
 */
export type RemoteHost = {
  [K in keyof HarnessHost]: (typeof PROTOCOL)[K] extends "subscribe"
    ? (...args: Parameters<HarnessHost[K]>) => Promise<Unsubscribe>
    : (...args: Parameters<HarnessHost[K]>) => Promise<Awaited<ReturnType<HarnessHost[K]>>>;
};

export function isMethod(name: string): name is MethodName {
  return Object.hasOwn(PROTOCOL, name);
}

/**
 * Where a browser worker served with crash points on (the default) keeps its host, for the helpers of
 * pi-durable-web/testing that run inside the worker (Playwright's `worker.evaluate`). Documented with
 * `ServeHarnessOptions.crashPoints`; `crashPoints: false` leaves it unset.
 */
export const TEST_HOOK = "__piDurableHost";

/**
 * Where a page keeps its live worker clients (a `Set`), for the same helpers: a follower tab's own worker
 * waits for the lock, so its readiness is its client's (`waitForReady`). A client leaves the set when it is gone.
 */
export const PAGE_TEST_HOOK = "__piDurableClients";
