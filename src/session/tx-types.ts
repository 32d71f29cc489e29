/** What a commit body sees (`Tx`) and what makes one (`TxSource`, `TxActor`); the kernel's transaction is tx.ts. */
import type { Clock } from "../base/clock.ts";
import type { Json } from "../base/json.ts";
import type { JsonLimits } from "../limits.ts";
import type { Report } from "../reports.ts";
import type { ConversationRecord, DocumentRecord, EntryRecord, SubmissionRecord, TaskRecord } from "../storage/records.ts";
import type { Storage } from "../storage/storage.ts";

export interface CreateTaskOptions {
  /** Defaults to the committing task's conversation, or the conversation whose `commit` this is. */
  conversationId?: number;
  /** A background task is owned by its conversation, not by the committing task; it outlives it. */
  background?: boolean;
  /**
   * Creates the task once. A later create with the same key returns the same task instead of a new one —
   * also after a reload, and also once the task has ended; the same key with another kind or input is a
   * `TaskKeyConflict` (nothing written), and so is a key already used in another conversation. Keys are
   * unique in the database and kept for its whole life.
   */
  key?: string;
}

/** Who is committing: a conversation (host code) or a task (its runtime). Sets defaults for new records. */
export interface TxActor {
  conversationId: number;
  taskId?: number;
}

/** What a transaction reads and mints from: the session's committed mirrors (the `Session` is the one source). */
export interface TxSource {
  readonly clock: Clock;
  readonly storage: Storage;
  readonly live: ReadonlyMap<number, TaskRecord>;
  readonly conversations: ReadonlyMap<number, ConversationRecord>;
  readonly documents: ReadonlyMap<string, DocumentRecord>;
  readonly openSubmissions: ReadonlyMap<number, SubmissionRecord>;
  readonly nextId: number;
  /** `settings.limits`: what a value entering through a transaction may be. */
  readonly limits: JsonLimits;
  /** Hand-over task keys and when each expires. */
  readonly handoverKeys: ReadonlyMap<string, number>;
}

/** What creating a task needs of its definition: the kind, its version and the first checkpoint. */
// biome-ignore lint/suspicious/noExplicitAny: the default accepts a kind of any input type, as a registry's definitions are
export interface TaskKind<I = any> {
  readonly name: string;
  readonly version: number;
  initial(input: I): unknown;
}

/**
 * One atomic commit in the making, as a commit callback (`conversation.commit`, `runtime.commit`) gets it.
 * Reads see the committed state plus what this transaction staged; nothing is visible to anyone else until
 * the whole transaction is stored. The callback is synchronous, so a commit is one uninterrupted step on
 * the session line. Tasks change state only through the scheduler's rules (a phase returns its next state);
 * there is no raw write of a task or submission record here.
 */
export interface Tx {
  /** The harness clock. */
  now(): number;
  /** A live task as committed or staged here; terminal tasks are not in memory (use `harness.getTask`). */
  task(id: number): TaskRecord | undefined;
  /** Every live task, staged versions first. */
  liveTasks(): Iterable<TaskRecord>;
  /** Creates a task from `definition` (installed or not: an uninstalled kind waits, blocked, until it is). */
  createTask<I>(definition: TaskKind<I>, input: I, options?: CreateTaskOptions): number;
  conversation(id: number): ConversationRecord | undefined;
  createConversation(options?: { owner?: number; config?: ConversationRecord["config"] }): number;
  /** Appends an entry (to the committing conversation unless `conversationId` says otherwise); returns its id. */
  appendEntry(entry: { kind: string; payload: Json; conversationId?: number }): number;
  /** The entries this transaction appended so far. */
  readonly stagedEntries: readonly EntryRecord[];
  document(scope: string, key: string): Json | undefined;
  setDocument(scope: string, key: string, value: Json): void;
  deleteDocument(scope: string, key: string): void;
  submission(id: number): SubmissionRecord | undefined;
  openSubmissions(conversationId: number): SubmissionRecord[];
  /** An asynchronous check run before the batch is stored; if it throws, nothing is stored. */
  check(check: () => Promise<void>): void;
  /** A report delivered once the commit is stored. */
  report(report: Report): void;
  /** Runs once the commit is stored. */
  afterCommit(callback: () => void): void;
}
