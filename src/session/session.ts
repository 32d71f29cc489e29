import type { Clock } from "../clock.ts";
import { DatabaseCorrupt, HarnessClosed, InvalidCommit, ReadOnlySession } from "../errors.ts";
import { deepFreeze } from "../json.ts";
import type { Report } from "../reports.ts";
import { SerialQueue } from "../serial.ts";
import type { Batch, ConversationRecord, DocumentRecord, SubmissionRecord, TaskRecord } from "../storage/records.ts";
import type { DamagedRow, Storage } from "../storage/storage.ts";
import { documentKey, KernelTx, type TxActor } from "./tx.ts";

/** What one stored commit changed; delivered synchronously to session listeners, in commit order. */
export interface Published {
  batch: Batch;
  reports: readonly Report[];
}

/**
 * The one mutation line of a harness. Commits run strictly one after another: the callback stages writes on a
 * `KernelTx`, the batch is stored in one transaction, and only then do the in-memory mirrors (live tasks, current
 * documents, open submissions, conversations) change and listeners hear of it. A commit that fails at any
 * point changes nothing, in storage or in memory.
 */
export class Session {
  readonly storage: Storage;
  readonly clock: Clock;
  readonly readOnly: boolean;
  readonly live = new Map<number, TaskRecord>();
  readonly conversations = new Map<number, ConversationRecord>();
  readonly documents = new Map<string, DocumentRecord>();
  readonly openSubmissions = new Map<number, SubmissionRecord>();
  nextId = 1;
  rootConversationId: number | undefined;
  /** Rows a read-only open left out because they are damaged (a writable open refuses them). */
  damaged: DamagedRow[] = [];
  /** The commit line: commits, recovery and reads on it run one after another. */
  readonly #line = new SerialQueue();
  #sealed = false;
  readonly #listeners = new Set<(published: Published) => void>();

  private constructor(storage: Storage, clock: Clock, readOnly: boolean) {
    this.storage = storage;
    this.clock = clock;
    this.readOnly = readOnly;
  }

  static async open(storage: Storage, clock: Clock, readOnly: boolean): Promise<Session> {
    const session = new Session(storage, clock, readOnly || storage.readOnly);
    const state = await storage.load();
    // B3/B4: rows storage could not parse, and live tasks whose state the scheduler cannot run. A writable
    // open refuses them (nothing was changed); a read-only one leaves them out of its mirror, for inspection.
    const damaged = [...(state.damaged ?? [])];
    const liveTasks = state.liveTasks.filter((task) => {
      const problem = taskProblem(task);
      if (problem) damaged.push({ table: "tasks", id: task.id, problem });
      return !problem;
    });
    if (damaged.length > 0 && !session.readOnly) {
      const list = damaged
        .slice(0, 5)
        .map((row) => `${row.table === "tasks" ? "task" : row.table} ${row.id}: ${row.problem}`)
        .join("; ");
      throw new DatabaseCorrupt(
        `${storage.label} has ${damaged.length} damaged row${damaged.length > 1 ? "s" : ""} (${list}${damaged.length > 5 ? "; …" : ""}). ` +
          `It was left unmodified; open it with readOnly: true to inspect it.`,
      );
    }
    session.damaged = damaged;
    session.nextId = state.nextId;
    session.rootConversationId = state.rootConversationId;
    for (const task of liveTasks) session.live.set(task.id, deepFreeze(task));
    for (const conversation of state.conversations) session.conversations.set(conversation.id, conversation);
    for (const document of state.documents) session.documents.set(documentKey(document.scope, document.key), document);
    for (const submission of state.openSubmissions) session.openSubmissions.set(submission.id, submission);
    return session;
  }

  get sealed(): boolean {
    return this.#sealed;
  }

  /** Listens to every stored commit. Listeners run synchronously on the line and must not commit. */
  subscribe(listener: (published: Published) => void): () => void {
    this.#listeners.add(listener);
    return () => this.#listeners.delete(listener);
  }

