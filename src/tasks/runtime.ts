import { type Context, throwIfCancelled, waitFor } from "../base/context.ts";
import { cloneJson, deepFreeze, type Json } from "../base/json.ts";
import type { ExecutionEnv } from "../env/types.ts";
import { DurableError, HarnessClosed, InvalidCommit, InvocationEnded } from "../errors.ts";
import type { What } from "../limits.ts";
import { deliver, type Report } from "../reports.ts";
import { CommitRecord } from "../session/commit-record.ts";
import { notFound, storedKind } from "../session/ids.ts";
import { documentKey } from "../session/keys.ts";
import type { CommitOptions, Session } from "../session/session.ts";
import { isStorageFailure } from "../session/storage-failure.ts";
import type { KernelTx, TxActor } from "../session/tx.ts";
import type { Checkpoint, EntryRecord, TaskOutcome, TaskRecord } from "../storage/records.ts";
import type { Invocation } from "./invocation.ts";
import type { LiveIndex } from "./live-index.ts";
import type { SchedulerOptions } from "./options.ts";
import type { Registry } from "./registry.ts";
import { applyNext, checkpointOf } from "./transitions.ts";
import type { TaskRuntime } from "./types.ts";

/** What `runtime.commit` is given: the change from the task as committed to its next state. */
type Change = Parameters<TaskRuntime["commit"]>[0];

export interface TaskRuntimesOptions {
  readonly session: Session;
  readonly registry: Registry;
  readonly index: LiveIndex;
  readonly options: SchedulerOptions;
  /** True once the scheduler is closing: every commit of a phase is refused from then on. */
  readonly closing: () => boolean;
}

const CONFIRMED: Promise<void> = Promise.resolve();

/** Makes each invocation's `TaskRuntime` (S3): what a phase can do, every call refused once it has ended. */
export class TaskRuntimes {
  readonly kernel: TaskRuntimesOptions;
  /**
   * Recently read entries (frozen; entries never change), shared by concurrent readers: the tool tasks of one
   * round all read the same assistant entry.
   */
  readonly entries = new Map<number, Promise<EntryRecord | undefined>>();

  /** Reads a stored (terminal) task, for the checks of a commit (a wait on tasks it does not hold live). */
  readonly stored = (member: number): Promise<TaskRecord | undefined> => this.kernel.session.storage.getTask(member);

  constructor(host: TaskRuntimesOptions) {
    this.kernel = host;
  }

  create(invocation: Invocation): TaskRuntime {
    return new InvocationRuntime(this, invocation);
  }
}

/**
 * One invocation's runtime. A class, not an object of closures: after a crash with thousands of running tasks
 * every one of them gets a runtime before the first resumed step, and these share their methods.
 */
class InvocationRuntime implements TaskRuntime {
  readonly taskId: number;
  readonly conversationId: number;
  readonly layer: unknown;
  readonly registry: Registry;
  readonly #runtimes: TaskRuntimes;
  readonly #invocation: Invocation;
  readonly #kind: string;
  /**
   * Who this invocation's commits are by: one object for all of them (a commit reads it, never changes it). Made at
   * the first commit, as `#commitOptions` is: a phase held without committing (thousands of them after a crash, each
   * started before the last by id) makes neither (decision 0059).
   */
  #actor: TxActor | undefined;
  /**
   * How its commits go on the line: grouped (they read only through their `tx`, so they may share a transaction
   * with others, decision 0026), and settled into the invocation's bookkeeping by the session itself
   * (a storage refusal remembered, a stored commit clearing it), so a step awaits the commit's own promise.
   */
  #commitOptions: CommitOptions | undefined;
  /**
   * Every step of this invocation commits through this one record (decision 0077), made at its first step with
   * `#step` bound once as its body (decision 0060); the step's change is the commit's `arg`.
   */
  #record: CommitRecord | undefined;
  /** What this task's checkpoint is called in a refusal, made at its first step (one closure, not one a step). */
  #checkpoint: What | undefined;

  constructor(runtimes: TaskRuntimes, invocation: Invocation) {
    const first = runtimes.kernel.session.live.get(invocation.taskId)!;
    this.taskId = invocation.taskId;
    this.conversationId = first.conversationId;
    this.layer = runtimes.kernel.options.layer;
    this.registry = runtimes.kernel.registry;
    this.#runtimes = runtimes;
    this.#invocation = invocation;
    this.#kind = first.kind;
  }

  get signal(): AbortSignal {
    return this.#invocation.cancellation.signal;
  }

  untilAborted(): Promise<void> {
    return this.#invocation.cancellation.whenAborted();
  }

  get settings(): TaskRuntime["settings"] {
    return this.#runtimes.kernel.options.settings;
  }

  #check(): void {
    if (this.#invocation.ended) throw new InvocationEnded(this.taskId);
  }

