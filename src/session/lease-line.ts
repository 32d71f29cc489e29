import type { Clock } from "../base/clock.ts";
import { LogOutOfOrder, StaleEpoch } from "../errors.ts";
import type { Batch, LogMark } from "../storage/records.ts";
import type { Fence } from "./fence.ts";

/**
 * The part of the commit line that writes under a lease (decision 0029): each batch stamped with its log position
 * before it is stored, each stored one told to the log's listeners, and the loss of the lease reported once. Apart
 * from `session.ts` because it is the log's rule, not the line's; `Session` extends it, so a commit calls these
 * methods on itself as before (no object between them, nothing made per commit). Without a fence each is one check.
 */
export abstract class LeaseLine {
  abstract readonly clock: Clock;
  /**
   * The lease this place writes under (decision 0029), or undefined in the single-place default, where no
   * transaction carries a position and nothing about commits changes.
   */
  readonly fence: Fence | undefined;
  /** Hears each stored transaction of a fenced session with its position (and its log text, when storage gave it). */
  readonly #logListeners = new Set<LogListener>();
  /** Called once, when the fence is found lost (the harness then stops as after a crash). */
  onFenceLost: ((reason: Error) => void) | undefined;

  protected constructor(fence: Fence | undefined) {
    this.fence = fence;
  }

  /** Listens to the log: each stored transaction of a fenced session, stamped with its position, in order. */
  subscribeLog(listener: LogListener): () => void {
    this.#logListeners.add(listener);
    return () => this.#logListeners.delete(listener);
  }

  /** Gives a fenced session's batch its position; throws (and reports the loss once) when the lease is gone. */
  protected stamp(batch: Batch): void {
    const fence = this.fence;
    if (!fence) return;
    try {
      fence.stamp(batch, this.clock.now());
    } catch (lost) {
      this.#lost(lost as Error);
      throw lost;
    }
  }

  /** True (and the fence lost) when storage refused a batch by the log's rule: another writer moved it on. */
  protected fenceRefused(error: unknown): boolean {
    if (!this.fence || !isFenceError(error)) return false;
    this.fence.lose(error as Error);
    this.#lost(error as Error);
    return true;
  }

  /** The lease is gone for `reason` (a refused renewal): nothing more is written, the loss is reported once. */
  loseFence(reason: Error): void {
    this.fence?.lose(reason);
    this.#lost(reason);
  }

  #lost(reason: Error): void {
    const notify = this.onFenceLost;
    this.onFenceLost = undefined;
    notify?.(reason);
  }

  /**
   * A batch was stored: a fenced session's log moves on and its listeners hear of it, with the text its log row holds
   * when the storage returned it (`Storage.apply`; decision 0093: a mirror pushes that text as it is).
   */
  protected logged(batch: Batch, text?: string | void): void {
    const fence = this.fence;
    if (!fence) return;
    fence.stored(batch);
    // A listener's throw is its owner's bug (decision 0117's rule): the batch is stored, its commit settles and the
    // other listeners are told — before, the throw failed the stored commit's turn and wedged the line (review of 0124).
    for (const listener of this.#logListeners)
      try {
        listener(batch as Batch & { fence: LogMark }, text === undefined ? undefined : text);
      } catch {}
  }
}

/**
 * Hears a stored transaction of a fenced session: the batch, stamped with its position, and — when the storage gave it
 * — its log text (`JSON.stringify(batch)`, text for text). The batch and the text must not be changed.
 */
export type LogListener = (batch: Batch & { fence: LogMark }, text: string | undefined) => void;

/** Storage refused a batch by the log's rule (another writer moved the log on). */
export function isFenceError(error: unknown): boolean {
  return error instanceof StaleEpoch || error instanceof LogOutOfOrder;
}
