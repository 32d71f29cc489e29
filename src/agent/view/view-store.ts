import { safely } from "../../base/safely.ts";
import { ViewUpdateOutOfOrder } from "../../errors.ts";
import type { EntryRecord } from "../../storage/records.ts";
import type { AssistantMessage } from "../model-types.ts";
import { LiveFrameDecoder } from "./live-delta.ts";
import {
  type ConversationViewState,
  type ConversationViewUpdate,
  DEFAULT_VIEW_PAGE,
  type EntryPage,
  mergeStreaming,
  type StreamingView,
} from "./view.ts";

/**
 * Applies one update to a view and returns the next immutable state (the previous one is left as it was).
 * A snapshot replaces everything; a commit appends its entries and replaces the documents it carries; a live
 * frame replaces the streaming text it carries. Streaming text is kept only while it is ahead of the
 * committed view of the same answer attempt or running tool, so each commit supersedes what it covers.
 * A frame of appended text builds on `state.streaming`; a `ConversationViewStore` keeps what it received
 * instead, so it can follow such frames also after a commit covered the text they build on.
 */
export function applyViewUpdate(state: ConversationViewState | undefined, update: ConversationViewUpdate): ConversationViewState {
  return applyWith(new LiveFrameDecoder(state?.streaming), state, update);
}

function applyWith(
  received: LiveFrameDecoder,
  state: ConversationViewState | undefined,
  update: ConversationViewUpdate,
): ConversationViewState {
  if (update.type === "snapshot") {
    received.committed(update);
    const { type: _type, entries, ...documents } = update;
    return freeze({ ...documents, entries: [...entries] });
  }
  if (!state) throw new ViewUpdateOutOfOrder(`A ${update.type} update arrived before the view's snapshot: subscribe again to get one.`);
  if (update.type === "commit") {
    received.committed(update);
    const { type: _type, entries, ...documents } = update;
    const next: ConversationViewState = {
      ...state,
      ...documents,
      entries: entries && entries.length > 0 ? [...state.entries, ...entries] : state.entries,
    };
    return freeze(withStreaming(next, state.streaming));
  }
  const { type: _type, ...frame } = update;
  return freeze(withStreaming(state, mergeStreaming(state.streaming, received.decode(frame))));
}

/** Older entries loaded on demand go before the loaded ones. */
export function prependEntries(state: ConversationViewState, older: readonly EntryRecord[], hasOlder: boolean): ConversationViewState {
  const first = state.entries[0]?.id ?? Infinity;
  return freeze({ ...state, entries: [...older.filter((entry) => entry.id < first), ...state.entries], hasOlder });
}

/** The streaming part of `state` that is still ahead of its committed part. */
function withStreaming(state: ConversationViewState, streaming: StreamingView | undefined): ConversationViewState {
  const { streaming: _old, ...committed } = state;
  const ahead = streaming ? aheadOf(committed, streaming) : undefined;
  return ahead ? { ...committed, streaming: ahead } : committed;
}

function aheadOf(committed: ConversationViewState, streaming: StreamingView): StreamingView | undefined {
  const { answer } = streaming;
  const generation = committed.live.generation;
  const keepAnswer =
    answer !== undefined &&
    committed.live.run?.taskId === answer.taskId &&
    generation?.attempt === answer.attempt &&
    generation.retry === undefined &&
    messageSize(answer.message) > (generation.message ? messageSize(generation.message) : 0);
  const tools: Record<string, string> = {};
  for (const [taskId, output] of Object.entries(streaming.tools ?? {})) {
    const slot = committed.live.tools?.find((candidate) => candidate.taskId === Number(taskId));
    if (slot && slot.status !== "done" && output.length > (slot.output?.length ?? 0)) tools[taskId] = output;
  }
  const hasTools = Object.keys(tools).length > 0;
  if (!keepAnswer && !hasTools) return undefined;
  return { ...(keepAnswer ? { answer } : {}), ...(hasTools ? { tools } : {}) };
}

/** How far a partial answer got: it only grows while it streams, so a longer one is newer. */
function messageSize(message: AssistantMessage): number {
  let size = 0;
  for (const block of message.content) {
    if (block.type === "text") size += block.text.length;
    else if (block.type === "thinking") size += block.thinking.length;
    else if (block.type === "toolCall") size += 1 + JSON.stringify(block.arguments ?? {}).length;
  }
  return size;
}

function freeze(state: ConversationViewState): ConversationViewState {
  // A live frame keeps the entries array, frozen already: no second freeze per frame.
  if (!Object.isFrozen(state.entries)) Object.freeze(state.entries);
  return Object.freeze(state);
}

export type ViewStateListener = (state: ConversationViewState) => void;

/**
 * The page's copy of a conversation view: feed it the updates of a subscription and read `state`, the same
 * immutable `ConversationViewState` the worker would build, or subscribe to each new state.
 *
 *   const store = new ConversationViewStore();
 *   for (const update of updates) store.apply(update);
 *   render(store.state);
 */
export class ConversationViewStore {
  #state: ConversationViewState | undefined;
  readonly #received = new LiveFrameDecoder();
  readonly #listeners = new Set<ViewStateListener>();

  /** The current view (undefined until the snapshot arrived). */
  get state(): ConversationViewState | undefined {
    return this.#state;
  }

