/**
 * The one definition of the protocol between a page and the host that owns a harness (a Web Worker, a Durable
 * Object). `HarnessService` is what a host implements; `PROTOCOL` holds one row per method: how it crosses a
 * transport (a `call` answers once, a `subscribe` takes a listener as its last argument and pushes values until
 * it is unsubscribed), its argument schema, whether a tab may send it again, its exposure class, and where it
 * is served. Host endpoints, clients, the tabs' retries and the object's doors read these rows; nothing else
 * lists the methods.
 */

import { agentChange, pageToolResult, submissionDraft } from "../agent/conversation/drafts.ts";
import type { ApprovalRecord, Decision, PendingApproval } from "../agent/tasks/approvals.ts";
import type { PageCallClaimed, PageCallRecord, PageToolResult, PendingPageCall } from "../agent/tasks/page-calls.ts";
import type { AgentChange, AgentConfig, SubmissionDraft, SubmissionOutcome } from "../agent/types.ts";
import type { ConversationViewUpdate, EntryPage } from "../agent/view/view.ts";
import type { Json } from "../base/json.ts";
import type { KeptFork } from "../follow/fork.ts";
import type { Inspection } from "../harness.ts";
import type { Report } from "../reports.ts";
import { type ArgsCheck, args, either, flag, id, integer, json, list, none, record, scalar, text } from "../shape.ts";
import type { TaskRecord } from "../storage/records.ts";
import type { Row } from "../storage/storage.ts";
import type { PendingSubscription } from "./pending-subscription.ts";
import type { HarnessStatus } from "./status.ts";

export type { ErrorShape, HarnessStatus, HeldBy, RebuildStopped, TabRole } from "./status.ts";

export interface CrashPointHit {
  name: string;
  taskId: number;
  taskKind: string;
  conversationId: number;
}

/** Which page watches for calls of which page tools (`watchPageCalls`). */
export interface PageToolsWatch {
  /**
   * The page's id for this page load: the claims it makes carry it. `providePageTools` and a chat's page tools watch
   * and claim as a page of their own each (the client's `pageId` and a random part; decision 0150's review).
   */
  pageId: string;
  /** The names of the page tools it provides. */
  tools: string[];
}

/** Stops a subscription; the host drops the listener. Calling it again does nothing. */
export type Unsubscribe = () => void;

/**
 * Told once, with the host's typed error, when a subscription that was answered has ended without its owner asking
 * (decisions 0114, 0117): the host moved it and could not serve it there (a reopen whose harness lacks the
 * conversation), or a transport that subscribes again by itself was refused. The listener hears nothing more.
 */
export type SubscriptionLost = (error: Error) => void;

/**
 * What a host serves. A subscription's listener is its last parameter but one, then an optional `lost` (decision
 * 0117): told when the host ends the subscription itself. It returns the unsubscribe function.
 */
