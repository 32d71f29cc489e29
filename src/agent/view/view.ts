import type { Json } from "../../base/json.ts";
import { documentKey } from "../../session/keys.ts";
import type { Batch, EntryRecord, TaskRecord } from "../../storage/records.ts";
import {
  AGENT,
  APPROVAL_PHASE,
  approvalKey,
  dropUndefined,
  INBOX,
  LIVE,
  PAGE_CALL_PREFIX,
  PAGE_PHASE,
  pageCallKey,
  SERVER_PHASE,
  scopeOf,
  TOOL_PREFIX,
  toolKey,
  USAGE,
} from "../conversation/documents.ts";
import type { AgentSession } from "../kernel.ts";
import type { AssistantMessage } from "../model-types.ts";
import type { ApprovalCheckpoint, ApprovalRecord } from "../tasks/approvals.ts";
import type { PageCallRecord, PageCheckpoint } from "../tasks/page-calls.ts";
import type {
  AgentConfig,
  InboxState,
  LiveState,
  LiveView,
  StreamingView,
  ToolProgress,
  ToolSlotApproval,
  ToolSlotPage,
  ToolSlotView,
  UsageState,
} from "../types.ts";
import type { LiveFrame } from "./live-delta.ts";

/** What a UI shows of a conversation: committed entries and documents, and (marked apart) live text. */
export interface ConversationViewState {
  conversationId: number;
  /**
   * Entries in id order (the transcript, including aborted answers): all of them in the worker; on the page
   * the last page and whatever older entries were loaded on demand (see `hasOlder`).
   */
  entries: readonly EntryRecord[];
  /** `pi.live` with each tool slot merged with its progress. */
  live: LiveView;
  inbox: InboxState;
  usage: UsageState;
  agent: AgentConfig;
  /** A run is live (`pi.live.run`). */
  busy: boolean;
  /** The conversation has entries older than the first of `entries` (not loaded yet). */
  hasOlder?: boolean;
  /**
   * Not yet durable: the model's partial answer and tools' output newer than the last commit. A crash loses
   * it (only what was committed comes back); each commit supersedes it. Absent when the commit is current.
   */
  streaming?: StreamingView;
}

export type ViewListener = (view: ConversationViewState) => void;

export type { StreamingAnswer, StreamingView } from "../types.ts";

/** `next` laid over `previous`: its answer replaces the earlier one, its tools' output replaces theirs. */
export function mergeStreaming(previous: StreamingView | undefined, next: StreamingView): StreamingView {
  const answer = next.answer ?? previous?.answer;
  const tools = next.tools || previous?.tools ? { ...previous?.tools, ...next.tools } : undefined;
  return { ...(answer ? { answer } : {}), ...(tools ? { tools } : {}) };
}

/** What the agent's tasks show live through `runtime.live` (each carries everything so far, not a chunk). */
export type LiveEvent = { kind: "answer"; attempt: number; message: AssistantMessage } | { kind: "tool-output"; output: string };

/** The documents part of a view. */
export type ViewDocuments = Pick<ConversationViewState, "live" | "inbox" | "usage" | "agent" | "busy">;

/**
 * How a view travels to a page: one snapshot (the last page of entries), then per commit only what it
 * changed (entries appended, documents replaced), and between commits live frames that are not durable. A
 * feed's live frames carry everything so far (`StreamingView`); across a transport each carries only what is
 * new since the frame before (`LiveFrame`, see `coalesceLiveFrames`).
 */
export type ConversationViewUpdate =
  | ({ type: "snapshot"; conversationId: number; entries: readonly EntryRecord[]; hasOlder: boolean } & ViewDocuments)
  | ({ type: "commit"; entries?: readonly EntryRecord[] } & Partial<ViewDocuments>)
  | ({ type: "live" } & LiveFrame);

export type ViewUpdateListener = (update: ConversationViewUpdate) => void;

/** A page of older entries (`Conversation.entriesBefore`). */
export interface EntryPage {
  entries: EntryRecord[];
  /** There are entries older than the first of this page. */
  hasOlder: boolean;
}

/** How many entries a page-side view opens with (the last page); older ones load on demand. */
export const DEFAULT_VIEW_PAGE = 200;

/**
 * Builds the documents part of a view from the session's committed mirror. Each tool slot is merged with its
 * persisted output, and its status and result entry are derived from the committed tool task and entries
 * (`resultOf` gives the `pi.tool-result` entry a tool task wrote).
 */
