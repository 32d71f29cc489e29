/**
 * A page's watch of one conversation on the host's harness, moved to each harness the host opens next (a rebuild, a
 * reopen: `rebind`). Decision 0103: on a copy that follows another place (`follows`: the agent runs elsewhere), a
 * conversation the copy does not hold yet is waited for while its id is one the copy's log has not reached
 * (`Harness.nextId`): a new device's page may ask for a conversation its copy has not received yet. The watch then
 * starts with the commit that brings the conversation, and the subscription is answered only then; it is `NotFound`
 * once the copy's ids pass the id without it naming a conversation (the holder drew it for something else). Anywhere
 * else — a copy that writes, an id the copy has passed — `NotFound` at once, as before.
 */
import { NotFound } from "../errors.ts";
import type { Harness } from "../harness.ts";
import type { Unsubscribe } from "./protocol.ts";

export interface ConversationWatchOptions {
  conversationId: number;
  /** Hears each view update. */
  send: Parameters<ReturnType<Harness["conversation"]>["watch"]>[0];
  /** Whether `harness` is a copy that follows another place's log (new transactions arrive here). */
  follows(harness: Harness): boolean;
  /**
   * Told when `rebind` cannot serve a watch that was answered (the harness opened again lacks the conversation):
   * it has ended (decision 0117). Before, that error was dropped and the watch stayed silent for good.
   */
  lost(error: Error): void;
}

/** A watch, bound to a harness or waiting on one for its conversation. */
export class ConversationWatch {
  readonly #options: ConversationWatchOptions;
  #stop: Unsubscribe = () => {};
  /** The harness it watches (or waits) on. */
  #on: Harness | undefined;
  #ended = false;
  /** Settles the subscription once the conversation arrived, or with `NotFound`; undefined when not waiting. */
  #settle: ((error?: unknown) => void) | undefined;

  constructor(options: ConversationWatchOptions) {
    this.#options = options;
  }

  /**
   * Starts the watch on `harness`: undefined when it is watching there now, a promise when it waits for the
   * conversation to arrive (resolved once it does). Throws `NotFound` when the conversation is not there and will not
   * come.
   */
  start(harness: Harness): Promise<void> | undefined {
    if (this.#bind(harness)) return undefined;
    return new Promise<void>((resolve, reject) => {
      this.#settle = (error) => {
        this.#settle = undefined;
        if (error === undefined) resolve();
        else reject(error);
      };
    });
  }

  /**
   * Moves the watch to `next` (the host opened its harness again). A wait that can no longer end well is refused; an
   * answered watch that cannot be served there has ended: `lost` (decision 0117). An error for `next`: the host could
   * not open a harness again at all — the watch ends with it (decision 0117, later; before, it stayed bound to the closed
   * harness, silent).
   */
  rebind(next: Harness | Error): void {
    // Started on `next` already (a watch made while the host reopened, on the harness it opened: decision 0133): it
    // goes on there, with no second snapshot.
    if (this.#ended || next === this.#on) return;
    this.#stop();
    this.#stop = () => {};
    try {
      if (next instanceof Error) throw next;
      if (this.#bind(next)) this.#settle?.();
    } catch (error) {
      this.#fail(error);
    }
  }

  /**
   * It will not come: a wait is refused; an answered watch (moved to a copy that had not reached its id, which then
   * passed it) has ended, `lost` (decision 0117 after review; before, that one was dropped silently).
   */
  #fail(error: unknown): void {
    if (this.#settle) this.#settle(error);
    else this.#options.lost(error instanceof Error ? error : new NotFound(`Conversation ${this.#options.conversationId} is gone.`));
  }

  /** Stops watching (or waiting). */
  end(): void {
    this.#ended = true;
    this.#stop();
    this.#settle?.(new NotFound(`Conversation ${this.#options.conversationId} is no longer watched.`));
  }

  /** True when watching on `harness`; false when waiting there for the conversation; throws when it will not come. */
  #bind(harness: Harness): boolean {
    const { conversationId, send } = this.#options;
    this.#on = harness;
    try {
      this.#stop = harness.conversation(conversationId).watch(send);
      return true;
    } catch (error) {
      if (!(error instanceof NotFound) || !this.#options.follows(harness) || conversationId < harness.nextId) throw error;
    }
    // On the commit line: nothing thrown here reaches it (review of 0140, M2); a watch that cannot start there fails.
    const stopCommits = harness.onCommit(() => {
      if (this.#ended) return;
      try {
        if (harness.conversationIds().includes(conversationId)) {
          stopCommits();
          this.#stop = harness.conversation(conversationId).watch(send);
          this.#settle?.();
        } else if (conversationId < harness.nextId) {
          stopCommits();
          this.#stop = () => {};
          this.#fail(notAConversation(harness, conversationId));
        }
      } catch (error) {
        this.#stop = () => {};
        this.#fail(error);
      }
    });
    this.#stop = stopCommits;
    return false;
  }
}

/** The copy's own `NotFound` for `id` (it names what the id is, when it is something else). */
function notAConversation(harness: Harness, id: number): unknown {
  try {
    harness.conversation(id);
    return new NotFound(`Conversation ${id} does not exist.`);
  } catch (error) {
    return error;
  }
}
