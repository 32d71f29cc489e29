import { type Context, throwIfCancelled, waitFor } from "../base/context.ts";
import { cloneJson } from "../base/json.ts";
import { KeyedWaiters } from "../base/waiters.ts";
import { DurableError, HarnessClosed, InvocationEnded } from "../errors.ts";
import { deliver } from "../reports.ts";
import { notFound, storedKind } from "../session/ids.ts";
import type { Published, Session } from "../session/session.ts";
import type { ResolvedSettings } from "../settings.ts";
import type { TaskRecord } from "../storage/records.ts";
import { inspectTask, type TaskInspectionState } from "./inspect.ts";
import type { Invocation } from "./invocation.ts";
import { invoke, type SchedulerPort } from "./invoke.ts";
import { joinInvocations } from "./join.ts";
import { LiveIndex } from "./live-index.ts";
import type { SchedulerOptions } from "./options.ts";
import { SchedulingPass } from "./pass.ts";
import type { Registry } from "./registry.ts";
import { DefinitionResolver } from "./resolve.ts";
import { TaskRuntimes } from "./runtime.ts";
import { Backoff, SleepTimer } from "./timers.ts";
import { parkRunning, requestAbort } from "./transitions.ts";

/**
 * Runs tasks. Every state transition is decided inside one commit on the session line (reservation, faults,
 * marks, finalization, recovery: see transitions.ts); handlers run off the line and change their task only
 * through the runtime. There are no polling loops: commits, registry changes, invocation ends and the sleep
 * timer wake it.
 *
 * This file is the drain and the lifecycle. The parts: `live-index.ts` (children, waits, sleepers), `pass.ts`
 * (one scheduling pass), `resolve.ts` (which definition runs a task), `transitions.ts` (the state changes),
 * `invoke.ts` (the invocation loop and its faults), `runtime.ts` (the task runtime), `timers.ts` (sleep timer,
 * backoff), `join.ts` (close's bounded join of running phases), `inspect.ts` (what `inspect()` says).
 */
export class Scheduler {
  readonly #session: Session;
  readonly #registry: Registry;
  readonly #options: SchedulerOptions;
  readonly #invocations = new Map<number, Invocation>();
  readonly #waiters = new KeyedWaiters<number, TaskRecord>();
  readonly #index = new LiveIndex();
  readonly #resolver: DefinitionResolver;
  readonly #pass: SchedulingPass;
  readonly #runtimes: TaskRuntimes;
  readonly #timer: SleepTimer;
  /** Sleepers the last pass that looked at them found due, with that `until` (pass.ts writes, timers.ts reads). */
  readonly #seenDue = new Map<number, number>();
  /** Consecutive storage failures of scheduler commits, and the wait before the next try. */
  readonly #backoff: Backoff;
  readonly #schedulerPort: SchedulerPort;
  /** The invocations the pass in progress reserved (started only once its commit is stored). */
  #reserving: Invocation[] = [];
  /** Task ids whose situation changed since the last pass. */
  readonly #dirty = new Set<number>();
  /** Failed (non-completed) outcomes seen since the last pass: they trigger failFast. */
  readonly #failed = new Set<number>();
  #enabled = false;
  #closing = false;
  #scanAll = true;
  #passScheduled = false;
  #draining: Promise<void> | undefined;
  readonly #unsubscribe: Array<() => void> = [];