export function viewDocuments(
  session: AgentSession,
  conversationId: number,
  resultOf: (taskId: number) => number | undefined,
): ViewDocuments {
  const scope = scopeOf(conversationId);
  const read = (key: string): Json | undefined => session.documents.get(documentKey(scope, key))?.value;
  const stored = (read(LIVE) as LiveState | undefined) ?? {};
  const slot = (ref: NonNullable<LiveState["tools"]>[number]): ToolSlotView => {
    if (ref.taskId === undefined) return { ...ref, status: "pending" };
    const task = session.live.get(ref.taskId);
    const progress = (read(toolKey(ref.taskId)) as ToolProgress | undefined) ?? {};
    const record = read(approvalKey(ref.callId)) as ApprovalRecord | undefined;
    const approval = record?.taskId === ref.taskId ? slotApproval(record, task) : undefined;
    const pageRecord = read(pageCallKey(ref.callId)) as PageCallRecord | undefined;
    const page = pageRecord?.taskId === ref.taskId ? slotPage(pageRecord, task) : undefined;
    const withApproval = { ...(approval ? { approval } : {}), ...(page ? { page } : {}) };
    if (task) {
      const phase = task.state.status === "running" ? task.state.checkpoint.phase : undefined;
      const running = phase === "execute" || phase === SERVER_PHASE || page?.status === "claimed";
      const status = running
        ? "running"
        : approval?.status === "awaiting"
          ? "awaiting-approval"
          : page?.status === "waiting"
            ? "awaiting-page"
            : "pending";
      return { ...ref, ...progress, status, ...withApproval };
    }
    const entry = resultOf(ref.taskId);
    return { ...ref, status: "done", ...(entry !== undefined ? { entry } : {}), ...withApproval };
  };
  const { tools, ...rest } = stored;
  const live: LiveView = { ...rest, ...(tools ? { tools: tools.map(slot) } : {}) };
  return {
    live: structuredClone(live),
    inbox: structuredClone((read(INBOX) as InboxState | undefined) ?? { items: [] }),
    usage: structuredClone((read(USAGE) as UsageState | undefined) ?? { models: {} }),
    agent: structuredClone((read(AGENT) as AgentConfig | undefined) ?? {}),
    busy: stored.run !== undefined,
  };
}

/** An approval record as a tool slot shows it; the arguments come from the waiting task's checkpoint. */
function slotApproval(record: ApprovalRecord, task: TaskRecord | undefined): ToolSlotApproval {
  const { taskId: _taskId, callId: _callId, toolName: _toolName, ...rest } = record;
  const state = task?.state;
  const waiting = record.status === "awaiting" && state && "checkpoint" in state && state.checkpoint.phase === APPROVAL_PHASE;
  return { ...rest, ...(waiting ? { arguments: (state.checkpoint as unknown as ApprovalCheckpoint).arguments } : {}) };
}

/** A page-call record as a tool slot shows it; the arguments (for the page that runs it) while it waits or runs. */
function slotPage(record: PageCallRecord, task: TaskRecord | undefined): ToolSlotPage {
  const state = task?.state;
  const open = (record.status === "waiting" || record.status === "claimed") && state && "checkpoint" in state;
  const checkpoint = open ? (state.checkpoint as unknown as PageCheckpoint) : undefined;
  return {
    status: record.status,
    requestedAt: record.requestedAt,
    attempts: record.attempts,
    ...(record.status === "claimed" && record.claim ? { claimedAt: record.claim.at } : {}),
    ...(checkpoint?.phase === PAGE_PHASE ? { arguments: checkpoint.arguments } : {}),
    ...(record.endedAt !== undefined ? { endedAt: record.endedAt } : {}),
  };
}

/** Tool task id → its `pi.tool-result` entry, for the entries given. */
export function indexToolResults(entries: readonly EntryRecord[], into = new Map<number, number>()): Map<number, number> {
  for (const entry of entries) if (entry.kind === "pi.tool-result" && entry.byTaskId !== undefined) into.set(entry.byTaskId, entry.id);
  return into;
}

/**
 * The committed view of one conversation as updates. It loads the last `page` entries once on the session
 * line (so no commit slips between the load and the first update), then turns every stored batch that
 * touches the conversation into a `commit` update of what changed, so an update's size and cost follow the
 * commit, not the conversation's length. Listeners get a snapshot first and run after the commit is durable,
 * on a microtask. Live events of the conversation's tasks pass through as `live` updates.
 */
