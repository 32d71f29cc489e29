import type { KernelTx } from "../session/tx.ts";
import type { TaskRecord } from "../storage/records.ts";

/**
 * What an id with no entry maps to: one shared empty set, so a row with none allocates nothing (decision 0066).
 * A set, not a frozen array: the callers' for…of then sees sets only, and Node 20's optimized for…of allocates an
 * iterator and a result object to walk a frozen array (decision 0077). Never written: it is only handed out as
 * an `Iterable`.
 */
const NONE: ReadonlySet<number> = new Set<number>();

/**
 * The scheduler's index of the committed live set: owned children by owner (for cascades and "owned work is
 * live") and waiting tasks by the task they wait on (the sleepers are the sleep timer's queue: decision 0115). Kept
 * in step by `index` for every committed record (at open and after every commit); transitions read it together with
 * what a commit staged.
 */
export class LiveIndex {
  /** Live (non-background) children by owner. */
  readonly #children = new Map<number, Set<number>>();
  /** Waiting tasks by the task they wait on. */
  readonly #waitersOn = new Map<number, Set<number>>();
  readonly #waitingOn = new Map<number, number[]>();
  /**
   * The largest progress stamp handed out or seen on a record taken in (decision 0112): at open, the largest of the
   * live records; a step's stamp is one more. Only the order among live tasks matters, so terminal rows need not be
   * read, and a stamp handed out to a commit that was refused leaves a gap, nothing else.
   */
  #progressed = 0;

  /**
   * Takes a committed record into the index. Returns the members of a failFast wait it starts (some may have
   * failed before the wait was committed: the caller looks them up), otherwise undefined.
   */
  index(task: TaskRecord): readonly number[] | undefined {
    const live = task.state.status !== "terminal";
    const stamp = (task.state as { progressed?: unknown }).progressed;
    if (typeof stamp === "number" && stamp > this.#progressed && Number.isSafeInteger(stamp)) this.#progressed = stamp;
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
    const waitedOn = this.#waitingOn.get(task.id);
    if (waitedOn !== undefined) {
      for (const member of waitedOn) {
        const waiters = this.#waitersOn.get(member);
        if (waiters?.delete(task.id) && waiters.size === 0) this.#waitersOn.delete(member);
      }
      this.#waitingOn.delete(task.id);
    }
    let failFast: readonly number[] | undefined;
    if (task.state.status === "waiting") {
      this.#waitingOn.set(task.id, task.state.on);
      for (const member of task.state.on) {
        let set = this.#waitersOn.get(member);
        if (!set) this.#waitersOn.set(member, (set = new Set()));
        set.add(task.id);
      }
      if (task.state.policy === "failFast") failFast = task.state.on;
    }
    return failFast;
  }

  /** The next progress stamp (decision 0112): later than every one a live task holds. */
  nextProgress(): number {
    return ++this.#progressed;
  }

  /** The tasks waiting on `id` (committed). */
  waitersOn(id: number): Iterable<number> {
    return this.#waitersOn.get(id) ?? NONE;
  }

  /** The committed live children of `id`. */
  children(id: number): Iterable<number> {
    return this.#children.get(id) ?? NONE;
  }

  /**
   * The live children of `id`, committed or staged in `tx`. The committed ones are this index's (it is in step
   * with the mirror); only the staged records are looked through, not the whole live set — a task's last step
   * in a group of a hundred would otherwise walk every live task.
   */
  liveChildren(tx: KernelTx, id: number): number[] {
    const out = new Set(this.#children.get(id) ?? []);
    for (const task of tx.stagedTasks()) if (task.owner === id && !task.background) out.add(task.id);
    return [...out].filter((child) => isLive(tx, child));
  }

  /**
   * Whether `id` has a live child, committed or staged in `tx`: `liveChildren` without its list, stopping at the
   * first one (decision 0083). Every task's last step asks it, and in a group of a hundred the list walked every
   * record the group staged through a generator, an object a record.
   */
  hasLiveOwnedWork(tx: KernelTx, id: number): boolean {
    const committed = this.#children.get(id);
    if (committed !== undefined) for (const child of committed) if (isLive(tx, child)) return true;
    return tx.someStaged(isLiveChildOf, id);
  }
}

/** Whether a staged record is a live (non-background) child of `owner`, as `tx` sees it. */
function isLiveChildOf(task: TaskRecord, tx: KernelTx, owner: number): boolean {
  return task.owner === owner && !task.background && isLive(tx, task.id);
}

/** True when task `id` is live as `tx` sees it. */
export function isLive(tx: KernelTx, id: number): boolean {
  const task = tx.task(id);
  return task !== undefined && task.state.status !== "terminal";
}
