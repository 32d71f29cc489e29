import type { Json } from "../base/json.ts";

/** S1: a task outcome. `completed`/`failed` come from task code, `aborted` from its abort handler, the rest from the scheduler. */
export type TaskOutcome<R = Json> =
  | { status: "completed"; result: R }
  | { status: "failed"; error: ErrorInfo; result?: R }
  | { status: "aborted"; reason?: string; result?: R }
  | { status: "faulted"; error: ErrorInfo }
  | { status: "orphaned"; reason: BlockedReason };

export interface ErrorInfo {
  message: string;
  detail?: Json;
}

/** Why a task cannot run now. Derived, never stored. */
export type BlockedReason = "missing_task" | "task_too_old" | "migration_failed";

export type Checkpoint = { phase: string } & { [key: string]: Json };
export type WaitPolicy = "allSettled" | "failFast";

/**
 * S1: the states of a task. `sleeping.until` is on the harness clock; a sleep without `until` lasts until a
 * commit wakes the task (a wait for a person: see `wakeSleeper`). `progressed` (decision 0112) is the harness's
 * own: the progress sequence of the task's last step (larger is later), kept through a crash's recovery and a
 * start, so the first pass after an open starts the task that stepped last first; absent before a first step.
 */
export type TaskState<S extends Checkpoint = Checkpoint, R = Json> =
  | { status: "pending"; checkpoint: S; progressed?: number }
  | { status: "running"; checkpoint: S; progressed?: number }
  | { status: "waiting"; checkpoint: S; on: number[]; policy: WaitPolicy; progressed?: number }
  | { status: "sleeping"; checkpoint: S; until?: number; progressed?: number }
  | { status: "completing"; outcome: TaskOutcome<R> }
  | { status: "terminal"; outcome: TaskOutcome<R> };

export type TaskStatus = TaskState["status"];

/** S1: the durable task record, stored whole as JSON in `tasks.record`. */
export interface TaskRecord<I = Json, S extends Checkpoint = Checkpoint, R = Json> {
  id: number;
  conversationId: number;
  kind: string;
  version: number;
  input: I;
  owner?: number;
  background: boolean;
  abortRequested: boolean;
  startedAt?: number;
  endedAt?: number;
  state: TaskState<S, R>;
  /** Only on live states; dropped at completing/terminal (S3). */
  memos?: Record<string, Json>;
  /** Crashes counted at open since the last progress (S4, S6). Absent when zero. */
  restarts?: number;
}

export interface ConversationRecord {
  id: number;
  /** The owning task, for conversations created by a task. */
  owner?: number;
  createdAt: number;
  /** Per-conversation configuration (model, instructions, tools…), set by the agent layer. */
  config?: { [key: string]: Json };
}

export interface EntryRecord {
  id: number;
  conversationId: number;
  kind: string;
  payload: Json;
  /** The task that wrote it, when a task did. */
  byTaskId?: number;
  at: number;
}

export type SubmissionStatus = "queued" | "running" | "done" | "unanswered";

export interface SubmissionRecord {
  id: number;
  conversationId: number;
  type: "input" | "write";
  requestId?: string;
  status: SubmissionStatus;
  payload: Json;
  /** Set when settled: `{ answer }` for done, `{ reason, detail? }` for unanswered. */
  result?: Json;
  createdAt: number;
  settledAt?: number;
}

export interface DocumentRecord {
  scope: string;
  key: string;
  value: Json;
}

/**
 * A place in the fenced log (docs/decisions/0029): the `position` of one stored transaction (1, 2, …; a group of
 * commits shares one) and the lease `epoch` under which it was made.
 */
export interface LogMark {
  epoch: number;
  position: number;
}

/**
 * A pinned lease (`ttlMs: Infinity`) a place was granted, remembered in its own storage (decision 0039): reopened
 * while its log's head is still of that epoch, the place writes on under it at once, without asking its arbiter.
 */
export interface PinnedLease {
  place: string;
  epoch: number;
}

/** Where epoch `epoch`'s stretch of a log begins: the first position it wrote (decision 0029, `pi_durable_epochs`). */
export interface EpochStart {
  epoch: number;
  start: number;
}

/** Everything one harness commit writes; storage applies it in one transaction or not at all. */
export interface Batch {
  /**
   * Set only on a harness that holds a lease: storage writes the batch only if `position` is its head + 1 and
   * `epoch` is not older than the head's (else `LogOutOfOrder` / `StaleEpoch`, nothing written), and records
   * both in the same transaction. Absent (the single-place default): no log, as before.
   */
  fence?: LogMark;
  /**
   * Set by the session on S4's recovery commit of an open without a lease (decision 0043): `tasks` are every
   * task stored `running`, each with `restarts` one more than stored and, unless `keepRunning`, `pending` with
   * the same checkpoint. A storage may write it as one set-based statement instead of row by row; one that does
   * not know it writes the tasks as any batch's. Ignored on a batch with a fence.
   */
  recount?: { keepRunning: boolean };
  nextId?: number;
  rootConversationId?: number;
  tasks: TaskRecord[];
  conversations: ConversationRecord[];
  entries: EntryRecord[];
  submissions: SubmissionRecord[];
  /** `value: null` deletes the document. */
  documents: Array<{ scope: string; key: string; value: Json | null }>;
}

/**
 * A copy's whole state at one place in its log (decision 0047): every row as one transaction-shaped `batch` whose
 * fence is the log's head there (its `nextId` and `rootConversationId` the copy's), and where each epoch's stretch of
 * that history begins. A copy rebuilt from it (`Storage.rebuild`) holds that history up to `batch.fence` and follows
 * on from there; it keeps no log tail of it.
 */
export interface Snapshot {
  batch: Batch & { fence: LogMark; nextId: number };
  epochs: EpochStart[];
}

/** A snapshot's row lists, in the order its text carries them (decision 0079). */
export type SnapshotList = "tasks" | "conversations" | "entries" | "submissions" | "documents";

/** A snapshot without its rows: where its history is (`batch.fence`, `epochs`) and its counters (decision 0084). */
export interface SnapshotHead {
  batch: Omit<Snapshot["batch"], SnapshotList>;
  epochs: EpochStart[];
}

/** Some of a snapshot's rows, list by list: what a staged rebuild writes at a time (decision 0084). */
export type SnapshotRows = Partial<Pick<Snapshot["batch"], SnapshotList>>;