export class ConversationFeed {
  readonly conversationId: number;
  readonly page: number;
  readonly #session: AgentSession;
  readonly #listeners = new Set<ViewUpdateListener>();
  /** The newest `page` committed entries. */
  #tail: EntryRecord[] = [];
  #hasOlder = false;
  readonly #results = new Map<number, number>();
  #documents: ViewDocuments | undefined;
  readonly ready: Promise<void>;

  constructor(session: AgentSession, conversationId: number, page: number) {
    this.#session = session;
    this.conversationId = conversationId;
    this.page = page;
    this.ready = session.read(async () => {
      const loaded = await session.storage.listEntries(conversationId, Number.isFinite(page) ? { last: page + 1 } : {});
      this.#hasOlder = loaded.length > page;
      this.#tail = this.#hasOlder ? loaded.slice(1) : loaded;
      indexToolResults(this.#tail, this.#results);
      this.#documents = this.#readDocuments();
      for (const listener of this.#listeners) this.#send(listener, this.#snapshot());
    });
  }

  get listening(): boolean {
    return this.#listeners.size > 0;
  }

  /** `listener` gets a snapshot (once loaded), then an update per commit and live frames. */
  subscribe(listener: ViewUpdateListener): () => void {
    this.#listeners.add(listener);
    if (this.#documents) this.#send(listener, this.#snapshot());
    return () => this.#listeners.delete(listener);
  }

  /** Called by the agent host for every stored batch. */
  apply(batch: Batch): void {
    if (!this.#documents) return; // the load on the line includes it
    const scope = scopeOf(this.conversationId);
    const entries = batch.entries.filter((entry) => entry.conversationId === this.conversationId);
    const keys = new Set(batch.documents.filter((document) => document.scope === scope).map((document) => document.key));
    const liveChanged =
      [...keys].some((key) => key === LIVE || key.startsWith(TOOL_PREFIX) || key.startsWith(PAGE_CALL_PREFIX)) ||
      batch.tasks.some((task) => task.conversationId === this.conversationId) ||
      entries.some((entry) => entry.kind === "pi.tool-result");
    if (entries.length === 0 && !liveChanged && !keys.has(INBOX) && !keys.has(USAGE) && !keys.has(AGENT)) return;
    if (entries.length > 0) {
      indexToolResults(entries, this.#results);
      this.#tail.push(...entries);
      if (this.#tail.length > this.page) {
        this.#tail.splice(0, this.#tail.length - this.page);
        this.#hasOlder = true;
      }
    }
    const documents = (this.#documents = this.#readDocuments());
    const update: ConversationViewUpdate = {
      type: "commit",
      ...(entries.length > 0 ? { entries } : {}),
      ...(liveChanged ? { live: documents.live, busy: documents.busy } : {}),
      ...(keys.has(INBOX) ? { inbox: documents.inbox } : {}),
      ...(keys.has(USAGE) ? { usage: documents.usage } : {}),
      ...(keys.has(AGENT) ? { agent: documents.agent } : {}),
    };
    for (const listener of this.#listeners) this.#send(listener, update);
  }

  /** A live event of one of the conversation's tasks (not durable). */
  live(taskId: number, event: LiveEvent): void {
    if (!this.#documents || this.#listeners.size === 0) return;
    let update: ConversationViewUpdate;
    // The provider goes on changing its partial: send a copy of it as it is now.
    if (event.kind === "answer")
      update = { type: "live", answer: { taskId, attempt: event.attempt, message: dropUndefined(event.message) } };
    else if (event.kind === "tool-output") update = { type: "live", tools: { [taskId]: event.output } };
    else return;
    for (const listener of this.#listeners) this.#send(listener, update);
  }

  #snapshot(): ConversationViewUpdate {
    return {
      type: "snapshot",
      conversationId: this.conversationId,
      entries: [...this.#tail],
      hasOlder: this.#hasOlder,
      ...this.#documents!,
    };
  }

  #readDocuments(): ViewDocuments {
    return viewDocuments(this.#session, this.conversationId, (taskId) => this.#results.get(taskId));
  }

  #send(listener: ViewUpdateListener, update: ConversationViewUpdate): void {
    queueMicrotask(() => this.#listeners.has(listener) && listener(update));
  }
}