  /** The task as `tx` sees it, when this invocation may still commit for it; throws the reason otherwise. */
  #current(tx: KernelTx): TaskRecord {
    const invocation = this.#invocation;
    const id = this.taskId;
    if (invocation.ended) throw new InvocationEnded(id);
    if (this.#runtimes.kernel.closing()) throw new HarnessClosed();
    const current = tx.task(id);
    if (!current) throw new InvalidCommit(`Task ${id} is terminal.`);
    if (current.state.status !== "running") throw new InvalidCommit(`Task ${id} is ${current.state.status}.`);
    if (invocation.mode === "run" && current.abortRequested) throw new InvalidCommit(`Task ${id} has a durable abort mark.`);
    return current;
  }

  /** Who this invocation's commits are by, made at its first commit (decision 0059). */
  #by(): TxActor {
    return (this.#actor ??= Object.freeze({ conversationId: this.conversationId, taskId: this.taskId }));
  }

  /** How this invocation's commits go on the line, made at its first commit (decision 0059). */
  #options(): CommitOptions {
    return (this.#commitOptions ??= commitOptions(this.#invocation));
  }

  /** Commits `body` for this running task, on the line (groupable: it reads only through its `tx`). */
  #gated<T>(body: (tx: KernelTx, current: TaskRecord) => T): Promise<T> {
    return this.#runtimes.kernel.session.commit((tx) => body(tx, this.#current(tx)), this.#by(), this.#options());
  }

  /**
   * A step's commit body, one per invocation: the change comes as the commit's `arg` (decision 0060: before, a
   * step made two closures, the gate's and the change's wrapper, each kept alive until its group was stored).
   */
  #step(tx: KernelTx, change: Change): void {
    const current = this.#current(tx);
    // `current` is the committed record itself (frozen), not a copy.
    const next = change(tx, current);
    if (typeof (next as { then?: unknown } | undefined)?.then === "function") {
      throw new InvalidCommit(
        `The change callback of runtime.commit (task ${this.taskId}) returned a Promise: it must be synchronous. Do the async work before commit and return the next state (or undefined).`,
      );
    }
    if (next !== undefined)
      applyNext(
        tx,
        this.#runtimes.kernel.index,
        current,
        next,
        this.#invocation.mode,
        this.#runtimes.stored,
        (this.#checkpoint ??= checkpointOf(current)),
      );
  }

  /**
   * Waits for a commit of this task under `context`. The session has already settled it into the invocation's
   * bookkeeping (`#commitOptions`: a storage refusal remembered as the invocation's). The invocation's own context
   * needs no extra wait: its end already rejects the commit on the line, so the commit's promise is the answer
   * (decision 0049: before, an async frame and its promise on every step did the bookkeeping).
   */
  #settled<T>(committed: Promise<T>, context: Context): Promise<T> {
    return context === this.#invocation.context ? committed : waitFor(committed, context);
  }

  /** Not an async function: a step's commit is the hot path, and one async frame and its promise less counts there. */
  commit(change: Parameters<TaskRuntime["commit"]>[0], context: Context): Promise<void> {
    try {
      this.#check();
      throwIfCancelled(context);
    } catch (error) {
      return Promise.reject(error);
    }
    const { session, options } = this.#runtimes.kernel;
    const record = (this.#record ??= new CommitRecord((tx: KernelTx, next: Change) => this.#step(tx, next), this.#by(), this.#options()));
    const committed = session.commitThrough<void>(record, change);
    const settled = this.#settled(committed, context);
    return options.crashPoint ? settled.then(() => this.crashPoint("task:after-commit")) : (settled as Promise<void>);
  }

  beforeEffect(context: Context): Promise<void> {
    this.#check();
    throwIfCancelled(context);
    return this.#runtimes.kernel.session.fence?.confirmed(context) ?? CONFIRMED;
  }

  async crashPoint(name: string): Promise<void> {
    this.#check();
    const handler = this.#runtimes.kernel.options.crashPoint;
    if (handler) await handler(name, { taskId: this.taskId, taskKind: this.#kind, conversationId: this.conversationId });
  }

  memo(name: string, context: Context): Promise<Json | undefined>;
  memo(name: string, value: Json, context: Context): Promise<Json>;
  async memo(name: string, ...rest: unknown[]): Promise<Json | undefined> {
    this.#check();
    const { session, options } = this.#runtimes.kernel;
    if (rest.length < 2) {
      const memos = session.live.get(this.taskId)?.memos;
      return memos && Object.hasOwn(memos, name) ? memos[name] : undefined;
    }
    const [value, context] = rest as [Json, Context];
    throwIfCancelled(context);
    const writing = this.#gated((tx, current) => {
      const memos = current.memos ?? {};
      if (Object.hasOwn(memos, name)) return cloneJson(memos[name]) as Json;
      tx.putTask({ ...current, memos: { ...memos, [name]: tx.admit(value, () => `Memo ${JSON.stringify(name)} of task ${current.id}`) } });
      return value;
    });
    const written = await this.#settled(writing, context);
    if (options.crashPoint) await this.crashPoint("memo:after-write");
    return written;
  }

  sleepUntil(at: number, checkpoint: Checkpoint, context: Context): Promise<void> {
    return this.commit(() => ({ status: "sleeping", until: at, checkpoint }), context);
  }

  now(): number {
    this.#check();
    return this.#runtimes.kernel.options.clock.now();
  }

  async outcomes(ids: readonly number[], context: Context): Promise<TaskOutcome[]> {
    this.#check();
    throwIfCancelled(context);
    const { session } = this.#runtimes.kernel;
    const out: TaskOutcome[] = [];
    for (const member of ids) {
      if (session.live.has(member)) throw new InvalidCommit(`Task ${member} is not terminal.`);
      const record = await session.storage.getTask(member);
      if (!record) throw notFound("task", member, await storedKind(session, member));
      if (record.state.status !== "terminal") throw new InvalidCommit(`Task ${member} is not terminal.`);
      out.push(record.state.outcome);
    }
    return out;
  }

  async getTask(taskId: number, context: Context): Promise<TaskRecord | undefined> {
    this.#check();
    throwIfCancelled(context);
    const { session } = this.#runtimes.kernel;
    return session.live.get(taskId) ?? session.storage.getTask(taskId);
  }

  report(report: Report): void {
    this.#check();
    deliver(this.#runtimes.kernel.options.onReport, report);
  }

  live(event: unknown): void {
    if (this.#invocation.ended) return; // a late event of an ended invocation shows nothing
    this.#runtimes.kernel.options.onLive?.({ taskId: this.taskId, conversationId: this.conversationId, event });
  }

  async env<E extends ExecutionEnv>(context: Context): Promise<E> {
    this.#check();
    throwIfCancelled(context);
    const { options } = this.#runtimes.kernel;
    if (!options.env) throw new DurableError("No execution environment: pass HarnessOptions.env to give tasks one.");
    return (await options.env(this.conversationId, context)) as E;
  }

  async entries(query: { conversationId?: number; afterId?: number }, context: Context): Promise<EntryRecord[]> {
    this.#check();
    throwIfCancelled(context);
    const { session } = this.#runtimes.kernel;
    const conversationId = query.conversationId ?? this.conversationId;
    // A wrong id would list nothing, silently: say what it is instead.
    if (!session.conversations.has(conversationId))
      throw notFound("conversation", conversationId, await storedKind(session, conversationId));
    return session.storage.listEntries(conversationId, query.afterId === undefined ? {} : { afterId: query.afterId });
  }

  async entry(entryId: number, context: Context): Promise<EntryRecord | undefined> {
    this.#check();
    throwIfCancelled(context);
    const entries = this.#runtimes.entries;
    let read = entries.get(entryId);
    if (!read) {
      read = this.#runtimes.kernel.session.storage.getEntry(entryId).then((entry) => {
        if (!entry) entries.delete(entryId); // not committed (yet): do not remember the miss
        return entry === undefined ? undefined : deepFreeze(entry);
      });
      read.catch(() => entries.delete(entryId));
      entries.set(entryId, read);
      if (entries.size > 64) entries.delete(entries.keys().next().value!);
    }
    return read;
  }

  document(scope: string, key: string): Json | undefined {
    this.#check();
    return cloneJson(this.#runtimes.kernel.session.documents.get(documentKey(scope, key))?.value);
  }

  setTimer(delayMs: number, fire: () => void): () => void {
    this.#check();
    const invocation = this.#invocation;
    // Timers die with the invocation: a late fire would act for a phase that already returned.
    let cancelTimer: (() => void) | undefined;
    const cancel = () => {
      cancelTimer?.();
      cancelTimer = undefined;
      invocation.cancellation.forget(cancel);
    };
    cancelTimer = this.#runtimes.kernel.options.clock.setTimer(delayMs, () => {
      cancelTimer = undefined;
      invocation.cancellation.forget(cancel);
      if (!invocation.ended) fire();
    });
    invocation.cancellation.onAbort(cancel);
    return cancel;
  }
}

/** How an invocation's commits go on the line (see `InvocationRuntime.#commitOptions`). */
function commitOptions(invocation: Invocation): CommitOptions {
  return {
    group: true,
    settled: {
      stored: () => {
        invocation.storageFailure = undefined; // a refusal the phase retried is no longer its failure
      },
      refused: (error) => {
        if (isStorageFailure(error)) invocation.storageFailure = error;
      },
    },
  };
}
