import { type Context, waitFor } from "../base/context.ts";
import type { ConfirmPosition } from "../session/fence.ts";

/**
 * How far the other place acknowledged this place's log, and the waits on it (decision 0032): a mirror moves it
 * as acknowledgements arrive (`moved(head)`), and `confirm` is what `LeaseOptions.confirm` takes — it resolves
 * once the acknowledged head reached a position (at once when it already has).
 */
export class Acknowledged {
  #head: number;
  /** Waits on positions not acknowledged yet, in the order they were asked for. */
  readonly #waits = new Set<{ position: number; resolve: () => void }>();

  constructor(head = 0) {
    this.#head = head;
  }

  /** The last position the other place said it holds. */
  get head(): number {
    return this.#head;
  }

  /** The other place holds the log up to `head` (an older or repeated acknowledgement changes nothing). */
  moved(head: number): void {
    if (head <= this.#head) return;
    this.#head = head;
    for (const wait of this.#waits) {
      if (wait.position > head) continue;
      this.#waits.delete(wait);
      wait.resolve();
    }
  }

  /** For `LeaseOptions.confirm`: resolves once `position` is acknowledged; rejects when `context` is cancelled. */
  readonly confirm: ConfirmPosition = (position: number, context: Context): Promise<void> => {
    if (position <= this.#head) return Promise.resolve();
    let entry: { position: number; resolve: () => void } | undefined;
    const acknowledged = new Promise<void>((resolve) => {
      entry = { position, resolve };
      this.#waits.add(entry);
    });
    return waitFor(acknowledged, context).finally(() => this.#waits.delete(entry!));
  };
}
