import { type Json, jsonEqual } from "../base/json.ts";
import { InvalidCommit, TaskKeyConflict } from "../errors.ts";
import { admitJson, type What } from "../limits.ts";
import type { Report } from "../reports.ts";
import type { Batch, Checkpoint, ConversationRecord, EntryRecord, SubmissionRecord, TaskRecord } from "../storage/records.ts";
import type { GroupOverlay } from "./group.ts";
import { type IdKind, mirroredKind, notFound } from "./ids.ts";
import { documentKey, HANDOVER_KEY_PREFIX, TASK_KEYS } from "./keys.ts";
import type { CreateTaskOptions, TaskKind, Tx, TxActor, TxSource } from "./tx-types.ts";

export type { CreateTaskOptions, TaskKind, Tx, TxActor, TxSource } from "./tx-types.ts";

/** How long a hand-over key is kept: five times the longest a follower keeps resending a call (60 s). */
export const HANDOVER_KEY_TTL_MS = 5 * 60_000;
/** At most this many expired hand-over keys are deleted by one commit (the rest by the next ones). */
const EXPIRED_PER_COMMIT = 100;

/**
 * The kernel's transaction: the public `Tx` and the raw writes the kernel and the agent layer build their
 * rules from (`putTask`, `putSubmission`, `mintId`, …). Only `Session.commit` makes one.
 */
export class KernelTx implements Tx {
  readonly #session: TxSource;
  /** The commits before this one in its group (decision 0026), when it is not alone. */
  readonly #group: GroupOverlay | undefined;
  /**
   * The first task staged (the others follow it in `#more.tasks`, in order): most commits (a step) stage one task
   * and nothing else, so that one needs no map (decision 0042). `#more.tasks` never holds `#task`'s id.
   */
  #task: TaskRecord | undefined;
  /**
   * Everything else a transaction may stage or hold, made on first use (decision 0083): a step stages its task
   * and nothing more, yet every transaction carried these nine as fields of its own.
   */
  #more: TxMore | undefined;
  #nextId: number;
  readonly #baseNextId: number;
  actor: TxActor | undefined;

  constructor(session: TxSource, actor?: TxActor, group?: GroupOverlay) {
    this.#session = session;
    this.#group = group;
    this.#baseNextId = group ? group.nextId : session.nextId;
    this.#nextId = this.#baseNextId;
    this.actor = actor;
  }

  /** The harness clock. */
  now(): number {
    return this.#session.clock.now();
  }

