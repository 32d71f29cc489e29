import { safely } from "../base/safely.ts";
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