  /**
   * Runs `body` on the line and stores what it staged. `body` must be synchronous. The result is the body's
   * return value, once the commit is durable.
   */
  commit<T>(body: (tx: KernelTx) => T, actor?: TxActor, admitWhileSealed = false): Promise<T> {
    if (this.#sealed && !admitWhileSealed) return Promise.reject(new HarnessClosed());
    if (this.readOnly) return Promise.reject(new ReadOnlySession("A commit"));
    const run = async (): Promise<T> => {
      const tx = new KernelTx(this, actor);
      const result = body(tx);
      if (typeof (result as { then?: unknown } | null)?.then === "function") {
        throw new InvalidCommit(
          "A commit callback returned a Promise: it must be synchronous. Do the async work before the commit and stage only writes in it.",
        );
      }
      if (tx.hasChecks) await tx.runChecks();
      const batch = tx.batch();
      if (batch) {
        try {
          await this.storage.apply(batch);
        } catch (error) {
          throw markStorageFailure(error);
        }
        this.#publish(batch);
      }
      for (const listener of this.#listeners) {
        if (batch || tx.reports.length) listener({ batch: batch ?? emptyBatch, reports: tx.reports });
      }
      for (const callback of tx.callbacks) callback();
      return result;
    };
    return this.#line.run(run);
  }

  /**
   * S4 at open, on the line, in one commit: every running task of the mirror becomes pending with restarts + 1
   * (with `keepRunning` it stays running and only restarts grow). It is an ordinary batch through
   * `storage.apply`, so every backend recovers the same way; listeners hear of it like any commit.
   */
  recoverRunning(keepRunning = false): Promise<number[]> {
    if (this.#sealed) return Promise.reject(new HarnessClosed());
    if (this.readOnly) return Promise.reject(new ReadOnlySession("A commit"));
    const run = async (): Promise<number[]> => {
      const tasks: TaskRecord[] = [];
      for (const task of this.live.values()) {
        if (task.state.status !== "running") continue;
        const state = keepRunning ? task.state : { status: "pending" as const, checkpoint: task.state.checkpoint };
        tasks.push({ ...task, state, restarts: (task.restarts ?? 0) + 1 });
      }
      if (tasks.length === 0) return [];
      const batch = { ...emptyBatch, tasks };
      try {
        await this.storage.apply(batch);
      } catch (error) {
        throw markStorageFailure(error);
      }
      this.#publish(batch);
      for (const listener of this.#listeners) listener({ batch, reports: [] });
      return tasks.map((task) => task.id).sort((a, b) => a - b);
    };
    return this.#line.run(run);
  }

  /** Runs `body` on the line without writing (a consistent read of the mirrors). */
  read<T>(body: () => T | Promise<T>): Promise<T> {
    const run = async () => body();
    return this.#line.run(run);
  }

  /** No commit is admitted after this; commits already on the line settle. */
  seal(): Promise<void> {
    const drained = this.#line.idle;
    this.#sealed = true;
    return drained;
  }

  /** Commits admitted before the seal still run: used by close for its final bookkeeping commit. */
  commitWhileSealing<T>(body: (tx: KernelTx) => T): Promise<T> {
    return this.commit(body, undefined, true);
  }

  #publish(batch: Batch): void {
    if (batch.nextId !== undefined) this.nextId = batch.nextId;
    if (batch.rootConversationId !== undefined) this.rootConversationId = batch.rootConversationId;
    for (const task of batch.tasks) {
      deepFreeze(task);
      if (task.state.status === "terminal") this.live.delete(task.id);
      else this.live.set(task.id, task);
    }
    for (const conversation of batch.conversations) this.conversations.set(conversation.id, conversation);
    for (const document of batch.documents) {
      const key = documentKey(document.scope, document.key);
      if (document.value === null) this.documents.delete(key);
      else this.documents.set(key, { scope: document.scope, key: document.key, value: document.value });
    }
    for (const submission of batch.submissions) {
      if (submission.status === "queued" || submission.status === "running") this.openSubmissions.set(submission.id, submission);
      else this.openSubmissions.delete(submission.id);
    }
  }
}

const LIVE_STATUSES = new Set(["pending", "running", "waiting", "sleeping", "completing"]);

/** What makes a live task record unrunnable (B3), or undefined when its shape is sound. */
function taskProblem(task: TaskRecord): string | undefined {
  const state = task.state as unknown as Record<string, unknown> | undefined;
  if (typeof task.kind !== "string" || !Number.isSafeInteger(task.conversationId)) return "no kind or conversation";
  if (typeof state !== "object" || state === null) return "no state";
  if (!LIVE_STATUSES.has(state.status as string)) return `unknown status ${JSON.stringify(state.status)}`;
  if (state.status === "completing")
    return typeof state.outcome === "object" && state.outcome !== null ? undefined : "completing without an outcome";
  const checkpoint = state.checkpoint as { phase?: unknown } | undefined;
  if (typeof checkpoint !== "object" || checkpoint === null || typeof checkpoint.phase !== "string")
    return `${String(state.status)} without a checkpoint`;
  if (state.status === "waiting" && !(Array.isArray(state.on) && state.on.every((id) => Number.isSafeInteger(id))))
    return "waiting without task ids";
  if (state.status === "sleeping" && !(typeof state.until === "number" && Number.isFinite(state.until))) return "sleeping without a time";
  return undefined;
}

const storageFailures = new WeakSet<object>();

function markStorageFailure(error: unknown): unknown {
  if (typeof error === "object" && error !== null) storageFailures.add(error);
  return error;
}

/** True for an error that storage threw while applying a commit (full quota, I/O error): nothing was written. */
export function isStorageFailure(error: unknown): boolean {
  return typeof error === "object" && error !== null && storageFailures.has(error);
}

const emptyBatch: Batch = { tasks: [], conversations: [], entries: [], submissions: [], documents: [] };
