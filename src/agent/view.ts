import type { Json } from "../json.ts";
import type { Batch, EntryRecord } from "../storage/records.ts";
import type { Session } from "../session/session.ts";
import { documentKey } from "../session/tx.ts";
import { AGENT, INBOX, LIVE, scopeOf, toolKey, USAGE } from "./documents.ts";
import type { AgentConfig, InboxState, LiveState, LiveView, ToolProgress, ToolSlotView, UsageState } from "./types.ts";

/** What a UI shows of a conversation: committed entries and documents, never anything uncommitted. */
export interface ConversationViewState {
  conversationId: number;
  /** Every entry of the conversation in id order (the transcript, including aborted answers). */
  entries: readonly EntryRecord[];
  /** `pi.live` with each tool slot merged with its progress. */
  live: LiveView;
  inbox: InboxState;
  usage: UsageState;
  agent: AgentConfig;
  /** A run is live (`pi.live.run`). */
  busy: boolean;
}

export type ViewListener = (view: ConversationViewState) => void;

/**
 * Builds the documents part of a view from the session's committed mirror. Each tool slot is merged with its
 * persisted output, and its status and result entry are derived from the committed tool task and entries.
 */
export function viewDocuments(session: Session, conversationId: number, entries: readonly EntryRecord[]): Omit<ConversationViewState, "conversationId" | "entries"> {
  const scope = scopeOf(conversationId);
  const read = (key: string): Json | undefined => session.documents.get(documentKey(scope, key))?.value;
  const stored = (read(LIVE) as LiveState | undefined) ?? {};
  const slot = (ref: NonNullable<LiveState["tools"]>[number]): ToolSlotView => {
    if (ref.taskId === undefined) return { ...ref, status: "pending" };
    const task = session.live.get(ref.taskId);
    const progress = (read(toolKey(ref.taskId)) as ToolProgress | undefined) ?? {};
    if (task) return { ...ref, ...progress, status: task.state.status === "running" && task.state.checkpoint.phase === "execute" ? "running" : "pending" };
    const entry = entries.find((candidate) => candidate.kind === "pi.tool-result" && candidate.byTaskId === ref.taskId);
    return { ...ref, status: "done", ...(entry ? { entry: entry.id } : {}) };
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

/**
 * A live view of one conversation. It loads the transcript once on the session line (so no commit slips
 * between the load and the first update), then follows every stored batch that touches the conversation.
 * Listeners run after the commit is durable, on a microtask, and get a fresh immutable state each time.
 */
export class ConversationViewModel {
  readonly conversationId: number;
  readonly #session: Session;
  readonly #listeners = new Set<ViewListener>();
  #entries: EntryRecord[] = [];
  #loaded = false;
  #state: ConversationViewState | undefined;
  readonly ready: Promise<void>;

  constructor(session: Session, conversationId: number) {
    this.#session = session;
    this.conversationId = conversationId;
    this.ready = session.read(async () => {
      this.#entries = await session.storage.listEntries(conversationId);
      this.#loaded = true;
      this.#rebuild();
    });
  }

  get state(): ConversationViewState | undefined {
    return this.#state;
  }

  get listening(): boolean {
    return this.#listeners.size > 0;
  }

  subscribe(listener: ViewListener): () => void {
    this.#listeners.add(listener);
    if (this.#state) {
      const state = this.#state;
      queueMicrotask(() => this.#listeners.has(listener) && listener(state));
    }
    return () => this.#listeners.delete(listener);
  }

  /** Called by the host for every stored batch. */
  apply(batch: Batch): void {
    if (!this.#loaded) return; // the load on the line includes it
    const scope = scopeOf(this.conversationId);
    const entries = batch.entries.filter((entry) => entry.conversationId === this.conversationId);
    const touched =
      entries.length > 0 ||
      batch.documents.some((document) => document.scope === scope) ||
      batch.tasks.some((task) => task.conversationId === this.conversationId) ||
      batch.conversations.some((record) => record.id === this.conversationId);
    if (!touched) return;
    if (entries.length > 0) this.#entries = [...this.#entries, ...entries];
    this.#rebuild();
  }

  #rebuild(): void {
    const state: ConversationViewState = Object.freeze({
      conversationId: this.conversationId,
      entries: Object.freeze([...this.#entries]),
      ...viewDocuments(this.#session, this.conversationId, this.#entries),
    });
    this.#state = state;
    for (const listener of this.#listeners) queueMicrotask(() => this.#listeners.has(listener) && listener(state));
  }
}
