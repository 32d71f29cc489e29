import type { ContextKey } from "@earendil-works/chord";
import type { Clock } from "../clock.ts";
import { type Context, throwIfCancelled, waitFor } from "../context.ts";
import { DurableError, HarnessClosed, InvalidCommit, InvocationEnded, NotFound } from "../errors.ts";
import { cloneJson, deepFreeze, type Json, jsonEqual } from "../json.ts";
import { deliver, type Report, type ReportHandler } from "../reports.ts";
import { isStorageFailure, type Published, type Session } from "../session/session.ts";
import { documentKey, type Tx } from "../session/tx.ts";
import type { ResolvedSettings } from "../settings.ts";
import type { BlockedReason, Checkpoint, EntryRecord, TaskOutcome, TaskRecord, TaskState } from "../storage/records.ts";
import type { Registry } from "./registry.ts";
import type { AnyTaskDefinition, NextTaskState, RunningTask, TaskRuntime } from "./types.ts";

type Mode = "run" | "abort" | "limit";

/** Invocations started per scheduling pass (one commit); the next pass follows at once. */
const RESERVATION_BATCH = 256;

interface Invocation {
  readonly taskId: number;
  readonly mode: Mode;
  readonly definition: AnyTaskDefinition;
  /** Its abort signal, created only when somebody asks for it (aborting a signal nobody holds is wasted work). */
  readonly cancellation: LazyAbort;
  readonly context: Context;
  ended: boolean;
  /** A commit of this invocation was refused by storage: the phase's failure is not the task's fault. */
  storageFailure?: unknown;
  readonly done: Promise<void>;
  readonly finish: () => void;
}

/** What `inspect()` says about a live task, derived from the committed record and the scheduler's memory. */
export type TaskInspectionState =
  | { kind: "running" }
  | { kind: "ready"; migrates?: boolean }
  | { kind: "waiting"; on: number[] }
  | { kind: "sleeping"; until: number }
  | { kind: "completing" }
  | { kind: "blocked"; reason: BlockedReason; message: string };

export interface SchedulerOptions {
  settings: ResolvedSettings;
  clock: Clock;
  onReport?: ReportHandler;
  models?: unknown;
  env?: (conversationId: number, context: Context) => unknown;
  crashPoint?: CrashPointHandler;
  /** Receives what running tasks show live (`runtime.live`): not stored, gone in a crash. */
  onLive?: LiveHandler;
}

/** Gets a running task's live event (for example a partial answer) the moment the task reports it. */
export type LiveHandler = (live: { taskId: number; conversationId: number; event: unknown }) => void;

/**
 * Called at every named crash point. Return (or resolve) to go on; a test that wants to crash there copies
 * the database (or tells the page to reload) and never resolves.
 */
export type CrashPointHandler = (name: string, at: { taskId: number; taskKind: string; conversationId: number }) => void | Promise<void>;

type Resolution =
  | { ok: true; definition: AnyTaskDefinition; migrated?: { input: Json; checkpoint: Checkpoint } }
  | { ok: false; reason: BlockedReason; message: string };

/**
 * Runs tasks. Every state transition is decided inside one commit on the session line (reservation, faults,
 * marks, finalization, recovery); handlers run off the line and change their task only through the runtime.
 * There are no polling loops: commits, registry changes, invocation ends and the sleep timer wake it.
 */
export class Scheduler {
  readonly #session: Session;
  readonly #registry: Registry;
  readonly #options: SchedulerOptions;
  readonly #invocations = new Map<number, Invocation>();
  readonly #waiters = new Map<number, Set<{ resolve: (task: TaskRecord) => void; reject: (error: unknown) => void }>>();
  /** Live children by owner, for cascades and "owned work is live". */
  readonly #children = new Map<number, Set<number>>();
  /** Waiting tasks by the task they wait on. */
  readonly #waitersOn = new Map<number, Set<number>>();
  readonly #waitingOn = new Map<number, number[]>();
  readonly #sleepers = new Set<number>();
  /** Candidates a full pass left for the next one: reconciled already, in id order. */
  #deferred: number[] = [];
  /** The invocations the pass in progress reserved (started only once its commit is stored). */
  #reserving: Invocation[] = [];
  /** Task ids whose situation changed since the last pass. */
  readonly #dirty = new Set<number>();
  /** Failed (non-completed) outcomes seen since the last pass: they trigger failFast. */
  readonly #failed = new Set<number>();
  /** Migration failures already reported, keyed by task, with the definition object that failed. */
  readonly #migrationFailed = new Map<number, AnyTaskDefinition>();
  /**
   * Recently read entries (frozen; entries never change), shared by concurrent readers: the tool tasks of one
   * round all read the same assistant entry.
   */
  readonly #entries = new Map<number, Promise<EntryRecord | undefined>>();
  #enabled = false;
  #closing = false;
  /** Consecutive storage failures of scheduler commits, for the backoff; waiting out a backoff. */
  #failures = 0;
  #retrying = false;
  #cancelRetry: (() => void) | undefined;
  #scanAll = true;
  #passScheduled = false;
  #draining: Promise<void> | undefined;
  #cancelTimer: (() => void) | undefined;
  #timerAt: number | undefined;
  readonly #unsubscribe: Array<() => void> = [];