  apply(update: ConversationViewUpdate): ConversationViewState {
    return this.#set(applyWith(this.#received, this.#state, update));
  }

  /** Adds older entries (a page loaded on demand) in front of the loaded ones. */
  prepend(older: readonly EntryRecord[], hasOlder: boolean): ConversationViewState {
    if (!this.#state) throw new ViewUpdateOutOfOrder("Older entries arrived before the view's snapshot.");
    return this.#set(prependEntries(this.#state, older, hasOlder));
  }

  /** Calls `listener` with every new state (and with the current one, if there is one). */
  subscribe(listener: ViewStateListener): () => void {
    this.#listeners.add(listener);
    if (this.#state) listener(this.#state);
    return () => this.#listeners.delete(listener);
  }

  #set(state: ConversationViewState): ConversationViewState {
    this.#state = state;
    // One listener's throw never keeps the others from the state, nor reaches the update's sender (decision 0117).
    for (const listener of this.#listeners) safely(() => listener(state));
    return state;
  }
}

/** Where a page-side view gets its updates and older pages (a client of the host that owns the harness). */
export interface ViewSource {
  /**
   * Subscribes to the view's updates; resolves with the unsubscribe function. `lost` is told once when the
   * subscription ended without its owner (the host refused it when it was asked again: decision 0114).
   */
  watch(listener: (update: ConversationViewUpdate) => void, lost: (error: Error) => void): Promise<() => void>;
  /** The `limit` entries before `beforeId`. */
  entriesBefore(beforeId: number, limit: number): Promise<EntryPage>;
}

/**
 * A conversation as a page holds it: the last page of entries and the documents from the snapshot, kept
 * current by the deltas and live frames of one subscription, older entries loaded on demand.
 *
 *   const view = await client.openConversation(id);
 *   view.subscribe(render);                // each new immutable ConversationViewState
 *   if (view.state.hasOlder) await view.loadOlder();
 *   view.onLost((error) => showError(error)); // the host refused it when a reconnect asked it again
 *   view.close();
 *
 * A view ends by its owner's `close()`, or — lost — when the host refuses its subscription as the transport asks it
 * again (a reconnect, the database moving to another tab: the conversation is gone, the caller may no longer watch
 * it): then `lost` holds the host's typed error, each `onLost` listener is told it once, and the state stays as it
 * was (decision 0114).
 */
export class ConversationView {
  readonly #store = new ConversationViewStore();
  readonly #source: ViewSource;
  #unsubscribe: (() => void) | undefined;
  #closed = false;
  #lost: Error | undefined;
  readonly #lostListeners = new Set<(error: Error) => void>();
  #loading: Promise<boolean> | undefined;

  private constructor(source: ViewSource) {
    this.#source = source;
  }

  /** Subscribes and resolves once the snapshot is in. */
  static async open(source: ViewSource): Promise<ConversationView> {
    const view = new ConversationView(source);
    let arrived!: () => void;
    const snapshot = new Promise<void>((resolve) => (arrived = resolve));
    let failed!: (error: Error) => void;
    const refused = new Promise<never>((_, reject) => (failed = reject));
    refused.catch(() => {});
    view.#unsubscribe = await source.watch(
      (update) => {
        if (view.#closed) return;
        view.#store.apply(update);
        if (update.type === "snapshot") arrived();
      },
      (error) => {
        if (view.#closed) return;
        view.#closed = true;
        view.#lost = error;
        failed(error); // lost before its snapshot: the open fails with the host's error
        // Each is told, whatever one of them throws; nothing reaches the transport that told the view (decision 0117).
        for (const listener of view.#lostListeners) safely(() => listener(error));
        view.#lostListeners.clear();
      },
    );
    await Promise.race([snapshot, refused]);
    return view;
  }

  /** Why the view ended without its owner's `close()` (the host's typed error), or undefined (decision 0114). */
  get lost(): Error | undefined {
    return this.#lost;
  }

  /**
   * Calls `listener` once with the host's error if the view is lost (at once if it is already); not on `close()`.
   * Returns the function that stops listening.
   */
  onLost(listener: (error: Error) => void): () => void {
    if (this.#lost) {
      listener(this.#lost);
      return () => {};
    }
    if (this.#closed) return () => {};
    this.#lostListeners.add(listener);
    return () => void this.#lostListeners.delete(listener);
  }

  get state(): ConversationViewState {
    return this.#store.state!;
  }

  /** Calls `listener` with the current state and every new one; returns the unsubscribe function. */
  subscribe(listener: ViewStateListener): () => void {
    return this.#store.subscribe(listener);
  }

  /** Loads the `limit` entries before the first loaded one; resolves with whether older ones remain. */
  loadOlder(limit: number = DEFAULT_VIEW_PAGE): Promise<boolean> {
    this.#loading ??= (async () => {
      try {
        const first = this.state.entries[0];
        if (!first || !this.state.hasOlder) return false;
        const page = await this.#source.entriesBefore(first.id, limit);
        return this.#store.prepend(page.entries, page.hasOlder).hasOlder === true;
      } finally {
        this.#loading = undefined;
      }
    })();
    return this.#loading;
  }

  /** Stops the subscription (the state stays as it was). */
  close(): void {
    if (this.#closed) return; // closed already (a cancel after the open and the owner's own close both close it)
    this.#closed = true;
    this.#lostListeners.clear();
    this.#unsubscribe?.();
  }
}