  constructor(session: Session, registry: Registry, options: SchedulerOptions) {
    this.#session = session;
    this.#registry = registry;
    this.#options = options;
    const closing = () => this.#closing;
    this.#resolver = new DefinitionResolver(registry, options.onReport);
    this.#pass = new SchedulingPass({
      index: this.#index,
      resolver: this.#resolver,
      invocations: this.#invocations,
      seenDue: this.#seenDue,
      clock: options.clock,
      settings: options.settings,
    });
    this.#runtimes = new TaskRuntimes({ session, registry, index: this.#index, options, closing });
    this.#timer = new SleepTimer({
      clock: options.clock,
      live: session.live,
      running: (id) => this.#invocations.has(id),
      seenDue: this.#seenDue,
      stepStored: session.stepStored,
      wake: (due) => {
        for (const id of due) this.#dirty.add(id);
        if (this.#dirty.size > 0) this.#kick();
        else this.#armTimer();
      },
    });
    this.#backoff = new Backoff(options.clock, () => this.#kick());
    this.#schedulerPort = {
      session,
      registry,
      index: this.#index,
      onReport: options.onReport,
      closing,
      backOff: (error) => this.#backOff(error),
      ended: (invocation) => {
        const id = invocation.taskId;
        invocation.ended = true;
        invocation.cancellation.abort(() => new InvocationEnded(id));
        this.#invocations.delete(id);
        this.#dirty.add(id);
        invocation.finish();
        this.#kick();
      },
    };
    for (const task of session.live.values()) this.#indexTask(task);
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
          if (!stored) throw notFound("task", id, await storedKind(this.#session, id));
          if (stored.state.status === "terminal") return { done: stored, waiting: undefined };
        }
        return { done: undefined, waiting: this.#waiters.wait(id) };
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
            if (!(await this.#session.storage.getTask(id))) throw notFound("task", id, await storedKind(this.#session, id));
          });
          return "terminal" as const;
        }
        // A blocked task can never run its abort handler (unless it is running now).
        return requestAbort(tx, this.#index, task, () => {
          if (this.#invocations.has(id)) return undefined;
          const resolution = this.#resolver.resolve(task);
          return resolution.ok ? undefined : resolution.reason;
        });
      }),
      context,
    );
  }

  inspect(): Array<{ record: TaskRecord; state: TaskInspectionState }> {
    const now = this.#options.clock.now();
    const source = {
      live: this.#session.live,
      invocations: this.#invocations,
      index: this.#index,
      resolver: this.#resolver,
      registry: this.#registry,
    };
    return [...this.#session.live.values()]
      .sort((a, b) => a.id - b.id)
      .map((record) => ({ record: cloneJson(record), state: inspectTask(source, record, now) }));
  }

  /**
   * Stops scheduling, signals and joins every invocation, then parks the tasks it ran as `pending` (S4). With
   * `park: false` (a hand-over, a lost lease) it writes nothing: what ran stays `running`, and whoever opens the
   * log next counts the restarts, as after a crash.
   */
  async close(park = true): Promise<void> {
    if (this.#closing) return;
    this.#closing = true;
    this.#enabled = false;
    this.#timer.cancel();
    this.#backoff.cancel();
    for (const unsubscribe of this.#unsubscribe) unsubscribe();
    this.#waiters.rejectAll(() => new HarnessClosed());
    const sealed = this.#session.seal();
    for (const invocation of this.#invocations.values()) invocation.cancellation.abort(() => new HarnessClosed());
    const abandoned = await joinInvocations(this.#invocations, this.#options);
    await this.#draining;
    await sealed;
    if (this.#session.readOnly || !park) return;
    // A task whose phase ignored its signal past closeTimeoutMs stays running: the next open counts it, as
    // after a crash.
    await this.#session.commitWhileSealing((tx) => parkRunning(tx, abandoned));
  }

  // ---------------------------------------------------------------------------------------------------------
  // Observation and wake-ups

  #observe({ batch, reports }: Published): void {
    // Indexed loops: a commit's unstaged lists and its reports are most often one shared frozen empty array, and
    // Node 20's optimized for…of over a frozen array allocates an iterator and a result object (decision 0077).
    const tasks = batch.tasks;
    for (let at = 0; at < tasks.length; at++) {
      const task = tasks[at]!;
      this.#indexTask(task);
      const invocation = this.#invocations.get(task.id);
      if (invocation && invocation.mode === "run" && task.abortRequested && !invocation.cancellation.aborted) {
        invocation.cancellation.abort(() => new DurableError(`Task ${task.id} was aborted.`));
      }
      const status = task.state.status;
      if (status === "terminal") {
        this.#resolver.forget(task.id);
        this.#waiters.resolve(task.id, () => cloneJson(task));
      }
      if (this.#session.readOnly) continue; // a follower (decision 0034) never runs a pass: nothing to mark for one
      if ((status === "terminal" || status === "completing") && task.state.outcome.status !== "completed") this.#failed.add(task.id);
      const runningHere = invocation !== undefined && status === "running" && !task.abortRequested;
      if (!runningHere) this.#dirty.add(task.id);
      if (task.owner !== undefined) this.#dirty.add(task.owner);
      for (const waiter of this.#index.waitersOn(task.id)) this.#dirty.add(waiter);
    }
    for (let at = 0; at < reports.length; at++) deliver(this.#options.onReport, reports[at]!);
    if (this.#dirty.size > 0) this.#kick();
  }

  /** Keeps the live index in step with the committed live set. */
  #indexTask(task: TaskRecord): void {
    const failFast = this.#index.index(task);
    this.#timer.index(task);
    if (failFast) this.#checkSettled(failFast);
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
    if (!this.#enabled || this.#closing || this.#passScheduled || this.#backoff.retrying) return;
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
    return this.#scanAll || this.#dirty.size > 0 || this.#failed.size > 0 || this.#pass.hasDeferred;
  }

  // ---------------------------------------------------------------------------------------------------------
  // The drain: passes, one commit each, until nothing is dirty; then the invocations they reserved start.

  async #drain(): Promise<void> {
    try {
      while (this.#enabled && !this.#closing && this.#hasWork()) {
        const ids = this.#scanAll ? this.#scanIds() : [...this.#dirty];
        const failed = [...this.#failed];
        this.#scanAll = false;
        this.#dirty.clear();
        this.#failed.clear();
        let started: Invocation[];
        try {
          started = await this.#session.commit((tx) => {
            const reserving: Invocation[] = (this.#reserving = []);
            this.#pass.run(tx, ids, failed, reserving);
            return reserving;
          });
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
        this.#backoff.succeeded();
        this.#reserving = [];
        for (const invocation of started) this.#run(invocation);
      }
    } catch (error) {
      if (!this.#closing) deliver(this.#options.onReport, { kind: "error", error });
    } finally {
      this.#armTimer();
    }
  }

  /**
   * The live tasks a full scan hands the pass: all but the sleepers that are not due and not marked for abort, which
   * the pass would only pass over (decision 0105: 10,000 asleep at a reload were each reconciled, sorted and looked up
   * twice in front of the first step). A commit that changes one before the pass runs makes it dirty, as before.
   */
  #scanIds(): number[] {
    const now = this.#options.clock.now();
    const ids: number[] = [];
    for (const task of this.#session.live.values()) {
      const state = task.state;
      if (state.status === "sleeping" && !task.abortRequested && (state.until === undefined || state.until > now)) {
        if (state.until !== undefined) this.#seenDue.delete(task.id); // what the pass does with it
        continue;
      }
      ids.push(task.id);
    }
    return ids;
  }

  #armTimer(): void {
    if (this.#closing || !this.#enabled) return;
    this.#timer.arm();
  }

  #run(invocation: Invocation): void {
    invoke(this.#schedulerPort, invocation, this.#runtimes.create(invocation));
  }

  /** After a storage failure: report it, and retry after a backoff on the harness clock. */
  #backOff(error: unknown): void {
    if (this.#closing) return;
    deliver(this.#options.onReport, { kind: "error", error });
    this.#backoff.failed();
  }
}
