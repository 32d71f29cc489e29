/**
 * What a mirror stored and its object has not acknowledged yet, in log order (decision 0122): each transaction's
 * log mark and its log text, never the batch itself. A step's batch then dies young; only its text lives until the
 * acknowledgement (a young collection during a job copied a thousand batches and their texts before).
 */
import type { LoggedText } from "./chunks.ts";
import type { LoggedBatch } from "./handover.ts";

/** A stored transaction as a push carries it: its text as the storage gave it, else its JSON now. */
export function loggedText(batch: LoggedBatch, text?: string): LoggedText {
  return { epoch: batch.fence.epoch, position: batch.fence.position, text: text ?? JSON.stringify(batch) };
}

export class Unacked {
  #epochs: number[] = [];
  #positions: number[] = [];
  /**
   * Each one's log text as the storage gave it (pushed as it is, decision 0093), or the batch when the storage gave
   * none (in memory): serialized when it is pushed, as before.
   */
  #bodies: Array<string | LoggedBatch> = [];

  /** Keeps a transaction just stored (after every one kept before it). */
  add(batch: LoggedBatch, text: string | undefined): void {
    this.#epochs.push(batch.fence.epoch);
    this.#positions.push(batch.fence.position);
    this.#bodies.push(text ?? batch);
  }

  /** Forgets those at or before `head` (the object holds them). */
  acknowledge(head: number): void {
    const positions = this.#positions;
    let first = 0;
    while (first < positions.length && positions[first]! <= head) first++;
    if (first === 0) return;
    this.#epochs = this.#epochs.slice(first);
    this.#positions = positions.slice(first);
    this.#bodies = this.#bodies.slice(first);
  }

  /** Those after position `after` up to `through`, in order, as a push carries them. */
  texts(after: number, through = Number.POSITIVE_INFINITY): LoggedText[] {
    const out: LoggedText[] = [];
    const positions = this.#positions;
    for (let index = 0; index < positions.length; index++) {
      const position = positions[index]!;
      if (position <= after || position > through) continue;
      const body = this.#bodies[index]!;
      out.push({ epoch: this.#epochs[index]!, position, text: typeof body === "string" ? body : JSON.stringify(body) });
    }
    return out;
  }
}
