import type { Json } from "../base/json.ts";
import type { Tx } from "./tx.ts";

/** Anything documents can be read from: a `Tx` (committed plus staged) or a task runtime (committed). */
export interface DocumentReader {
  document(scope: string, key: string): Json | undefined;
}

/**
 * A document with a type: its key, and the value it has before anything is stored. Documents are stored as
 * JSON, so `T` must be a JSON shape (storage refuses the whole commit otherwise).
 */
export interface DocumentDefinition<T> {
  readonly key: string;
  /** The value in `scope`, or a fresh initial value when none is stored. */
  read(from: DocumentReader, scope: string): T;
  /** Stores `value` in `scope` with the rest of `tx`. */
  write(tx: Tx, scope: string, value: T): void;
  /** Removes the document from `scope` with the rest of `tx`. */
  remove(tx: Tx, scope: string): void;
}

/**
 * Defines a typed document, so code reads and writes `T` instead of casting JSON at every use:
 *
 * ```ts
 * const Counter = defineDocument<{ count: number }>("app.counter", () => ({ count: 0 }));
 * await conversation.commit((tx) => Counter.write(tx, "app", { count: Counter.read(tx, "app").count + 1 }), ctx);
 * ```
 */
export function defineDocument<T>(key: string, initial: () => T): DocumentDefinition<T> {
  return Object.freeze({
    key,
    read: (from: DocumentReader, scope: string): T => (from.document(scope, key) as T | undefined) ?? initial(),
    write: (tx: Tx, scope: string, value: T): void => tx.setDocument(scope, key, value as unknown as Json),
    remove: (tx: Tx, scope: string): void => tx.deleteDocument(scope, key),
  });
}
