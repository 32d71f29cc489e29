/**
 * The slice of the Cloudflare Workers runtime API this adapter uses, typed structurally so the library needs
 * no `@cloudflare/workers-types` (whose globals clash with the DOM and Node types of the rest of the project).
 * A real `DurableObjectState` satisfies these interfaces.
 */

/** The cursor `ctx.storage.sql.exec()` returns. */
export interface SqlCursor extends Iterable<Record<string, unknown>> {
  toArray(): Record<string, unknown>[];
  /** Rows read and written so far by this statement (index entries included). */
  readonly rowsRead: number;
  readonly rowsWritten: number;
}

/** `ctx.storage.sql`. */
export interface SqlStorage {
  exec(query: string, ...bindings: unknown[]): SqlCursor;
  readonly databaseSize: number;
}

/** `ctx.storage` of a SQLite-backed Durable Object. */
export interface DurableObjectStorage {
  readonly sql: SqlStorage;
  transactionSync<T>(body: () => T): T;
  getAlarm(): Promise<number | null>;
  setAlarm(scheduledTime: number | Date): Promise<void>;
  deleteAlarm(): Promise<void>;
  /** Resolves once the writes made so far are confirmed (the output gate's own wait); where the runtime has it. */
  sync?(): Promise<void>;
}

/** A WebSocket accepted through the hibernation API (`ctx.acceptWebSocket`). */
export interface HibernatableWebSocket {
  send(message: string): void;
  close(code?: number, reason?: string): void;
  serializeAttachment(value: unknown): void;
  deserializeAttachment(): unknown;
}

/** `ctx` of a Durable Object. */
export interface DurableObjectState {
  readonly storage: DurableObjectStorage;
  readonly id: { toString(): string; readonly name?: string };
  blockConcurrencyWhile<T>(body: () => Promise<T>): Promise<T>;
  waitUntil(promise: Promise<unknown>): void;
  /** Resets the object at once (its in-memory state is gone; committed storage stays). */
  abort(reason?: string): void;
  acceptWebSocket?(socket: HibernatableWebSocket, tags?: string[]): void;
  getWebSockets?(tag?: string): HibernatableWebSocket[];
}