  /**
   * The detached copy of a value entering the harness here, refused with `InvalidInput` past
   * `settings.limits` (depth, size) or when it is not JSON. Nothing is staged when it throws.
   */
  admit<T>(value: T, what: What): T {
    return admitJson(value, this.#session.limits, what);
  }

  /** `admit`, the copy deep-frozen as it is made: a part of a record that is frozen as built (decision 0041). */
  admitFrozen<T>(value: T, what: What): T {
    return admitJson(value, this.#session.limits, what, true);
  }

  /** What this transaction stages beyond its first task, made on first use. */
  #extra(): TxMore {
    return (this.#more ??= new TxMore());
  }

  /** A fresh id from the one global id space (conversations, entries, tasks, submissions). */
  mintId(): number {
    return this.#nextId++;
  }

  /** A live task as committed or staged here; terminal tasks are not in memory (use `harness.getTask`). */
  task(id: number): TaskRecord | undefined {
    const staged = this.#task?.id === id ? this.#task : this.#more?.tasks?.get(id);
    return staged ?? (this.#group ? this.#group.task(id) : this.#session.live.get(id));
  }

  /** Every live task, staged versions first. */
  *liveTasks(): Iterable<TaskRecord> {
    const base = this.#group ? this.#group.liveTasks() : this.#session.live.values();
    for (const record of base) if (!this.#staged(record.id)) yield record;
    for (const record of this.#stagedHere()) if (record.state.status !== "terminal") yield record;
  }

  /**
   * The task records staged before the committed mirror, terminal ones included: by the commits before this
   * one in its group, then by this one. With the live index (in step with the mirror) this is every live
   * task a transition must consider, without walking the whole live set.
   */
  *stagedTasks(): Iterable<TaskRecord> {
    if (this.#group) yield* this.#group.tasks.values();
    yield* this.#stagedHere();
  }

  /**
   * Whether `test` holds for one of `stagedTasks()`, walked without a generator (decision 0083: a generator makes
   * an object for every record it yields, and a task's last step in a group asks this of the whole group).
   */
  someStaged<A>(test: (task: TaskRecord, tx: KernelTx, arg: A) => boolean, arg: A): boolean {
    if (this.#group) for (const task of this.#group.tasks.values()) if (test(task, this, arg)) return true;
    if (this.#task !== undefined && test(this.#task, this, arg)) return true;
    const tasks = this.#more?.tasks;
    if (tasks) for (const task of tasks.values()) if (test(task, this, arg)) return true;
    return false;
  }

  /** The tasks this transaction staged, in the order first staged. */
  *#stagedHere(): Iterable<TaskRecord> {
    if (this.#task) yield this.#task;
    const tasks = this.#more?.tasks;
    if (tasks) yield* tasks.values();
  }

  #staged(id: number): boolean {
    return this.#task?.id === id || this.#more?.tasks?.has(id) === true;
  }

  /** What `id` names here (staged or committed), for the messages of `NotFound`. */
  #kindOf(id: number): IdKind | undefined {
    return this.task(id) ? "task" : mirroredKind(this.#session, id);
  }

  /** Creates a task from `definition` (installed or not: an uninstalled kind waits, blocked, until it is). */
  createTask<I>(definition: TaskKind<I>, input: I, options: CreateTaskOptions = {}): number {
    const admitted = this.admit(input, `The input of a ${definition.name} task`);
    const actor = this.actor;
    const conversationId = options.conversationId ?? actor?.conversationId;
    if (conversationId === undefined) throw new InvalidCommit("createTask needs a conversation: commit through a conversation or a task.");
    if (options.key !== undefined) {
      const existing = this.#keyedTask(options.key, definition.name, admitted as Json, conversationId);
      if (existing !== undefined) return existing;
    }
    if (!this.conversation(conversationId)) throw notFound("conversation", conversationId, this.#kindOf(conversationId));
    const background = options.background ?? false;
    const owner = background ? undefined : actor?.taskId;
    if (owner !== undefined) {
      const parent = this.task(owner);
      if (!parent || parent.state.status === "completing" || parent.state.status === "terminal" || parent.abortRequested) {
        throw new InvalidCommit(`Task ${owner} cannot create owned work: it is finishing or has an abort mark.`);
      }
      if (conversationId !== parent.conversationId) {
        throw new InvalidCommit(`A child task must live in its owner's conversation (${parent.conversationId}).`);
      }
    }
    const checkpoint = definition.initial(admitted);
    if (typeof checkpoint !== "object" || checkpoint === null || typeof (checkpoint as { phase?: unknown }).phase !== "string") {
      throw new InvalidCommit(`${definition.name}.initial() must return a checkpoint with a string phase.`);
    }
    const id = this.mintId();
    const record: TaskRecord = {
      id,
      conversationId,
      kind: definition.name,
      version: definition.version,
      input: admitted as Json,
      ...(owner !== undefined ? { owner } : {}),
      background,
      abortRequested: false,
      state: { status: "pending", checkpoint: this.admit(checkpoint, `The initial checkpoint of a ${definition.name} task`) as Checkpoint },
    };
    this.putTask(record);
    if (options.key?.startsWith(HANDOVER_KEY_PREFIX)) {
      this.setDocument(TASK_KEYS, options.key, { taskId: id, kind: definition.name, expiresAt: this.now() + HANDOVER_KEY_TTL_MS });
      this.#expireHandoverKeys();
    } else if (options.key !== undefined) this.setDocument(TASK_KEYS, options.key, { taskId: id, kind: definition.name });
    return id;
  }

  /** Deletes hand-over keys past their time (a few per commit: each follower creation adds one). */
  #expireHandoverKeys(): void {
    const now = this.now();
    let deleted = 0;
    for (const [key, expiresAt] of this.#session.handoverKeys) {
      if (expiresAt > now) continue;
      this.deleteDocument(TASK_KEYS, key);
      if (++deleted === EXPIRED_PER_COMMIT) return;
    }
  }

  /**
   * The task `key` names, if any; a `TaskKeyConflict` when it was created with another kind or input, or in
   * another conversation (a key is scoped to its conversation: one conversation never gets another's task).
   */
  #keyedTask(key: string, kind: string, wanted: Json, conversationId: number): number | undefined {
    if (typeof key !== "string" || key === "") throw new InvalidCommit("A task key must be a non-empty string.");
    const named = this.document(TASK_KEYS, key) as { taskId: number; kind: string } | undefined;
    if (!named) return undefined;
    if (named.kind !== kind) throw new TaskKeyConflict(key, named.taskId, `kind ${named.kind}, not ${kind}`);
    const conflict = (task: TaskRecord | undefined) =>
      task && task.conversationId !== conversationId
        ? new TaskKeyConflict(key, named.taskId, `in conversation ${task.conversationId}, not ${conversationId}`)
        : !task || !jsonEqual(task.input, wanted)
          ? new TaskKeyConflict(key, named.taskId, "the same kind with another input")
          : undefined;
    const live = this.task(named.taskId);
    if (live) {
      const error = conflict(live);
      if (error) throw error;
    } else {
      // Ended: its record is in storage only. The check runs before anything of this commit is stored.
      this.check(async () => {
        const error = conflict(await this.#session.storage.getTask(named.taskId));
        if (error) throw error;
      });
    }
    return named.taskId;
  }

  /** Replaces a task record (the scheduler's and runtime's own writes). */
  putTask(record: TaskRecord): void {
    if (this.#task === undefined || this.#task.id === record.id) this.#task = record;
    else (this.#extra().tasks ??= new Map()).set(record.id, record);
  }

  conversation(id: number): ConversationRecord | undefined {
    return this.#more?.conversations?.get(id) ?? (this.#group ? this.#group.conversation(id) : this.#session.conversations.get(id));
  }

  createConversation(options: { owner?: number; config?: ConversationRecord["config"] } = {}): number {
    const id = this.mintId();
    (this.#extra().conversations ??= new Map()).set(id, {
      id,
      createdAt: this.now(),
      ...(options.owner !== undefined ? { owner: options.owner } : {}),
      ...(options.config ? { config: this.admit(options.config, "A conversation's configuration") } : {}),
    });
    return id;
  }

  putConversation(record: ConversationRecord): void {
    (this.#extra().conversations ??= new Map()).set(record.id, record);
  }

  setRootConversation(id: number): void {
    this.#extra().rootConversationId = id;
  }

  /** Appends an entry to a conversation (default: the actor's); records the committing task as its author. */
  appendEntry(entry: { kind: string; payload: Json; conversationId?: number }): number {
    const conversationId = entry.conversationId ?? this.actor?.conversationId;
    if (conversationId === undefined || !this.conversation(conversationId)) {
      throw notFound("conversation", conversationId as number, conversationId === undefined ? undefined : this.#kindOf(conversationId));
    }
    const id = this.mintId();
    (this.#extra().entries ??= []).push({
      id,
      conversationId,
      kind: entry.kind,
      payload: this.admit(entry.payload, () => `The payload of a ${entry.kind} entry`),
      ...(this.actor?.taskId !== undefined ? { byTaskId: this.actor.taskId } : {}),
      at: this.now(),
    });
    return id;
  }

  /** Entries appended in this transaction (not yet committed). */
  get stagedEntries(): readonly EntryRecord[] {
    return this.#more?.entries ?? NONE;
  }

  document(scope: string, key: string): Json | undefined {
    const slot = documentKey(scope, key);
    const staged = this.#more?.documents?.get(slot);
    if (staged) return staged.value ?? undefined;
    return this.#group ? this.#group.document(slot) : this.#session.documents.get(slot)?.value;
  }

  setDocument(scope: string, key: string, value: Json): void {
    const admitted = this.admit(value, () => `Document ${scope}/${key}`);
    (this.#extra().documents ??= new Map()).set(documentKey(scope, key), { scope, key, value: admitted });
  }

  deleteDocument(scope: string, key: string): void {
    (this.#extra().documents ??= new Map()).set(documentKey(scope, key), { scope, key, value: null });
  }

  submission(id: number): SubmissionRecord | undefined {
    return this.#more?.submissions?.get(id) ?? (this.#group ? this.#group.submission(id) : this.#session.openSubmissions.get(id));
  }

  putSubmission(record: SubmissionRecord): void {
    (this.#extra().submissions ??= new Map()).set(record.id, record);
  }

  /** Open (queued or running) submissions of a conversation, staged versions included, in id order. */
  openSubmissions(conversationId: number): SubmissionRecord[] {
    const out = new Map<number, SubmissionRecord>();
    const base = this.#group ? this.#group.submissionsSeen() : this.#session.openSubmissions.values();
    for (const s of base) if (s.conversationId === conversationId) out.set(s.id, s);
    for (const s of this.#more?.submissions?.values() ?? NONE) if (s.conversationId === conversationId) out.set(s.id, s);
    return [...out.values()].filter((s) => s.status === "queued" || s.status === "running").sort((a, b) => a.id - b.id);
  }

  /** An async check that runs after the callback and before anything is stored (it may read storage). */
  check(check: () => Promise<void>): void {
    (this.#extra().checks ??= []).push(check);
  }

  /** A report delivered once this transaction is stored. */
  report(report: Report): void {
    (this.#extra().reports ??= []).push(report);
  }

  /** Runs once this transaction is stored. */
  afterCommit(callback: () => void): void {
    (this.#extra().afterCommit ??= []).push(callback);
  }

  /** @internal */
  get hasChecks(): boolean {
    return this.#more?.checks !== undefined;
  }

  /** @internal */
  async runChecks(): Promise<void> {
    for (const check of this.#more?.checks ?? NONE) await check();
  }

  /** @internal */
  get reports(): readonly Report[] {
    return this.#more?.reports ?? NONE;
  }

  /** @internal */
  get callbacks(): readonly (() => void)[] {
    return this.#more?.afterCommit ?? NONE;
  }

  /** @internal The batch to store, or undefined when this transaction wrote nothing. */
  batch(): Batch | undefined {
    const nextId = this.#nextId !== this.#baseNextId ? this.#nextId : undefined;
    const more = this.#more;
    if (nextId === undefined && this.#task === undefined && (more === undefined || !more.stagedBeyondTasks())) return undefined;
    // Built in one shape, without spreads: every step of every task makes one of these.
    // What it did not stage is one shared frozen empty list (a step stages a task only: four arrays less).
    const batch: Batch = {
      tasks: this.#task === undefined ? UNSTAGED : more?.tasks ? [this.#task, ...more.tasks.values()] : [this.#task],
      conversations: more?.conversations ? Array.from(more.conversations.values()) : UNSTAGED,
      entries: more?.entries ?? UNSTAGED,
      submissions: more?.submissions ? Array.from(more.submissions.values()) : UNSTAGED,
      documents: more?.documents ? Array.from(more.documents.values()) : UNSTAGED,
    };
    if (nextId !== undefined) batch.nextId = nextId;
    if (more?.rootConversationId !== undefined) batch.rootConversationId = more.rootConversationId;
    return batch;
  }
}

/**
 * What a transaction stages or holds beyond its first task (`KernelTx.#more`), each made on first use: its other
 * tasks (never the first one's id), conversations, entries, submissions and documents, its checks, reports and
 * after-commit callbacks, and a new root conversation.
 */
class TxMore {
  tasks: Map<number, TaskRecord> | undefined = undefined;
  conversations: Map<number, ConversationRecord> | undefined = undefined;
  entries: EntryRecord[] | undefined = undefined;
  submissions: Map<number, SubmissionRecord> | undefined = undefined;
  documents: Map<string, { scope: string; key: string; value: Json | null }> | undefined = undefined;
  checks: Array<() => Promise<void>> | undefined = undefined;
  reports: Report[] | undefined = undefined;
  afterCommit: Array<() => void> | undefined = undefined;
  rootConversationId: number | undefined = undefined;

  /** Whether a batch would carry something of these (checks, reports and callbacks are not stored). */
  stagedBeyondTasks(): boolean {
    return (
      this.rootConversationId !== undefined ||
      this.conversations !== undefined ||
      this.entries !== undefined ||
      this.submissions !== undefined ||
      this.documents !== undefined
    );
  }
}

/** The empty list a transaction answers with before it staged anything of a kind. */
const NONE: readonly never[] = Object.freeze([]);
/** The same list in a batch, whose lists are typed mutable: frozen, so a write into it throws instead of leaking. */
const UNSTAGED = NONE as never[];
