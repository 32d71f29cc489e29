import type { Conversation } from "./agent/conversation/conversation.ts";
import { Conversations } from "./agent/conversation/conversations.ts";
import type { Submission } from "./agent/conversation/submission.ts";
import type { AgentKernel } from "./agent/kernel.ts";
import type { AgentLayer } from "./agent/runtime.ts";
import { serverCalling } from "./agent/server-port.ts";
import type { AgentChange } from "./agent/types.ts";
import { type Clock, systemClock } from "./base/clock.ts";
import { type Context, throwIfCancelled, waitFor } from "./base/context.ts";
import { cloneJson, type Json } from "./base/json.ts";
import { failingOnce } from "./base/safely.ts";
import { HarnessClosed, InvalidArguments, LeaseNotHeld, ReadOnlySession, StaleEpoch } from "./errors.ts";
import { cancelTimers, confirmResumed, LeaseTaking, type LeaseTimers, leaveBy, renewLease } from "./harness-lease.ts";
import { claimStorage, markLifecycle, recountOwed, recoveryAtOpen, releaseStorage, storedLifecycle } from "./harness-lifecycle.ts";
import { checkOptions, type HarnessOptions, type Inspection, type Recovery } from "./harness-types.ts";
import { deliver } from "./reports.ts";
import type { Fence } from "./session/fence.ts";
import { Session } from "./session/session.ts";
import { type ResolvedSettings, resolveSettings } from "./settings.ts";
import type { Batch, LogMark, TaskRecord } from "./storage/records.ts";
import type { Row, Storage } from "./storage/storage.ts";
import type { LiveHandler } from "./tasks/options.ts";
import type { Registry } from "./tasks/registry.ts";
import { Scheduler } from "./tasks/scheduler.ts";
import { type NextWake, nextWake } from "./tasks/wake.ts";

export type { HarnessOptions, Inspection, LeaseOptions, Recovery } from "./harness-types.ts";

/**
 * The durable harness: one per storage at a time. `open` recovers what a crash left running (S4); nothing runs
 * until `resume()` or a call that starts work. It composes the kernel (session, scheduler, registry) with the
 * agent layer, which it reaches only through the `Conversations` it builds at open over a narrow `AgentKernel`.
 * Beside it: `harness-lease.ts` (taking and keeping the lease), `harness-lifecycle.ts` (one writer per storage,
 * the stored lifecycle), `harness-types.ts` (its options).
 */
export class Harness {
  readonly #session: Session;
  readonly registry: Registry;
  readonly readOnly: boolean;
  readonly #scheduler: Scheduler;
  readonly #options: HarnessOptions;
  /** The agent layer of this harness (conversations, submissions, views); built at the end of `open`. */
  #agent!: Conversations;
  #closed: Promise<void> | undefined;
  readonly #leaseTimers: LeaseTimers = {};
  /** What this open recovered: how the last harness stopped, and the tasks a crash cut off. */
  readonly recovery: Recovery;

  private constructor(session: Session, scheduler: Scheduler, options: HarnessOptions, recovery: Recovery) {
    this.#session = session;
    this.#scheduler = scheduler;
    this.registry = options.registry;
    this.readOnly = session.readOnly;
    this.#options = options;
    this.recovery = recovery;
  }

  /**
   * Opens a harness on `storage`. Bad options are rejected before storage is read. Unless `readOnly`, every
   * task a crash left `running` becomes `pending` with `restarts + 1`, in one commit.
   */
  static async open(storage: Storage, options: HarnessOptions, context: Context): Promise<Harness> {
    throwIfCancelled(context);
    checkOptions(options);
    const settings = resolveSettings(options.settings, storage);
    const clock: Clock = options.clock ?? { now: options.now ?? systemClock.now, setTimer: options.timer ?? systemClock.setTimer };
    const writer = options.readOnly !== true && !storage.readOnly;
    if (writer) claimStorage(storage, options);
    try {
      return await Harness.#open(storage, options, settings, clock);
    } catch (error) {
      if (writer) releaseStorage(storage, options);
      throw error;
    }
  }