export interface HarnessService {
  status(): HarnessStatus;
  /** The name of a Web Lock the worker holds for its whole life (undefined where there is none). */
  lifeLock(): Promise<string | undefined>;
  /** The status now and after every change. */
  onStatus(listener: (status: HarnessStatus) => void, lost?: SubscriptionLost): Unsubscribe;
  /** The last 200 reports, then every new one. */
  onReport(listener: (report: Report) => void, lost?: SubscriptionLost): Unsubscribe;
  /** The live task graph, now (once open) and after every commit that changes a task (coalesced). */
  watchTasks(listener: (inspection: Inspection) => void, lost?: SubscriptionLost): Unsubscribe;
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
  /**
   * The page leaves (its client sends it at `pagehide`): a worker that holds its object's lease hands it over at
   * once (`serveHarness({ follow })`, decision 0035); anywhere else nothing happens (a reload is still the crash).
   * A page that stays (the app moved the agent to the object) gets its answer once the object took the lease: the
   * worker's harness is open again read-only and follows the object (`status.runs` "elsewhere"; decision 0045).
   * It rejects with the object's refusal (`StaleEpoch` when the object took the lease before the tab's rest arrived,
   * which is then a fork) or `HandOverUnanswered`; the harness is open read-only, following, either way (0113).
   */
  leave(): Promise<void>;
  /**
   * Moves the agent back to this tab (decision 0038): a worker that follows its object while the object holds the
   * lease asks for it back — the object drains and releases it, the worker's copy catches up — and opens its harness
   * again under the lease (the next epoch; recovery as after a crash). Resolves once it runs here (`status.runs`).
   * Anywhere else (no follow link, or it runs here already) nothing happens.
   */
  runHere(): Promise<void>;
  /**
   * Rebuilds this copy from its object's snapshot again after the worker stopped trying by itself (decision 0078: the
   * ready status's `rebuild`); resolves once that rebuild ended (the status says how: no `rebuild` when it worked).
   * Anywhere else (no follow link with `rebuild`, nothing stopped, or the work runs here) nothing happens.
   */
  retryRebuild(): Promise<void>;
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
   * tools' output (not durable; at most one per frame where the host has frames). On a copy that follows another
   * place, a conversation the copy has not received yet is waited for (decision 0103): a promise, resolved once it
   * arrived and its snapshot was sent, or rejected `NotFound` once the copy's ids passed it without a conversation.
   * That promise can be given up (`cancel`, decision 0107): a caller that went away holds nothing at the host. Once
   * answered, a watch the host moves to a harness it opened again (a rebuild, a take-back) that lacks the conversation
   * ends: `lost` is told the `NotFound` (decision 0117).
   */
  watchConversation(
    conversationId: number,
    listener: (update: ConversationViewUpdate) => void,
    lost?: SubscriptionLost,
  ): Unsubscribe | PendingSubscription;
  /**
   * Decides a tool call that waits for a person (by call id or tool task id), exactly once: a second decision
   * rejects with `AlreadyDecided` naming the first (the same decision sent again with its `decisionId` gets
   * the record back).
   */
  decide(conversationId: number, call: string | number, decision: Decision): Promise<ApprovalRecord>;
  /** The conversation's tool calls that wait for a person, oldest first, with their arguments and age. */
  pendingApprovals(conversationId: number): Promise<PendingApproval[]>;
  /**
   * The conversation's calls of the page tools `page.tools` that wait for a page or that a page runs, now and
   * after every change (decision 0028). The page `page.pageId` provides those tools while it watches: when its
   * last watch ends (it unsubscribed, its tab closed, its socket dropped), the calls it claimed are released
   * and follow their replay policy. Moved to a harness the host opened again that lacks the conversation, it ends:
   * `lost` is told the `NotFound` (decision 0117).
   */
  watchPageCalls(
    conversationId: number,
    page: PageToolsWatch,
    listener: (calls: PendingPageCall[]) => void,
    lost?: SubscriptionLost,
  ): Unsubscribe;
  /** Claims a waiting page tool call for this page, once: another page's claim was first is `PageCallTaken`. */
  claimPageCall(conversationId: number, callId: string, claim: { claimId: string; pageId?: string }): Promise<PageCallClaimed>;
  /** Commits a claimed page tool call's result under its claim, once (a second is `PageCallEnded`). */
  answerPageCall(conversationId: number, callId: string, claimId: string, result: PageToolResult): Promise<PageCallRecord>;
  /** The `limit` committed entries before entry `beforeId` (older pages of a view, loaded on demand). */
  conversationEntries(conversationId: number, beforeId: number, limit: number): Promise<EntryPage>;
  /**
   * The forks this place keeps (decision 0039): its transactions, made while it was fenced (offline when the object
   * took over), that no history holds — each with its conversations, entries and submissions (their `requestId`s),
   * for the app to show or submit again. Kept across reloads until `dismissFork`.
   */
  forks(): Promise<KeptFork[]>;
  /** Drops a kept fork by its `id`; an unknown id does nothing. */
  dismissFork(id: string): Promise<void>;
  /** Extra methods the app added with `serveHarness({ methods })`. */
  call(method: string, ...args: Json[]): Promise<unknown>;
}

/**
 * Whether a call may be sent again to a new leader tab after the old one went with it in flight: `safe` (it
 * ends the same however often it runs: reads, waits, settings), `keyed` (a creation that runs again only with
 * an idempotency key, held at `key`), `never`. A subscription is always subscribed again.
 */
export type Retry = "safe" | "keyed" | "never";

/**
 * Who may make a call when the host serves callers it does not trust outright (a Durable Object reached from
 * the internet): `page` calls are what a page needs for its own conversations (submit, read, subscribe);
 * `power` calls change or reveal the whole host (configure, query, export, crash points, app methods, task
 * creation) and are off unless the app turns them on.
 */
export type Exposure = "page" | "power";

