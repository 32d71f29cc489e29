import type { Clock } from "../base/clock.ts";
import { SerialQueue } from "../base/serial.ts";
import { HarnessClosed, InvalidCommit, LeaseNotHeld, ReadOnlySession } from "../errors.ts";
import type { JsonLimits } from "../limits.ts";
import { pendingAt } from "../storage/progress.ts";
import type { Batch, ConversationRecord, DocumentRecord, LogMark, PinnedLease, SubmissionRecord, TaskRecord } from "../storage/records.ts";
import type { DamagedRow, Storage } from "../storage/storage.ts";
import { CommitLine } from "./commit-line.ts";
import type { CommitRecord } from "./commit-record.ts";
import { emptyBatch, GROUP_LIMIT, TurnGroup } from "./commit-settle.ts";
import type { CommitOptions, Pending } from "./commit-types.ts";
import type { Fence } from "./fence.ts";
import { loadMirror, publish } from "./mirror.ts";
import { markStorageFailure } from "./storage-failure.ts";
import { damagedRows, followProblem, taskProblem } from "./task-shape.ts";
import type { KernelTx, TxActor } from "./tx.ts";

export { GROUP_LIMIT } from "./commit-settle.ts";
export type { CommitOptions, Published } from "./commit-types.ts";

/**
 * The one mutation line of a harness. Commits run strictly one after another: the callback stages writes on a
 * `KernelTx`, the batch is stored in one transaction, and only then do the in-memory mirrors (live tasks, current
 * documents, open submissions, conversations) change and listeners hear of it. A commit that fails at any
 * point changes nothing, in storage or in memory.
 *
 * Group commit (decision 0026): the groupable commits that become ready while the line is busy wait together and
 * take the next turn as one group — each built on the state the ones before it left, each failing alone, all stored
 * in one transaction, then published one by one in order. A commit that finds the line idle goes at once, alone.
 *
 * The parts beside it: `mirror.ts` (the mirrors and how a stored batch moves them), `lease-line.ts` (the lease's
 * side of the line), `commit-line.ts` (how a turn decides, stores and settles its commits; this class extends both),
 * `group.ts` (a group's overlay), `tx.ts` (what a commit stages).
 */