  static async #open(storage: Storage, options: HarnessOptions, settings: ResolvedSettings, clock: Clock): Promise<Harness> {
    const taking = options.lease && new LeaseTaking(storage, options.lease, clock);
    const session = await Session.open(
      storage,
      clock,
      options.readOnly === true,
      settings.limits,
      taking && ((head, pinned) => taking.take(head, pinned)),
      { keepRunning: options.resume === true },
    );
    let live: ((event: Parameters<LiveHandler>[0]) => void) | undefined;
    const scheduler = new Scheduler(session, options.registry, {
      onLive: (event) => live?.(event),
      settings,
      clock,
      onReport: options.onReport,
      layer: { models: options.models, serverCalls: serverCalling(session, options.serverCalls) } satisfies AgentLayer,
      env: options.env,
      crashPoint: options.crashPoint,
    });
    // Without a lease the session stored the recovery as it loaded (decision 0054); under one it is the epoch's first
    // logged transaction, made here.
    const recovered = session.readOnly ? [] : (session.recovered ?? (await scheduler.recoverAtOpen(options.resume === true)));
    const lifecycle = storedLifecycle(session);
    const recovery = recoveryAtOpen(session, recovered, lifecycle);
    // Marked open until a clean close marks it closed; after a crash it still says open (no write needed).
    if (!session.readOnly && lifecycle !== "open") await session.commit((tx) => markLifecycle(tx, "open"));
    const harness = new Harness(session, scheduler, options, recovery);
    if (session.fence && taking) harness.#hold(session.fence, taking.ttlMs, taking.resumed);
    // The agent follows every commit from the start (views, submission waits, cleanup of faulted built-ins).
    const host = new Conversations(harness.#agentKernel());
    harness.#agent = host;
    live = (event) => host.live(event);
    if (!session.readOnly) await host.sweep(new Set(options.connectedPages ?? []));
    // With a lease held elsewhere the harness opened read-only: it follows, it does not run.
    if (options.resume && !(options.lease && !session.fence)) harness.resume();
    if (!session.readOnly) void recountOwed(session, clock, (error) => deliver(options.onReport, { kind: "error", error }));
    return harness;
  }

  get storage(): Storage {
    return this.#session.storage;
  }

  /** The lease this harness writes under and the log's head (its last stored position), when it holds one. */
  get lease(): (LogMark & { place: string }) | undefined {
    const fence = this.#session.fence;
    return fence && { place: fence.place, ...fence.mark };
  }

  /**
   * Hears each stored transaction of a harness that holds a lease, stamped with its `fence` (epoch and position),
   * in log order: what a place pushes to the next one. `text`, when the storage gave it, is the batch's JSON as its
   * log row holds it (text for text `JSON.stringify(batch)`): a mirror sends it as it is (decision 0093). Returns the
   * function that stops listening.
   */
  onLog(listener: (batch: Batch & { fence: LogMark }, text: string | undefined) => void): () => void {
    return this.#session.subscribeLog(listener);
  }

