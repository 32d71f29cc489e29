import { safely } from "../base/safely.ts";
import type { Harness } from "../harness.ts";
import type { Unsubscribe } from "./protocol.ts";

/**
 * The listeners of one kind of event. A listener that throws (a page that went away) never stops the others,
 * and one function subscribed twice is two subscriptions.
 */
export class Listeners<T> {
  readonly #entries = new Set<{ listener: (value: T) => void }>();

  get size(): number {
    return this.#entries.size;
  }

  add(listener: (value: T) => void): Unsubscribe {
    const entry = { listener };
    this.#entries.add(entry);
    return () => void this.#entries.delete(entry);
  }

  emit(value: T): void {
    for (const { listener } of this.#entries) safely(() => listener(value));
  }
}

/**
 * Listens to `harness`'s stored commits; the host's listeners run on the commit line, and a throw there refuses a
 * commit that was stored and keeps the later listeners from hearing it (review of 0140, M2): nothing of the listener's
 * reaches the line.
 */
export function onCommitSafely(harness: Harness, listener: Parameters<Harness["onCommit"]>[0]): Unsubscribe {
  return harness.onCommit((commit) => safely(() => listener(commit)));
}