/** One method's row: how it crosses a transport and what a host and a client do with it. */
export interface MethodPolicy {
  /** `call` answers once; `subscribe` takes a listener as its last argument and pushes values. */
  kind: "call" | "subscribe";
  /** What is wrong with the arguments (before a subscription's listener), or undefined. */
  args: ArgsCheck;
  /** Calls only: whether a follower tab sends it again after its leader went (see `Retry`). */
  retry: Retry;
  /** For `retry: "keyed"`: the idempotency key is field `field` of argument `arg` (an object, created if absent). */
  key?: { arg: number; field: string };
  /** The exposure class, or one that depends on the arguments (a creation that also configures is a power). */
  exposure: Exposure | ((args: readonly unknown[]) => Exposure);
  /** False: a host whose life its runtime owns (a Durable Object) serves it to no page; the runtime ends it. */
  servedToPages: boolean;
  /** True: a browser tab always sends it to its own worker, never to the leader tab's. */
  local: boolean;
  /** True: the page's client answers it itself (`HostClient`), rather than forwarding it as it is. */
  answeredByClient: boolean;
  /**
   * True: a place that serves a read-only copy forwards it to the place that holds the lease, under its key
   * (`src/follow/copy-service.ts`, decision 0034); the copy refuses every other write with `RunsElsewhere`.
   */
  forwarded: boolean;
}

type Kind<F> = F extends (...args: never[]) => Unsubscribe | Promise<Unsubscribe> ? "subscribe" : "call";

const row = <K extends "call" | "subscribe", const P extends Partial<Omit<MethodPolicy, "kind" | "args">> & Pick<MethodPolicy, "exposure">>(
  kind: K,
  check: ArgsCheck,
  policy: P,
) =>
  ({
    retry: "never",
    servedToPages: true,
    local: false,
    answeredByClient: false,
    forwarded: false,
    ...policy,
    kind,
    args: check,
  }) as MethodPolicy & {
    kind: K;
  } & P;

/** A creation that takes an `AgentChange` configures too: a power then, a page call without one. */
const configuresWith = (args: readonly unknown[]): Exposure => (args[0] === undefined ? "page" : "power");

const taskOptions = record({}, { conversationId: id, key: text({ max: 200 }) });

const decision = record(
  { approved: flag },
  { reason: text({ empty: true, max: 10_000 }), argumentsHash: text({ max: 100 }), decisionId: text({ max: 200 }) },
);

const pageWatch = record({ pageId: text({ max: 200 }), tools: list(text({ max: 64 }), 1000) });
const pageClaim = record({ claimId: text({ max: 200 }) }, { pageId: text({ max: 200 }) });

/**
 * Each method's row: the one place a method is listed. Host endpoints and clients are derived from it, and
 * so are the argument checks at every host, the tabs' retries and what an object serves to which caller.
 * The compiler keeps it in step with `HarnessService`.
 */