export class Session extends CommitLine {
  readonly storage: Storage;
  readonly clock: Clock;
  readonly readOnly: boolean;
  readonly limits: JsonLimits; // `settings.limits`: what a value entering through a transaction may be (`KernelTx.admit`)
  readonly live = new Map<number, TaskRecord>();
  readonly conversations = new Map<number, ConversationRecord>();
  readonly documents = new Map<string, DocumentRecord>();
  readonly openSubmissions = new Map<number, SubmissionRecord>();
  readonly handoverKeys = new Map<string, number>(); // hand-over keys (a follower tab's) and when each expires (KernelTx deletes)
  nextId = 1;
  rootConversationId: number | undefined;
  recovered: number[] | undefined; // the tasks the open's recovery counted when `open` itself stored it (`recover`, 0054)
  damaged: DamagedRow[] = []; // rows a read-only open left out because they are damaged (a writable open refuses them)
  readonly #line = new SerialQueue(); // the commit line: commits, recovery and reads on it run one after another
  #open: TurnGroup | undefined; // the group the line's last queued turn will carry, while that turn has not started
  #firstQueued: TurnGroup | undefined; // the groups whose turns are queued and not started, in order (`#runQueuedGroup`)
  #lastQueued: TurnGroup | undefined;
  #releaseCheckpoints: (() => void) | undefined; // ends the open's hold on storage's checkpoint at the first step stored (0033)
  #stepped: (() => void) | undefined; // stepStored's resolve, until the first group of task steps is stored
  /** Settles at the first group of task steps stored, or the seal (decision 0098: S4's slices start after it). */
  readonly stepStored = new Promise<void>((resolve) => (this.#stepped = resolve));
  #sealed = false;

  private constructor(storage: Storage, clock: Clock, readOnly: boolean, limits: JsonLimits, fence: Fence | undefined) {
    super(fence);
    this.storage = storage;
    this.clock = clock;
    this.readOnly = readOnly;
    this.limits = limits;
  }

  /**
   * Loads the mirrors from `storage`. With `lease`, the place takes its lease knowing the log's stored head: a
   * fence to write under, or undefined when another place holds it (the session then opens read-only). With
   * `recover` (S4), a writable session without a lease stores the open's recovery here, before its mirror is built:
   * every task loaded `running` gets `restarts + 1` (and `pending`, unless `keepRunning`) on the very record just
   * parsed, in one commit through `storage.apply` (decision 0054). `recovered` then lists them; a fenced session
   * recovers through `recoverRunning` instead (its recovery is the epoch's first logged transaction).
   */
  static async open(
    storage: Storage,
    clock: Clock,
    readOnly: boolean,
    limits: JsonLimits,
    lease?: (head: LogMark | undefined, pinned: PinnedLease | undefined) => Promise<Fence | undefined>,
    recover?: { keepRunning: boolean },
  ): Promise<Session> {
    const state = await storage.load();
    const writer = !readOnly && !storage.readOnly;
    // A log's every transaction is in it: one written here without a position would never be pushed to the next place.
    if (writer && !lease && state.log)
      throw new LeaseNotHeld(
        storage.label,
        `its log was written under a lease up to position ${state.log.position}: open it with HarnessOptions.lease, or readOnly`,
      );
    const fence = lease && writer ? await lease(state.log, state.pinned) : undefined;
    const session = new Session(storage, clock, !writer || (lease !== undefined && fence === undefined), limits, fence);
    // B3/B4: unparsable rows, unrunnable live tasks: a writable open refuses them, a read-only one leaves them out.
    const damaged = [...(state.damaged ?? [])];
    const liveTasks = state.liveTasks.filter((task) => {
      const problem = taskProblem(task);
      if (problem) damaged.push({ table: "tasks", id: task.id, problem });
      return !problem;
    });
    if (damaged.length > 0 && !session.readOnly) throw damagedRows(storage.label, damaged);
    session.damaged = damaged;
    session.nextId = state.nextId;
    session.rootConversationId = state.rootConversationId;
    if (recover && !session.readOnly && !fence) session.recovered = await session.#recoverLoaded(liveTasks, recover.keepRunning);
    loadMirror(session, state, liveTasks);
    return session;
  }

  /**
   * S4 at open, on the records the load just parsed (decision 0054): they are this session's own, not frozen and not
   * shared yet, so each running one is counted in place — no second copy of every live task, no publication of a
   * commit no one can hear yet (the scheduler indexes the mirror when it is built, after this). The batch is the
   * same as `recoverRunning`'s: one commit, stored (on SQLite as one statement, decision 0043) before the mirror
   * exists, so before any task can run. A refused commit fails the open, and the records are dropped with it.
   */
  async #recoverLoaded(tasks: TaskRecord[], keepRunning: boolean): Promise<number[]> {
    const counted: TaskRecord[] = [];
    for (const task of tasks) {
      if (task.state.status !== "running") continue; // in place, keys in order: the JSON of `{ ...task, state, restarts }`
      if (!keepRunning) task.state = pendingAt(task.state); // its progress stamp kept (decision 0112)
      task.restarts = (task.restarts ?? 0) + 1;
      counted.push(task);
    }
    if (counted.length === 0) return [];
    // Its checkpoint (and the reservation passes') would stand in front of the first resumed step (decision 0033).
    this.#releaseCheckpoints ??= this.storage.holdCheckpoints?.();
    try {
      await this.storage.apply({ ...emptyBatch, tasks: counted, recount: { keepRunning } });
    } catch (error) {
      throw markStorageFailure(error);
    }
    const ids = counted.map((task) => task.id);
    return ids.every((id, index) => index === 0 || ids[index - 1]! < id) ? ids : ids.sort((a, b) => a - b);
  }

  get sealed(): boolean {
    return this.#sealed;
  }

  /**
   * Runs `body` on the line and stores what it staged. `body` must be synchronous. The result is the body's
   * return value, once the commit is durable. `arg` is passed to `body` beside the `tx` (decision 0060: a task's
   * step commits through one body made per invocation, with its change as `arg`, not two closures per step).
   */
  commit<T, A = undefined>(body: (tx: KernelTx, arg: A) => T, actor?: TxActor, options?: CommitOptions, arg?: A): Promise<T> {
    if (this.#sealed && !options?.whileSealed) return Promise.reject(new HarnessClosed());
    if (this.readOnly) return Promise.reject(new ReadOnlySession("A commit"));
    return new Promise<T>((resolve, reject) => {
      const pending: Pending = {
        body: body as Pending["body"],
        arg,
        actor,
        resolve: resolve as (value: unknown) => void,
        reject,
        settled: options?.settled,
        tx: undefined,
        result: undefined,
        batch: undefined,
        error: undefined,
      };
      this.#enqueue(pending, options?.group === true);
    });
  }

  /**
   * `commit` through a record the caller reuses (decision 0077): `record.body` runs with `arg`, under the record's
   * actor and options, and the promise is the commit's own. A record still on the line (a second commit before
   * the first settled) is not shared: that commit goes through `commit`, with a record of its own.
   */
  commitThrough<T>(record: CommitRecord, arg: unknown): Promise<T> {
    if (record.busy) return this.commit(record.body, record.actor, record.options, arg) as Promise<T>;
    if (this.#sealed && !record.options.whileSealed) return Promise.reject(new HarnessClosed());
    if (this.readOnly) return Promise.reject(new ReadOnlySession("A commit"));
    record.busy = true;
    record.arg = arg;
    // Grouped: its promise follows its group's end (decision 0087), one `then` and no resolving functions a commit.
    if (record.options.group === true) return this.#enqueue(record, true)!.ended.then(record.settle) as Promise<T>;
    const promise = new Promise<T>(record.executor as ConstructorParameters<typeof Promise<T>>[0]);
    this.#enqueue(record, false);
    return promise;
  }

  /** Queues a commit: alone in a turn of its own, or (`group`) in the group the line's last queued turn carries (returned). */
  #enqueue(pending: Pending, group: boolean): TurnGroup | undefined {
    if (!group) {
      this.#turn(() => this.#runGroup([pending], undefined));
      return undefined;
    }
    const open = this.#open;
    if (open !== undefined && open.members.length < GROUP_LIMIT) {
      open.members.push(pending);
      return open;
    }
    const next = new TurnGroup(this.#endCheckpointHold, pending);
    if (this.#lastQueued) this.#lastQueued.next = next;
    else this.#firstQueued = next;
    this.#lastQueued = next;
    this.#turn(this.#runQueuedGroup);
    this.#open = next; // after #turn, which closes the group before it
    return next;
  }

  /**
   * A group's turn: the first queued group. The line runs its turns in the order they were queued, so the groups
   * (queued in order, linked through `next`) need no closure each to name theirs (decision 0126).
   */
  readonly #runQueuedGroup = (): Promise<void> => {
    const group = this.#firstQueued!;
    this.#firstQueued = group.next;
    if (group.next === undefined) this.#lastQueued = undefined;
    group.next = undefined;
    return this.#runGroup(group.members, group);
  };

  /** Queues a turn of the line; a group still open before it closes (commits keep their order). */
  #turn<T>(work: () => T | Promise<T>): Promise<T> {
    this.#open = undefined;
    return this.#line.run(work);
  }

  /**
   * One turn: the group's commits. A refused group (more than one commit) settles none of them: they are decided
   * and stored again one at a time, so a refusal reaches exactly the commits storage refuses alone. After a
   * refusal the next turns go one at a time too, until one is stored. Never rejects (each commit settles). A
   * group of task steps (`group`) ends once all its commits are settled: the promises that follow it settle then.
   * A lone step's group (one commit, stored whole: never refused as a group) makes no async frame (decision 0124).
   */
  #runGroup(members: Pending[], group: TurnGroup | undefined): Promise<void> {
    if (group !== undefined && this.#open === group) this.#open = undefined;
    if (members.length === 1 && group !== undefined) return this.storeLone(members, group);
    return this.#runGroups(members, group);
  }

  async #runGroups(members: Pending[], group: TurnGroup | undefined): Promise<void> {
    try {
      for (let start = 0; start < members.length; ) {
        const count = this.refusedLast ? 1 : members.length - start; // the whole list goes as it is, not copied
        if (await this.store(count === members.length ? members : members.slice(start, start + count))) start += count;
        else this.refusedLast = true;
      }
      if (group) this.#endCheckpointHold(); // a task step after the open's recovery: its held checkpoint may run
    } finally {
      group?.end();
    }
  }

  #endCheckpointHold = (): void => {
    const release = this.#releaseCheckpoints;
    const stepped = this.#stepped; // called once: a settled promise's resolve at every group cost a Node step 6%
    this.#releaseCheckpoints = this.#stepped = undefined;
    release?.();
    stepped?.();
  };

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
        const state = keepRunning ? task.state : pendingAt(task.state);
        tasks.push({ ...task, state, restarts: (task.restarts ?? 0) + 1 });
      }
      // Under a lease the open's recovery is the new epoch's first transaction even when it recovers nothing:
      // taking the epoch and recovering are one commit (decision 0029).
      if (tasks.length === 0 && !this.fence) return [];
      // Without a lease the storage may count every restart in one statement (decision 0043); a fenced batch is
      // logged and pushed whole, as it is.
      const batch: Batch = { ...emptyBatch, tasks, ...(this.fence || tasks.length === 0 ? {} : { recount: { keepRunning } }) };
      this.stamp(batch);
      // Its checkpoint (and the reservation passes') would stand in front of the first resumed step (decision 0033).
      if (tasks.length > 0) this.#releaseCheckpoints ??= this.storage.holdCheckpoints?.();
      let text: string | void;
      try {
        text = await this.storage.apply(batch);
      } catch (error) {
        throw this.fenceRefused(error) ? error : markStorageFailure(error);
      }
      this.logged(batch, text);
      publish(this, batch);
      this.tell({ batch, reports: [] });
      return tasks.map((task) => task.id).sort((a, b) => a - b);
    };
    return this.#turn(run);
  }

  /**
   * A read-only copy follows its log (decision 0034): stores a transaction the lease's holder made (storage refuses
   * it, writing nothing, when it does not continue the log: `LogOutOfOrder`, `StaleEpoch`), then publishes it as a
   * commit of this session, so every view, waiter and listener moves on as the holder's own did.
   */
  follow(batch: Batch & { fence: LogMark }): Promise<void> {
    if (this.#sealed) return Promise.reject(new HarnessClosed());
    const problem = !this.readOnly || this.fence ? "this harness writes its own log" : followProblem(batch);
    if (problem) return Promise.reject(new InvalidCommit(`A pushed transaction was refused: ${problem}. Nothing was written.`));
    return this.#turn(async () => {
      await this.storage.apply(batch);
      publish(this, batch);
      this.tell({ batch, reports: [] });
    });
  }

  /** Runs `body` on the line without writing (a consistent read of the mirrors). */
  read<T>(body: () => T | Promise<T>): Promise<T> {
    return this.#turn(async () => body());
  }

  /** No commit is admitted after this; commits already on the line settle. */
  seal(): Promise<void> {
    const drained = this.#line.idle;
    this.#sealed = true;
    return drained.then(() => this.#endCheckpointHold());
  }

  /** Commits admitted before the seal still run: used by close for its final bookkeeping commit. */
  commitWhileSealing<T>(body: (tx: KernelTx) => T): Promise<T> {
    return this.commit(body, undefined, { whileSealed: true });
  }
}