  constructor(session: Session, registry: Registry, options: SchedulerOptions) {
    this.#session = session;
    this.#registry = registry;
    this.#options = options;
    for (const task of session.live.values()) this.#index(task);
    this.#unsubscribe.push(session.subscribe((published) => this.#observe(published)));
    this.#unsubscribe.push(
      registry.subscribe(() => {
        this.#scanAll = true;
        this.#kick();
      }),
    );
  }

  get enabled(): boolean {
    return this.#enabled;
  }

  get closing(): boolean {
    return this.#closing;
  }

  get settings(): ResolvedSettings {
    return this.#options.settings;
  }

  /**
   * S4: one commit that turns every `running` task into `pending`, same checkpoint and memos, restarts + 1
   * (with `resume`, they stay `running` and are taken again by the first passes without another write).
   */
  recoverAtOpen(resume = false): Promise<number[]> {
    return this.#session.recoverRunning(resume);
  }

  /** Enables scheduling (idempotent). */
  resume(): void {
    if (this.#closing) throw new HarnessClosed();
    if (this.#enabled) return;
    this.#enabled = true;
    this.#scanAll = true;
    this.#kick();
  }

  /** Resolves with the terminal record of task `id`. */
  async waitForTask(id: number, context: Context): Promise<TaskRecord> {
    throwIfCancelled(context);
    if (this.#closing) throw new HarnessClosed();
    // Decide on the line (so no terminal publication slips between the check and the registration), but
    // wait off it: the line must keep moving for the task to finish.
    const promise = this.#session
      .read(async () => {
        if (!this.#session.live.has(id)) {
          const stored = await this.#session.storage.getTask(id);
          if (!stored) throw new NotFound(`Task ${id} does not exist.`);
          if (stored.state.status === "terminal") return { done: stored, waiting: undefined };
        }
        const waiting = new Promise<TaskRecord>((resolve, reject) => {
          let set = this.#waiters.get(id);
          if (!set) this.#waiters.set(id, (set = new Set()));
          set.add({ resolve, reject });
        });
        return { done: undefined, waiting };
      })
      .then((result) => result.done ?? result.waiting!);
    return waitFor(promise, context);
  }

  /** Durably marks a task for abort (and, through cascades, its owned work). */
  async abortTask(id: number, context: Context): Promise<"marked" | "terminal"> {
    throwIfCancelled(context);
    return waitFor(
      this.#session.commit((tx) => {
        const task = tx.task(id);
        if (!task) {
          tx.check(async () => {
            if (!(await this.#session.storage.getTask(id))) throw new NotFound(`Task ${id} does not exist.`);
          });
          return "terminal" as const;
        }
        if (task.abortRequested) return "marked" as const;
        const marked: TaskRecord = { ...task, abortRequested: true };
        // A blocked task can never run its abort handler: it is orphaned at once (unless its work is live).
        const resolution = this.#invocations.has(id) ? undefined : this.#resolve(marked);
        if (resolution && !resolution.ok && task.state.status !== "completing" && !this.#hasLiveOwnedWork(tx, id)) {
          this.#terminate(tx, marked, { status: "orphaned", reason: resolution.reason });
          return "terminal" as const;
        }
        tx.putTask(marked);
        return "marked" as const;
      }),
      context,
    );
  }

  inspect(): Array<{ record: TaskRecord; state: TaskInspectionState }> {
    const now = this.#options.clock.now();
    return [...this.#session.live.values()]
      .sort((a, b) => a.id - b.id)
      .map((record) => ({ record: cloneJson(record), state: this.#inspectOne(record, now) }));
  }

  /** Stops scheduling, signals and joins every invocation, then parks the tasks it ran as `pending` (S4). */
  async close(): Promise<void> {
    if (this.#closing) return;
    this.#closing = true;
    this.#enabled = false;
    this.#cancelTimer?.();
    this.#cancelRetry?.();
    for (const unsubscribe of this.#unsubscribe) unsubscribe();
    for (const [, set] of this.#waiters) for (const waiter of set) waiter.reject(new HarnessClosed());
    this.#waiters.clear();
    const sealed = this.#session.seal();
    for (const invocation of this.#invocations.values()) invocation.cancellation.abort(() => new HarnessClosed());
    const abandoned = await this.#joinInvocations();
    await this.#draining;
    await sealed;
    if (this.#session.readOnly) return;
    // A close is not a crash: running tasks go back to pending without counting a restart. A task whose phase
    // ignored its signal past closeTimeoutMs stays running: the next open counts it, as after a crash.
    await this.#session.commitWhileSealing((tx) => {
      for (const task of [...tx.liveTasks()]) {
        if (task.state.status === "running" && !abandoned.has(task.id))
          tx.putTask({ ...task, state: { status: "pending", checkpoint: task.state.checkpoint } });
      }
    });
  }

  /**
   * Waits for every invocation to return, at most `settings.closeTimeoutMs` on the harness clock. Phases still
   * running then are given up on (their runtime refuses every later call) and their task ids returned.
   */
  async #joinInvocations(): Promise<Set<number>> {
    const invocations = [...this.#invocations.values()];
    const joined = Promise.all(invocations.map((invocation) => invocation.done));
    const limit = this.#options.settings.closeTimeoutMs;
    if (invocations.length === 0 || limit === Infinity) {
      await joined;
      return new Set();
    }
    let cancel: (() => void) | undefined;
    const timedOut = await Promise.race([
      joined.then(() => false),
      new Promise<boolean>((resolve) => (cancel = this.#options.clock.setTimer(limit, () => resolve(true)))),
    ]);
    cancel?.();
    if (!timedOut) return new Set();
    const stuck = invocations.filter((invocation) => this.#invocations.get(invocation.taskId) === invocation);
    for (const invocation of stuck) {
      invocation.ended = true;
      this.#invocations.delete(invocation.taskId);
    }
    const ids = stuck.map((invocation) => invocation.taskId);
    deliver(this.#options.onReport, {
      kind: "error",
      error: new DurableError(
        `close(): the phase of task${ids.length > 1 ? "s" : ""} ${ids.join(", ")} ignored its abort signal for settings.closeTimeoutMs (${limit} ms); ` +
          `close went on without it. The task stays running in storage and the next open counts a restart, as after a crash.`,
      ),
    });
    return new Set(ids);
  }

  // ---------------------------------------------------------------------------------------------------------
  // Observation and wake-ups

  #observe({ batch, reports }: Published): void {
    for (const task of batch.tasks) {
      this.#index(task);
      const invocation = this.#invocations.get(task.id);
      if (invocation && invocation.mode === "run" && task.abortRequested && !invocation.cancellation.aborted) {
        invocation.cancellation.abort(() => new DurableError(`Task ${task.id} was aborted.`));
      }
      const status = task.state.status;
      if (status === "terminal") {
        this.#migrationFailed.delete(task.id);
        const waiters = this.#waiters.get(task.id);
        if (waiters) {
          this.#waiters.delete(task.id);
          for (const waiter of waiters) waiter.resolve(cloneJson(task));
        }
      }
      if ((status === "terminal" || status === "completing") && task.state.outcome.status !== "completed") this.#failed.add(task.id);
      const runningHere = invocation !== undefined && status === "running" && !task.abortRequested;
      if (!runningHere) this.#dirty.add(task.id);
      if (task.owner !== undefined) this.#dirty.add(task.owner);
      for (const waiter of this.#waitersOn.get(task.id) ?? []) this.#dirty.add(waiter);
    }
    for (const report of reports) deliver(this.#options.onReport, report);
    if (this.#dirty.size > 0) this.#kick();
  }

  /** Keeps the owner, wait and sleep indexes in step with the committed live set. */
  #index(task: TaskRecord): void {
    const live = task.state.status !== "terminal";
    if (task.owner !== undefined && !task.background) {
      let set = this.#children.get(task.owner);
      if (live) {
        if (!set) this.#children.set(task.owner, (set = new Set()));
        set.add(task.id);
      } else if (set) {
        set.delete(task.id);
        if (set.size === 0) this.#children.delete(task.owner);
      }
    }
    for (const member of this.#waitingOn.get(task.id) ?? []) {
      const waiters = this.#waitersOn.get(member);
      if (waiters?.delete(task.id) && waiters.size === 0) this.#waitersOn.delete(member);
    }
    this.#waitingOn.delete(task.id);
    if (task.state.status === "waiting") {
      this.#waitingOn.set(task.id, task.state.on);
      for (const member of task.state.on) {
        let set = this.#waitersOn.get(member);
        if (!set) this.#waitersOn.set(member, (set = new Set()));
        set.add(task.id);
      }
      if (task.state.policy === "failFast") this.#checkSettled(task.state.on);
    }
    if (task.state.status === "sleeping") this.#sleepers.add(task.id);
    else this.#sleepers.delete(task.id);
  }

  /**
   * failFast (B7): a member may have failed before the wait was committed, or before a crash let the pass
   * that marks the others run. Members already settled are looked up when a wait is indexed (at commit and
   * at open); a failed one goes to the failFast set like a failure observed live.
   */
  #checkSettled(members: readonly number[]): void {
    const stored: number[] = [];
    for (const member of members) {
      const live = this.#session.live.get(member);
      if (!live) stored.push(member);
      else if (live.state.status === "completing" && live.state.outcome.status !== "completed") this.#failed.add(member);
    }
    if (stored.length === 0) return;
    void Promise.all(stored.map((member) => this.#session.storage.getTask(member))).then(
      (records) => {
        let found = false;
        for (const record of records) {
          if (record?.state.status === "terminal" && record.state.outcome.status !== "completed") {
            this.#failed.add(record.id);
            found = true;
          }
        }
        if (found) this.#kick();
      },
      () => {}, // storage closed or unreadable: the wait simply stays as it is
    );
  }

  #kick(): void {
    if (!this.#enabled || this.#closing || this.#passScheduled || this.#retrying) return;
    this.#passScheduled = true;
    queueMicrotask(() => {
      this.#passScheduled = false;
      if (this.#draining) return; // the running drain loops until nothing is dirty; it re-kicks on exit
      this.#draining = this.#drain().finally(() => {
        this.#draining = undefined;
        if (this.#hasWork()) this.#kick();
      });
    });
  }

  #hasWork(): boolean {
    return this.#scanAll || this.#dirty.size > 0 || this.#failed.size > 0 || this.#deferred.length > 0;
  }

  async #drain(): Promise<void> {
    try {
      while (this.#enabled && !this.#closing && this.#hasWork()) {
        const ids = this.#scanAll ? [...this.#session.live.keys()] : [...this.#dirty];
        const failed = [...this.#failed];
        this.#scanAll = false;
        this.#dirty.clear();
        this.#failed.clear();
        let started: Invocation[];
        try {
          started = await this.#session.commit((tx) => this.#pass(tx, ids, failed));
        } catch (error) {
          // Storage refused the pass (a full quota, say). Nothing changed; try the same work again later
          // instead of spinning: the ids go back, and a timer on the harness clock brings them round.
          for (const id of failed) this.#failed.add(id);
          // The pass's reservations were not stored: forget their invocations (none started) and look at
          // every live task again next time, deferred ones included.
          for (const invocation of this.#reserving) {
            this.#invocations.delete(invocation.taskId);
            invocation.ended = true;
            invocation.finish();
          }
          this.#reserving = [];
          this.#scanAll = true;
          this.#backOff(error);
          return;
        }
        this.#failures = 0;
        this.#reserving = [];
        for (const invocation of started) void this.#run(invocation);
      }
    } catch (error) {
      if (!this.#closing) deliver(this.#options.onReport, { kind: "error", error });
    } finally {
      this.#armTimer();
    }
  }

  #armTimer(): void {
    if (this.#closing || !this.#enabled) return;
    let earliest: number | undefined;
    const now = this.#options.clock.now();
    for (const id of this.#sleepers) {
      const task = this.#session.live.get(id);
      if (task?.state.status !== "sleeping" || this.#invocations.has(id)) continue;
      // Due (or abort-marked) sleepers were already looked at by a pass; whatever holds them now (owned
      // work, an owner's intent) wakes them with a commit. A timer for them would fire at 0 ms for ever (B8).
      if (task.abortRequested || task.state.until <= now) continue;
      if (earliest === undefined || task.state.until < earliest) earliest = task.state.until;
    }
    if (earliest === this.#timerAt) return;
    this.#cancelTimer?.();
    this.#cancelTimer = undefined;
    this.#timerAt = earliest;
    if (earliest === undefined) return;
    const delay = Math.max(0, earliest - this.#options.clock.now());
    this.#cancelTimer = this.#options.clock.setTimer(delay, () => {
      this.#cancelTimer = undefined;
      this.#timerAt = undefined;
      const now = this.#options.clock.now();
      for (const id of this.#sleepers) {
        const task = this.#session.live.get(id);
        if (task?.state.status === "sleeping" && task.state.until <= now) this.#dirty.add(id);
      }
      if (this.#dirty.size > 0) this.#kick();
      else this.#armTimer();
    });
  }

  // ---------------------------------------------------------------------------------------------------------
  // One scheduling pass: reconcile (cascades, failFast, finalization), then reserve.

  #pass(tx: Tx, ids: number[], failed: number[]): Invocation[] {
    const candidates = new Set(ids);
    this.#reconcile(tx, candidates, failed);
    const now = this.#options.clock.now();
    const started: Invocation[] = (this.#reserving = []);
    // Reconciled candidates, merged with the ones an earlier pass deferred (already reconciled, in order).
    const ordered = mergeSorted(
      [...candidates].sort((a, b) => a - b),
      this.#deferred,
    );
    this.#deferred = [];
    for (let index = 0; index < ordered.length; index++) {
      const id = ordered[index]!;
      if (started.length >= RESERVATION_BATCH) {
        // Start this batch before reserving more: after a crash with thousands of tasks, the first ones
        // resume while the rest are still being reserved. The rest go round again at once, without being
        // reconciled or sorted again (each pass stays proportional to its batch, not to the backlog).
        this.#deferred = ordered.slice(index);
        break;
      }
      const task = tx.task(id);
      if (!task || this.#invocations.has(id)) continue;
      const status = task.state.status;
      // A running task without an invocation is one whose run ended on an abort mark or at a definition
      // handover: it is taken again (in abort mode, or under the new definition) without a new write.
      if (status === "completing" || status === "terminal") continue;
      if (status === "waiting" && task.state.on.some((member) => this.#isLive(tx, member))) continue;
      // An abort mark does not wait for the sleep (or retry backoff) to end: the abort runs now (B1).
      if (status === "sleeping" && task.state.until > now && !task.abortRequested) continue;
      const mode: Mode = task.abortRequested ? "abort" : "run";
      if (mode === "abort" && this.#hasLiveOwnedWork(tx, id)) continue;
      if (mode === "run" && this.#ownerHasIntent(tx, task)) continue;
      const resolution = this.#resolve(task);
      if (!resolution.ok) {
        if (mode === "abort") this.#terminate(tx, task, { status: "orphaned", reason: resolution.reason });
        continue;
      }
      let record = task;
      if (resolution.migrated) {
        record = { ...task, version: resolution.definition.version, input: resolution.migrated.input };
      }
      const checkpoint = resolution.migrated?.checkpoint ?? (task.state as { checkpoint: Checkpoint }).checkpoint;
      let invocationMode: Mode = mode;
      const limit = this.#options.settings.restartLimit;
      const restarts = record.restarts ?? 0;
      // S6 (B6): the limit also holds for the abort handler, and for onRestartLimit itself (which runs at
      // `restarts === limit`; one more cut-off means it is the handler that kills the process).
      const handler = mode === "abort" ? "abort handler" : resolution.definition.onRestartLimit ? "restart-limit handler" : undefined;
      if ((mode === "abort" && restarts >= limit) || (mode === "run" && restarts >= limit && (!handler || restarts > limit))) {
        const cut = mode === "abort" || restarts > limit ? `'s ${handler}` : "";
        const message = `Task ${record.id} (${record.kind})${cut} was cut off ${restarts} times in a row without progress; the restart limit is ${limit}, so it was not run again.`;
        this.#terminate(tx, record, { status: "faulted", error: { message, detail: { reason: "restart_limit", restarts } } });
        tx.report({
          kind: "task_faulted",
          taskId: record.id,
          taskKind: record.kind,
          conversationId: record.conversationId,
          reason: "restart_limit",
          message,
          detail: { reason: "restart_limit", restarts },
        });
        continue;
      }
      if (mode === "run" && restarts >= limit) invocationMode = "limit";
      if (status !== "running" || record !== task) {
        tx.putTask({ ...record, state: { status: "running", checkpoint }, startedAt: record.startedAt ?? now });
      }
      started.push(this.#invocation(record, resolution.definition, invocationMode));
    }
    return started;
  }

  #reconcile(tx: Tx, candidates: Set<number>, failed: number[]): void {
    // failFast: a failed member marks the other live members of every failFast wait it belongs to.
    const queue = [...candidates];
    for (const id of failed) {
      for (const waiterId of this.#waitersOn.get(id) ?? []) {
        const waiter = tx.task(waiterId);
        if (waiter?.state.status !== "waiting" || waiter.state.policy !== "failFast") continue;
        for (const member of waiter.state.on) this.#mark(tx, member, queue);
        candidates.add(waiterId);
      }
    }
    // Cascades and finalization, to a fixpoint: marking a child may free an owner, finalizing may free its owner.
    while (queue.length > 0) {
      const id = queue.pop()!;
      const task = tx.task(id);
      if (!task) continue;
      candidates.add(id);
      if (this.#hasIntent(task)) {
        for (const child of this.#liveChildren(tx, id)) this.#mark(tx, child, queue);
      }
      if (task.state.status === "completing" && !this.#hasLiveOwnedWork(tx, id)) {
        tx.putTask(this.#finalRecord(tx, task, task.state.outcome));
        if (task.owner !== undefined) queue.push(task.owner);
        for (const waiter of this.#waitersOn.get(id) ?? []) queue.push(waiter);
      }
    }
  }

  #mark(tx: Tx, id: number, queue: number[]): void {
    const task = tx.task(id);
    if (!task || task.abortRequested || task.state.status === "terminal") return;
    tx.putTask({ ...task, abortRequested: true });
    queue.push(id);
  }

  #hasIntent(task: TaskRecord): boolean {
    return task.abortRequested || (task.state.status === "completing" && task.state.outcome.status !== "completed");
  }

  #ownerHasIntent(tx: Tx, task: TaskRecord): boolean {
    if (task.background) return false;
    let owner = task.owner === undefined ? undefined : tx.task(task.owner);
    while (owner) {
      if (this.#hasIntent(owner)) return true;
      if (owner.background || owner.owner === undefined) return false;
      owner = tx.task(owner.owner);
    }
    return false;
  }

  #liveChildren(tx: Tx, id: number): number[] {
    const out = new Set(this.#children.get(id) ?? []);
    for (const task of tx.liveTasks()) if (task.owner === id && !task.background) out.add(task.id);
    return [...out].filter((child) => this.#isLive(tx, child));
  }

  #hasLiveOwnedWork(tx: Tx, id: number): boolean {
    return this.#liveChildren(tx, id).length > 0;
  }

  #isLive(tx: Tx, id: number): boolean {
    const task = tx.task(id);
    return task !== undefined && task.state.status !== "terminal";
  }

  /** A terminal outcome, held as `completing` while owned work is live. Drops memos and restarts. */
  #terminate(tx: Tx, task: TaskRecord, outcome: TaskOutcome): void {
    if (this.#hasLiveOwnedWork(tx, task.id)) {
      const { memos: _memos, restarts: _restarts, ...rest } = task;
      tx.putTask({ ...rest, state: { status: "completing", outcome } });
      return;
    }
    tx.putTask(this.#finalRecord(tx, task, outcome));
  }

  #finalRecord(tx: Tx, task: TaskRecord, outcome: TaskOutcome): TaskRecord {
    const { memos: _memos, restarts: _restarts, ...rest } = task;
    return { ...rest, endedAt: tx.now(), state: { status: "terminal", outcome } };
  }

  #resolve(task: TaskRecord): Resolution {
    const definition = this.#registry.task(task.kind);
    if (!definition) {
      return {
        ok: false,
        reason: "missing_task",
        message: `No task definition named ${task.kind} is installed; install its extension to run it.`,
      };
    }
    if (task.version === definition.version) return { ok: true, definition };
    if (task.version > definition.version) {
      return {
        ok: false,
        reason: "task_too_old",
        message: `Task ${task.id} was stored by ${task.kind} version ${task.version}, newer than the installed version ${definition.version}.`,
      };
    }
    if (this.#migrationFailed.get(task.id) === definition) {
      return { ok: false, reason: "migration_failed", message: `Migrating task ${task.id} from version ${task.version} failed.` };
    }
    try {
      if (!definition.migrate) throw new DurableError(`${task.kind} has no migration from ${task.version}.`);
      const checkpoint = (task.state as { checkpoint?: Checkpoint }).checkpoint ?? { phase: "" };
      const migrated = definition.migrate(task.input, checkpoint, task.version);
      return { ok: true, definition, migrated: { input: cloneJson(migrated.input) as Json, checkpoint: cloneJson(migrated.checkpoint) } };
    } catch (error) {
      if (this.#migrationFailed.get(task.id) !== definition) {
        this.#migrationFailed.set(task.id, definition);
        deliver(this.#options.onReport, { kind: "error", error, taskId: task.id });
      }
      return {
        ok: false,
        reason: "migration_failed",
        message: `Migrating task ${task.id} from version ${task.version} failed: ${errorMessage(error)}`,
      };
    }
  }

  #inspectOne(record: TaskRecord, now: number): TaskInspectionState {
    const state = record.state;
    if (this.#invocations.has(record.id) || state.status === "running") return { kind: "running" };
    if (state.status === "completing") return { kind: "completing" };
    const resolution = this.#resolveForInspect(record);
    if (!resolution.ok) return { kind: "blocked", reason: resolution.reason, message: resolution.message };
    if (state.status === "waiting") {
      const on = state.on.filter((member) => this.#session.live.has(member));
      if (on.length > 0) return { kind: "waiting", on };
    }
    if (record.abortRequested) {
      const owned = [...(this.#children.get(record.id) ?? [])];
      if (owned.length > 0) return { kind: "waiting", on: owned };
    }
    if (state.status === "sleeping" && state.until > now) return { kind: "sleeping", until: state.until };
    return { kind: "ready", ...(record.version !== this.#registry.task(record.kind)?.version ? { migrates: true } : {}) };
  }

  /** Like #resolve, but never runs a migration or reports. */
  #resolveForInspect(task: TaskRecord): Resolution {
    const definition = this.#registry.task(task.kind);
    if (!definition) return { ok: false, reason: "missing_task", message: `No task definition named ${task.kind} is installed.` };
    if (task.version > definition.version)
      return { ok: false, reason: "task_too_old", message: `Stored by ${task.kind} v${task.version}, installed v${definition.version}.` };
    if (task.version < definition.version && (!definition.migrate || this.#migrationFailed.get(task.id) === definition)) {
      return {
        ok: false,
        reason: "migration_failed",
        message: `${task.kind} cannot migrate task ${task.id} from version ${task.version}.`,
      };
    }
    return { ok: true, definition };
  }

  // ---------------------------------------------------------------------------------------------------------
  // Invocations

  #invocation(task: TaskRecord, definition: AnyTaskDefinition, mode: Mode): Invocation {
    const cancellation = new LazyAbort();
    let finish!: () => void;
    const done = new Promise<void>((resolve) => (finish = resolve));
    const invocation: Invocation = {
      taskId: task.id,
      mode,
      definition,
      cancellation,
      context: new InvocationContext(cancellation),
      ended: false,
      done,
      finish,
    };
    this.#invocations.set(task.id, invocation);
    return invocation;
  }

  async #run(invocation: Invocation): Promise<void> {
    const id = invocation.taskId;
    const runtime = this.#runtime(invocation);
    try {
      if (invocation.mode !== "run") {
        await this.#runOnce(invocation, runtime);
        return;
      }
      let failure: unknown;
      let failed = false;
      let phaseStart: Checkpoint | undefined;
      for (let first = true; ; first = false) {
        const current = this.#session.live.get(id);
        if (current?.state.status !== "running" || this.#closing || current.abortRequested) break;
        if (!first) {
          if (invocation.storageFailure !== undefined) {
            // Storage refused a commit (nothing was written): run this step again later, as after a crash.
            this.#backOff(invocation.storageFailure);
            break;
          }
          if (failed) {
            await this.#fault(invocation, "phase_failed", errorMessage(failure));
            break;
          }
          if (jsonEqual(current.state.checkpoint, phaseStart)) {
            await this.#fault(
              invocation,
              "no_progress",
              `Task ${current.kind} phase ${phaseStart?.phase} returned without durable progress.`,
            );
            break;
          }
          if (this.#registry.task(current.kind) !== invocation.definition) break; // hand over at a phase boundary
        }
        failed = false;
        failure = undefined;
        phaseStart = current.state.checkpoint;
        const handler = invocation.definition.phases[phaseStart.phase];
        try {
          if (!handler) throw new DurableError(`Task kind ${current.kind} has no phase named "${phaseStart.phase}".`);
          await handler(current as RunningTask, runtime, invocation.context); // frozen: committed records are immutable
        } catch (error) {
          failed = true;
          failure = error;
        }
      }
    } catch (error) {
      if (!this.#closing) deliver(this.#options.onReport, { kind: "error", error, taskId: id });
    } finally {
      invocation.ended = true;
      invocation.cancellation.abort(() => new InvocationEnded(id));
      this.#invocations.delete(id);
      this.#dirty.add(id);
      invocation.finish();
      this.#kick();
    }
  }

  /** An abort handler or a restart-limit handler: runs once and must leave the task terminal. */
  async #runOnce(invocation: Invocation, runtime: TaskRuntime): Promise<void> {
    const current = this.#session.live.get(invocation.taskId);
    if (current?.state.status !== "running" || this.#closing) return;
    const handler = invocation.mode === "abort" ? invocation.definition.abort : invocation.definition.onRestartLimit;
    let failure: unknown;
    let failed = false;
    try {
      await handler!.call(invocation.definition, current as RunningTask, runtime, invocation.context);
    } catch (error) {
      failed = true;
      failure = error;
    }
    const after = this.#session.live.get(invocation.taskId);
    if (after?.state.status !== "running" || this.#closing) return;
    const what = invocation.mode === "abort" ? "Abort handler" : "Restart-limit handler";
    await this.#fault(
      invocation,
      invocation.mode === "abort" ? "abort_failed" : "restart_limit",
      failed ? errorMessage(failure) : `${what} of task ${invocation.taskId} returned without a terminal outcome.`,
    );
  }

  /** After a storage failure: report it, and retry after 100 ms, doubling up to 30 s, on the harness clock. */
  #backOff(error: unknown): void {
    if (this.#closing) return;
    deliver(this.#options.onReport, { kind: "error", error });
    const delay = Math.min(30_000, 100 * 2 ** this.#failures++);
    this.#retrying = true;
    this.#cancelRetry?.();
    this.#cancelRetry = this.#options.clock.setTimer(delay, () => {
      this.#cancelRetry = undefined;
      this.#retrying = false;
      this.#kick();
    });
  }

  async #fault(
    invocation: Invocation,
    reason: "phase_failed" | "no_progress" | "abort_failed" | "restart_limit",
    message: string,
  ): Promise<void> {
    try {
      await this.#session.commit((tx) => {
        const task = tx.task(invocation.taskId);
        if (task?.state.status !== "running" || this.#closing) return;
        if (invocation.mode === "run" && task.abortRequested) return; // an abort mark wins over a fault
        const detail = reason === "restart_limit" ? { reason, restarts: task.restarts ?? 0 } : undefined;
        this.#terminate(tx, task, { status: "faulted", error: { message, ...(detail ? { detail } : {}) } });
        tx.report({
          kind: "task_faulted",
          taskId: task.id,
          taskKind: task.kind,
          conversationId: task.conversationId,
          reason,
          message,
          ...(detail ? { detail } : {}),
        });
      });
    } catch (error) {
      // The fault could not be stored (storage refused): the task stays running without an invocation and
      // is taken again, after a backoff rather than at once.
      if (!this.#closing) this.#backOff(error);
    }
  }

  #runtime(invocation: Invocation): TaskRuntime {
    const id = invocation.taskId;
    const session = this.#session;
    const scheduler = this;
    const first = session.live.get(id)!;
    const actor = { conversationId: first.conversationId, taskId: id };
    const check = () => {
      if (invocation.ended) throw new InvocationEnded(id);
    };
    const gated = <T>(body: (tx: Tx, current: TaskRecord) => T): Promise<T> =>
      onLine(body).then(
        (result) => {
          invocation.storageFailure = undefined; // a refusal the phase retried is no longer its failure
          return result;
        },
        (error: unknown) => {
          if (isStorageFailure(error)) invocation.storageFailure = error;
          throw error;
        },
      );
    const onLine = <T>(body: (tx: Tx, current: TaskRecord) => T): Promise<T> =>
      session.commit((tx) => {
        if (invocation.ended) throw new InvocationEnded(id);
        if (scheduler.#closing) throw new HarnessClosed();
        const current = tx.task(id);
        if (!current) throw new InvalidCommit(`Task ${id} is terminal.`);
        if (current.state.status !== "running") throw new InvalidCommit(`Task ${id} is ${current.state.status}.`);
        if (invocation.mode === "run" && current.abortRequested) throw new InvalidCommit(`Task ${id} has a durable abort mark.`);
        return body(tx, current);
      }, actor);

    const runtime: TaskRuntime = {
      taskId: id,
      conversationId: first.conversationId,
      get signal() {
        return invocation.cancellation.signal;
      },
      get settings() {
        return scheduler.#options.settings;
      },
      models: this.#options.models,
      commit: async (change, context) => {
        check();
        throwIfCancelled(context);
        const committed = gated((tx, current) => {
          // `current` is the committed record itself (frozen), not a copy.
          const next = change(tx, current);
          if (typeof (next as { then?: unknown } | undefined)?.then === "function") {
            throw new InvalidCommit(
              `The change callback of runtime.commit (task ${id}) returned a Promise: it must be synchronous. Do the async work before commit and return the next state (or undefined).`,
            );
          }
          if (next !== undefined) scheduler.#applyNext(tx, current, next, invocation);
        });
        // The invocation's own context needs no extra wait: its end already rejects the commit on the line.
        await (context === invocation.context ? committed : waitFor(committed, context));
        if (scheduler.#options.crashPoint) await runtime.crashPoint("task:after-commit");
      },
      crashPoint: async (name) => {
        check();
        const handler = scheduler.#options.crashPoint;
        if (handler) await handler(name, { taskId: id, taskKind: first.kind, conversationId: first.conversationId });
      },
      memo: (async (name: string, ...rest: unknown[]) => {
        check();
        if (rest.length < 2) {
          const memos = session.live.get(id)?.memos;
          return memos && Object.hasOwn(memos, name) ? memos[name] : undefined;
        }
        const [value, context] = rest as [Json, Context];
        throwIfCancelled(context);
        const writing = gated((tx, current) => {
          const memos = current.memos ?? {};
          if (Object.hasOwn(memos, name)) return cloneJson(memos[name]) as Json;
          tx.putTask({ ...current, memos: { ...memos, [name]: cloneJson(value) } });
          return value;
        });
        // Like commit: the invocation's own context needs no extra wait (its end rejects the write on the line).
        const written = await (context === invocation.context ? writing : waitFor(writing, context));
        if (scheduler.#options.crashPoint) await runtime.crashPoint("memo:after-write");
        return written;
      }) as TaskRuntime["memo"],
      sleepUntil: (at, checkpoint, context) => runtime.commit(() => ({ status: "sleeping", until: at, checkpoint }), context),
      now: () => {
        check();
        return scheduler.#options.clock.now();
      },
      outcomes: async (ids, context) => {
        check();
        throwIfCancelled(context);
        const out: TaskOutcome[] = [];
        for (const member of ids) {
          if (session.live.has(member)) throw new InvalidCommit(`Task ${member} is not terminal.`);
          const record = await session.storage.getTask(member);
          if (!record) throw new NotFound(`Task ${member} does not exist.`);
          if (record.state.status !== "terminal") throw new InvalidCommit(`Task ${member} is not terminal.`);
          out.push(record.state.outcome);
        }
        return out;
      },
      getTask: async (taskId, context) => {
        check();
        throwIfCancelled(context);
        return session.live.get(taskId) ?? session.storage.getTask(taskId);
      },
      report: (report: Report) => {
        check();
        deliver(scheduler.#options.onReport, report);
      },
      live: (event) => {
        if (invocation.ended) return; // a late event of an ended invocation shows nothing
        scheduler.#options.onLive?.({ taskId: id, conversationId: first.conversationId, event });
      },
      env: async <E>(context: Context) => {
        check();
        throwIfCancelled(context);
        if (!scheduler.#options.env) throw new DurableError("No execution environment: pass HarnessOptions.env to give tasks one.");
        return (await scheduler.#options.env(first.conversationId, context)) as E;
      },
      registry: this.#registry,
      entries: async (options, context) => {
        check();
        throwIfCancelled(context);
        return session.storage.listEntries(
          options.conversationId ?? first.conversationId,
          options.afterId === undefined ? {} : { afterId: options.afterId },
        );
      },
      entry: async (entryId, context) => {
        check();
        throwIfCancelled(context);
        let read = scheduler.#entries.get(entryId);
        if (!read) {
          read = session.storage.getEntry(entryId).then((entry) => {
            if (!entry) scheduler.#entries.delete(entryId); // not committed (yet): do not remember the miss
            return entry === undefined ? undefined : deepFreeze(entry);
          });
          read.catch(() => scheduler.#entries.delete(entryId));
          scheduler.#entries.set(entryId, read);
          if (scheduler.#entries.size > 64) scheduler.#entries.delete(scheduler.#entries.keys().next().value!);
        }
        return read;
      },
      document: (scope, key) => {
        check();
        return cloneJson(session.documents.get(documentKey(scope, key))?.value);
      },
      setTimer: (delayMs, fire) => {
        check();
        // Timers die with the invocation: a late fire would act for a phase that already returned.
        let cancelTimer: (() => void) | undefined;
        const cancel = () => {
          cancelTimer?.();
          cancelTimer = undefined;
          invocation.cancellation.forget(cancel);
        };
        cancelTimer = scheduler.#options.clock.setTimer(delayMs, () => {
          cancelTimer = undefined;
          invocation.cancellation.forget(cancel);
          if (!invocation.ended) fire();
        });
        invocation.cancellation.onAbort(cancel);
        return cancel;
      },
    };
    return runtime;
  }

  /** Validates and stages the state a task committed. Any state change clears `restarts` (S6: progress). */
  #applyNext(tx: Tx, current: TaskRecord, next: NextTaskState, invocation: Invocation): void {
    let state: TaskState;
    switch (next.status) {
      case "running":
        state = { status: "running", checkpoint: cloneJson(next.checkpoint) };
        break;
      case "sleeping":
        if (typeof next.until !== "number" || !Number.isFinite(next.until))
          throw new InvalidCommit(`sleepUntil needs a finite time on the harness clock; got ${String(next.until)}.`);
        state = { status: "sleeping", until: next.until, checkpoint: cloneJson(next.checkpoint) };
        break;
      case "waiting": {
        if (invocation.mode === "abort") throw new InvalidCommit(`Abort handler of task ${current.id} cannot wait.`);
        const on = [...new Set(next.on)];
        const policy = next.policy ?? "allSettled";
        this.#validateWait(tx, current, on, policy);
        state = { status: "waiting", checkpoint: cloneJson(next.checkpoint), on, policy };
        break;
      }
      case "terminal": {
        const outcome = cloneJson(next.outcome);
        if (!["completed", "failed", "aborted"].includes(outcome.status)) {
          throw new InvalidCommit(`A task may end completed, failed or aborted; "${outcome.status}" is the scheduler's to write.`);
        }
        this.#terminate(tx, current, outcome);
        return;
      }
      default:
        throw new InvalidCommit(`Unknown task state ${JSON.stringify((next as { status?: unknown }).status)}.`);
    }
    const record: TaskRecord = { ...current, state };
    if (record.restarts !== undefined && !jsonEqual(current.state, state)) delete record.restarts;
    tx.putTask(record);
  }

  #validateWait(tx: Tx, waiter: TaskRecord, on: number[], policy: string): void {
    if (policy !== "allSettled" && policy !== "failFast") throw new InvalidCommit(`Unknown wait policy ${JSON.stringify(policy)}.`);
    const ancestors = new Set<number>([waiter.id]);
    for (let owner = waiter.owner; owner !== undefined; owner = tx.task(owner)?.owner) ancestors.add(owner);
    const unknown: number[] = [];
    for (const member of on) {
      if (!Number.isSafeInteger(member)) throw new InvalidCommit(`Task ids to wait on must be integers; got ${String(member)}.`);
      if (ancestors.has(member)) throw new InvalidCommit(`Task ${waiter.id} cannot wait on ${member}: that would close a wait cycle.`);
      const task = tx.task(member);
      if (!task) unknown.push(member);
      else if (policy === "failFast" && task.owner !== waiter.id) {
        throw new InvalidCommit(`failFast waits only on tasks that task ${waiter.id} owns directly; task ${member} is not one.`);
      }
    }
    if (unknown.length > 0) {
      tx.check(async () => {
        for (const member of unknown) {
          const stored = await this.#session.storage.getTask(member);
          if (!stored) throw new NotFound(`Task ${member} does not exist.`);
          if (policy === "failFast" && stored.owner !== waiter.id) {
            throw new InvalidCommit(`failFast waits only on tasks that task ${waiter.id} owns directly; task ${member} is not one.`);
          }
        }
      });
    }
  }
}

/**
 * An abort signal made on first use. Most phases never look at their signal, and creating and aborting one
 * for every invocation is measurable (tens of µs in Node). Aborting before anyone asked records the reason;
 * a signal made afterwards starts aborted with it. Internal listeners (timers) need no signal at all.
 */
class LazyAbort {
  #controller: AbortController | undefined;
  #reason: (() => unknown) | undefined;
  #listeners = new Set<() => void>();

  get aborted(): boolean {
    return this.#reason !== undefined;
  }

  get signal(): AbortSignal {
    if (!this.#controller) {
      this.#controller = new AbortController();
      if (this.#reason) this.#controller.abort(this.#reason());
    }
    return this.#controller.signal;
  }

  abort(reason: () => unknown): void {
    if (this.#reason) return;
    this.#reason = reason;
    this.#controller?.abort(reason());
    const listeners = [...this.#listeners];
    this.#listeners.clear();
    for (const listener of listeners) listener();
  }

  onAbort(listener: () => void): void {
    if (this.#reason) listener();
    else this.#listeners.add(listener);
  }

  forget(listener: () => void): void {
    this.#listeners.delete(listener);
  }
}

/**
 * The context a phase gets: chord's Context, cancelled with the invocation, whose signal is made on first
 * use. Contexts derived from it (chord's `withContextValue`, `withAbortSignal`) find the signal through
 * `value()` under chord's abort-signal key.
 */
class InvocationContext implements Context {
  readonly #cancellation: LazyAbort;

  constructor(cancellation: LazyAbort) {
    this.#cancellation = cancellation;
  }

  get abortSignal(): AbortSignal {
    return this.#cancellation.signal;
  }

  /** True once the invocation is cancelled, without making a signal. */
  get cancelled(): boolean {
    return this.#cancellation.aborted;
  }

  value<T>(key: ContextKey<T>): T | undefined {
    return key.token.description === CHORD_ABORT_SIGNAL_KEY ? (this.abortSignal as T) : undefined;
  }

  toString(): string {
    return "[Context task invocation]";
  }
}

/** The description of chord's (unexported) abort-signal context key; pinned with chord's version. */
const CHORD_ABORT_SIGNAL_KEY = "chord.abortSignal";

/** Merges two ascending id lists, dropping duplicates. */
function mergeSorted(a: number[], b: number[]): number[] {
  if (b.length === 0) return a;
  if (a.length === 0) return b;
  const out: number[] = [];
  let i = 0;
  let j = 0;
  while (i < a.length || j < b.length) {
    const next = j >= b.length || (i < a.length && a[i]! <= b[j]!) ? a[i++]! : b[j++]!;
    if (out[out.length - 1] !== next) out.push(next);
  }
  return out;
}

/** A thrown value as a message. Never throws itself: a cyclic object or a BigInt still gives a message (B2). */
export function errorMessage(error: unknown): string {
  try {
    if (error instanceof Error) return String(error.message);
    if (typeof error === "string") return error;
    if (typeof error === "bigint") return `${error}n`;
    return JSON.stringify(error) ?? String(error);
  } catch {
    try {
      return String(error);
    } catch {
      return "A value that cannot be shown as text was thrown.";
    }
  }
}