export const PROTOCOL = {
  status: row("call", none, { retry: "safe", exposure: "page", answeredByClient: true }),
  lifeLock: row("call", none, { exposure: "page", local: true, answeredByClient: true }),
  onStatus: row("subscribe", none, { exposure: "page", answeredByClient: true }),
  onReport: row("subscribe", none, { exposure: "page" }),
  watchTasks: row("subscribe", none, { exposure: "page" }),
  createTask: row("call", args([text({ max: 200 }), json], [taskOptions]), {
    retry: "keyed",
    key: { arg: 2, field: "key" },
    exposure: "power",
  }),
  getTask: row("call", args([id]), { retry: "safe", exposure: "page" }),
  waitForTask: row("call", args([id]), { retry: "safe", exposure: "page" }),
  abortTask: row("call", args([id]), { retry: "safe", exposure: "power" }),
  inspect: row("call", none, { retry: "safe", exposure: "page" }),
  resume: row("call", none, { retry: "safe", exposure: "power" }),
  query: row("call", args([text()], [], scalar), { retry: "safe", exposure: "power" }),
  exportDatabase: row("call", none, { retry: "safe", exposure: "power" }),
  armCrashPoint: row("call", args([text({ max: 200 })]), { exposure: "power" }),
  disarmCrashPoint: row("call", none, { retry: "safe", exposure: "power" }),
  close: row("call", none, { exposure: "page", servedToPages: false, local: true }),
  requestTakeover: row("call", none, { exposure: "page", servedToPages: false, local: true }),
  leave: row("call", none, { exposure: "page", servedToPages: false, local: true }),
  runHere: row("call", none, { exposure: "page", servedToPages: false, local: true }),
  retryRebuild: row("call", none, { retry: "safe", exposure: "page", servedToPages: false }),
  rootConversation: row("call", args([], [agentChange]), { retry: "safe", exposure: configuresWith }),
  createConversation: row("call", args([], [agentChange]), { exposure: configuresWith }),
  listConversations: row("call", none, { retry: "safe", exposure: "page" }),
  configure: row("call", args([id, agentChange]), { retry: "safe", exposure: "power" }),
  submit: row("call", args([id, submissionDraft]), {
    retry: "keyed",
    key: { arg: 1, field: "requestId" },
    exposure: "page",
    forwarded: true,
  }),
  waitForSubmission: row("call", args([id]), { retry: "safe", exposure: "page" }),
  // Never sent again: it stops the runs going when it arrives, so a resend could stop one started since (0135's H1, 0139).
  abortConversation: row("call", args([id]), { exposure: "page", forwarded: true }),
  compact: row("call", args([id], [text({ empty: true, max: 10_000 })]), { exposure: "page" }),
  watchConversation: row("subscribe", args([id]), { exposure: "page", answeredByClient: true }),
  conversationEntries: row("call", args([id, id, integer(1, 1000)]), { retry: "safe", exposure: "page" }),
  // A follower tab keys every decision, so a decision its leader took with it is sent again without a second one.
  decide: row("call", args([id, either(text({ max: 200 }), id), decision]), {
    retry: "keyed",
    key: { arg: 2, field: "decisionId" },
    exposure: "page",
    forwarded: true,
  }),
  pendingApprovals: row("call", args([id]), { retry: "safe", exposure: "page" }),
  // Page tools (decision 0028): per conversation, like decide, so `authorize` checks the conversation. A claim
  // made through a leader that went is released by the next harness; the same claimId again is harmless.
  watchPageCalls: row("subscribe", args([id, pageWatch]), { exposure: "page" }),
  claimPageCall: row("call", args([id, text({ max: 200 }), pageClaim]), {
    retry: "keyed",
    key: { arg: 2, field: "claimId" },
    exposure: "page",
  }),
  answerPageCall: row("call", args([id, text({ max: 200 }), text({ max: 200 }), pageToolResult]), { exposure: "page" }),
  // Forks are the whole place's (any conversation's inputs): powers (decision 0039).
  forks: row("call", none, { retry: "safe", exposure: "power" }),
  dismissFork: row("call", args([text({ max: 200 })]), { retry: "safe", exposure: "power" }),
  call: row("call", args([text({ max: 200 })], [], json), { exposure: "power", answeredByClient: true }),
} as const satisfies { [K in keyof HarnessService]: MethodPolicy & { kind: Kind<HarnessService[K]> } };

export type MethodName = keyof HarnessService;
/** The methods a page's client answers itself (`answeredByClient`). */
export type ClientAnswered = { [K in MethodName]: (typeof PROTOCOL)[K]["answeredByClient"] extends true ? K : never }[MethodName];

/**
 * Every method that is a power, or can be one with some arguments: for a host whose pages may do anything (a
 * local demo, a test). An app on the internet lists the powers its pages need instead.
 */
export const ALL_POWERS: readonly MethodName[] = (Object.keys(PROTOCOL) as MethodName[]).filter(
  (name) => (PROTOCOL[name] as MethodPolicy).exposure !== "page",
);

/** The exposure of one call of `method` with these arguments. */
export function exposureOf(method: MethodName, args: readonly unknown[]): Exposure {
  const { exposure } = PROTOCOL[method] as MethodPolicy;
  return typeof exposure === "function" ? exposure(args) : exposure;
}

/**
 * The host as seen from the other side of a transport: every call answers asynchronously, and a subscription
 * resolves with its unsubscribe function once the host holds the listener (it rejects if the host refused it).
 * After the listener a subscription takes an optional `lost(error)`: told once, with the host's typed error, when
 * the host refused it as the transport asked it again (a reconnect, the database moving to another tab), or ended it
 * itself (decision 0117); it has ended then, and the listener hears nothing more (decision 0114).
 */
export type RemoteHost = {
  [K in keyof HarnessService]: (typeof PROTOCOL)[K]["kind"] extends "subscribe"
    ? (...args: Parameters<HarnessService[K]>) => Promise<Unsubscribe>
    : (...args: Parameters<HarnessService[K]>) => Promise<Awaited<ReturnType<HarnessService[K]>>>;
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
 * Where a page keeps its live clients (a `Set`: of its worker, or of a Durable Object by URL), for the same helpers: a
 * follower tab's own worker waits for the lock and a page of an object has none, so readiness is the client's
 * (`waitForReady`). A client leaves the set when it is gone.
 */
export const PAGE_TEST_HOOK = "__piDurableClients";
