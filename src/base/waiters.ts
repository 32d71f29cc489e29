/**
 * Promises waiting for a value under a key (a task's terminal record, a submission's settled record): each
 * `wait(key)` is resolved by the next `resolve(key, value)`, and `rejectAll` ends every one (at close).
 */
export class KeyedWaiters<K, V> {
  readonly #waiting = new Map<K, Set<{ resolve: (value: V) => void; reject: (error: unknown) => void }>>();

  /** A promise for the next value under `key`. */
  wait(key: K): Promise<V> {
    return new Promise<V>((resolve, reject) => {
      let set = this.#waiting.get(key);
      if (!set) this.#waiting.set(key, (set = new Set()));
      set.add({ resolve, reject });
    });
  }

  /** Resolves every wait under `key`, each with its own `value()` (made only when somebody waits). */
  resolve(key: K, value: () => V): void {
    const set = this.#waiting.get(key);
    if (!set) return;
    this.#waiting.delete(key);
    for (const waiter of set) waiter.resolve(value());
  }

  /** Rejects every wait with `error` and forgets them. */
  rejectAll(error: () => unknown): void {
    const sets = [...this.#waiting.values()];
    this.#waiting.clear();
    for (const set of sets) for (const waiter of set) waiter.reject(error());
  }
}