  /** A read-only copy follows the holder's log (decision 0034): `batch` is stored and published as if committed here. */
  follow(batch: Batch & { fence: LogMark }, context: Context): Promise<void> {
    this.#assertOpen();
    return waitFor(this.#session.follow(batch), context);
  }

  /**
   * The first step of a hand-over (decision 0029): stops scheduling, signals and joins every running phase (at most
   * `settings.closeTimeoutMs`), writes nothing more, and gives up writing at the log position it returns. Tasks that ran stay
   * `running`: the next holder recovers them as after a crash. The caller then pushes everything up to that position to the
   * next place and releases the lease there. The harness is closed after. `drain: false` joins nothing (a tab at `pagehide`
   * has a few milliseconds, decision 0035): it gives up right after the transaction being stored; its phases stop behind it.
   * `park: true` (a drained hand-over by a place that stays alive and moves the work on purpose, decision 0057: the
   * object handing the lease back to a tab that asked) parks the tasks it ran as `pending` in one last transaction under
   * the lease, as `close()` does: the next holder counts no restart and a model request cut there is sent again without
   * counting a failed attempt, so moving the work to and fro does not use up a task's restarts or retries.
   */
  handOver(context: Context, options: { drain?: boolean; park?: boolean } = {}): Promise<LogMark> {
    throwIfCancelled(context);
    const fence = this.#session.fence;
    if (!fence) return Promise.reject(new LeaseNotHeld(this.#options.lease?.place ?? this.storage.label, "it was opened without one"));
    // Handed over, the lease is not this place's to resume: forgotten first, before anything is sent (decision 0039).
    if (this.#options.lease?.resumePinned && fence.pinned) void this.storage.rememberLease?.(undefined).catch(() => {});
    const giveUp = () => {
      const mark = fence.mark;
      fence.lose(new LeaseNotHeld(fence.place, `it handed the lease over at log position ${mark.position}`));
      return mark;
    };
    if (options.drain !== false) return waitFor(this.#stop(options.park === true).then(giveUp), context);
    const given = this.#session.read(giveUp); // on the commit line: after the transaction in flight, before any other
    void given.then(() => this.#stop());
    return waitFor(given, context);
  }

  /**
   * This place's page said `lease.leaving` under `epoch` (decision 0101): the object takes the lease over a grace after it
   * heard the word, so the lease ends here at `end` on the harness clock (when the word was sent, plus that grace) and
   * the harness stops then as after any lost lease (`onLeaseLost`), unless it handed over first (decision 0113). False
   * when it holds no lease of `epoch`, or a pinned one; `InvalidArguments` when `end` is not a finite number.
   */
  leaving(epoch: number, end: number): boolean {
    if (!Number.isFinite(end)) throw new InvalidArguments("Harness.leaving", "end must be a finite time on the harness clock");
    const fence = this.#session.fence;
    if (!fence || this.#closed) return false;
    const stopped = () => this.#closed !== undefined;
    return leaveBy(fence, epoch, end, this.#session.clock, stopped, (error) => this.#session.loseFence(error), this.#leaseTimers);
  }

  /** Keeps the lease: renews it every third of its time on the harness clock; stops the harness when it is lost. */
  #hold(fence: Fence, ttlMs: number, resumed: boolean): void {
    const lease = this.#options.lease!;
    const clock = this.#session.clock;
    this.#session.onFenceLost = (reason) => {
      // Lost: a reopen must ask the arbiter again (decision 0039).
      if (lease.resumePinned) void this.storage.rememberLease?.(undefined).catch(() => {});
      deliver(this.#options.onReport, { kind: "error", error: reason });
      const stopped = this.#stop();
      const told = this.#options.onLeaseLost;
      // Told at once, with the stop under way (a host says "elsewhere" before the stop ends, decision 0057).
      if (told)
        try {
          told(
            reason,
            stopped.catch(() => {}),
          );
        } catch {
          // a listener's failure is not the harness's
        }
    };
    const stopped = () => this.#closed !== undefined;
    const lose = (error: Error) => this.#session.loseFence(error);
    if (resumed) return void confirmResumed(lease, fence.epoch, clock, stopped, lose);
    if (!Number.isFinite(ttlMs)) return;
    this.#leaseTimers.renewal = renewLease(lease, fence, ttlMs, clock, stopped, lose);
  }

  /** Stops as a crash does, without one: nothing more is written, what ran stays `running`. */
  #stop(park = false): Promise<void> {
    this.#agent.close();
    cancelTimers(this.#leaseTimers);
    this.#closed ??= this.#scheduler.close(park).finally(() => releaseStorage(this.storage, this.#options));
    return this.#closed;
  }

  get settings(): ResolvedSettings {
    return this.#scheduler.settings;
  }

  /**
   * The root conversation, created on first use. `agent` (model, instructions, tools) is applied when it
   * changes the stored configuration, so passing the same options at every start writes nothing.
   */
  async root(context: Context, options: { agent?: AgentChange } = {}): Promise<Conversation> {
    throwIfCancelled(context);
    this.#assertOpen();
    return this.#agent.root(context, options);
  }

  /** Creates a conversation of its own (not the root), configured with `agent`. */
  async createConversation(options: { agent?: AgentChange }, context: Context): Promise<Conversation> {
    throwIfCancelled(context);
    this.#assertOpen();
    return this.#agent.createConversation(options, context);
  }

  /** A handle on an existing conversation. */
  conversation(id: number): Conversation {
    this.#assertOpen();
    return this.#agent.conversation(id);
  }

  /** Reacquires a submission by id (for example after a reopen); `NotFound` when there is none. */
  async submission(id: number, context: Context): Promise<Submission> {
    throwIfCancelled(context);
    this.#assertOpen();
    return this.#agent.submission(id, context);
  }

  /** The committed record of a task (live or terminal), or undefined. */
  async getTask(id: number, context: Context): Promise<TaskRecord | undefined> {
    throwIfCancelled(context);
    this.#assertOpen();
    const live = this.#session.live.get(id);
    return live ? cloneJson(live) : waitFor(this.storage.getTask(id), context);
  }

  /** Resolves with the task's terminal record. Starts scheduling (like `resume()`), unless read-only. */
  waitForTask(id: number, context: Context): Promise<TaskRecord> {
    this.#assertOpen();
    if (!this.readOnly) this.#scheduler.resume();
    return this.#scheduler.waitForTask(id, context);
  }

  /** Durably asks a task (and its owned work) to abort. Does not start scheduling. */
  abortTask(id: number, context: Context): Promise<"marked" | "terminal"> {
    this.#assertOpen();
    return this.#scheduler.abortTask(id, context);
  }

  /** Every live task with what it is doing or waiting for. Writes nothing. */
  async inspect(context: Context): Promise<Inspection> {
    throwIfCancelled(context);
    const scheduling = this.#closed ? "closed" : this.readOnly ? "read-only" : this.#scheduler.enabled ? "running" : "paused";
    return {
      scheduling,
      tasks: this.#scheduler.inspect(),
      approvals: this.#agent.pendingApprovals(),
      pageCalls: this.#agent.pendingPageCalls(),
      recovery: cloneJson(this.recovery),
    };
  }

  /**
   * Releases the page tool calls page `pageId` claimed, for a host that saw that page go (a closed tab, a
   * dropped socket): each follows its replay policy (safe: waits for the next page; unsafe: interrupted).
   * Resolves with how many it released.
   */
  releasePage(pageId: string, context: Context): Promise<number> {
    this.#assertOpen();
    return this.#agent.releasePage(pageId, context);
  }

  /**
   * Hears every stored commit with its batch (what it wrote), in commit order; returns the function that stops listening.
   * A listener's throw or rejection goes to `onReport` as an error report (once until it is heard well again), never to
   * the commit or the others (0147 and its review).
   */
  onCommit(listener: (commit: { readonly batch: Batch }) => void): () => void {
    return this.#session.subscribe(failingOnce(listener, (error) => deliver(this.#options.onReport, { kind: "error", error })));
  }

  /**
   * The id this storage draws next (S1: one id space). Every transaction that drew an id below it is stored here, so on
   * a copy that follows another place an id at or past it may still arrive, and one below it that names no
   * conversation never will (decision 0103).
   */
  get nextId(): number {
    return this.#session.nextId;
  }

  /** The ids of every conversation, in creation order. */
  conversationIds(): number[] {
    return [...this.#session.conversations.keys()];
  }

  /** The root conversation's id, or undefined before `root()` first created it. */
  get rootConversationId(): number | undefined {
    return this.#session.rootConversationId;
  }

  /** True when no task is live and no submission is open: nothing is left to do. */
  get quiet(): boolean {
    return this.#session.live.size === 0 && this.#session.openSubmissions.size === 0;
  }

  /**
   * When the kernel next has work (see `NextWake`): what a host that must wake its process asks (a Durable
   * Object's alarm). `horizon`: stop looking once busy with a wake-up at or before it.
   */
  nextWake(horizon?: number): NextWake {
    return nextWake(this.#session.live, (kind) => this.registry.task(kind) !== undefined, this.#session.clock.now(), horizon);
  }

  /** Read-only SQL (see `Storage.query`) on the commit line, so it sees every commit made before it. */
  query(sql: string, ...params: Json[]): Promise<Row[]> {
    this.#assertOpen();
    return this.#session.read(() => this.#session.storage.query(sql, ...params));
  }

  /** Starts scheduling. Throws `ReadOnlySession` on a read-only harness. */
  resume(): void {
    this.#assertOpen();
    if (this.readOnly) throw new ReadOnlySession("resume()");
    this.#scheduler.resume();
  }

  /**
   * Stops scheduling, signals every running phase and waits for it to return, then parks the tasks it ran as
   * `pending` without counting a restart. The storage stays open (a new Harness may open it again).
   */
  close(context: Context): Promise<void> {
    throwIfCancelled(context);
    this.#agent.close();
    cancelTimers(this.#leaseTimers);
    this.#closed ??= this.#scheduler
      .close()
      .catch((error: unknown) => {
        // The lease was lost (expired unnoticed, superseded) before the tasks could be parked: the place stops as
        // after a crash, what ran stays running, and whoever holds the log next counts the restarts.
        if (!(error instanceof LeaseNotHeld || error instanceof StaleEpoch)) throw error;
      })
      .then(async () => {
        if (this.readOnly) return;
        // Best effort: if it cannot be written (a full quota), the next open reports a crash, which loses nothing.
        await this.#session.commitWhileSealing((tx) => markLifecycle(tx, "closed")).catch(() => {});
      })
      .finally(() => releaseStorage(this.storage, this.#options));
    return waitFor(this.#closed, context);
  }

  get closed(): boolean {
    return this.#closed !== undefined;
  }

  #assertOpen(): void {
    if (this.#closed) throw new HarnessClosed();
  }

  /** What the agent layer may use of this harness (and nothing more). */
  #agentKernel(): AgentKernel {
    const harness = this;
    return {
      session: this.#session,
      readOnly: this.readOnly,
      get closed() {
        return harness.closed;
      },
      resume: () => this.resume(),
      abortTask: (id, context) => this.abortTask(id, context),
      waitForTask: (id, context) => this.waitForTask(id, context),
      report: (report) => deliver(this.#options.onReport, report),
    };
  }
}
