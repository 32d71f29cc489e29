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
 * live"), waiting tasks by the task they wait on, and sleepers. Kept in step by `index` for every committed
 * record (at open and after every commit); transitions read it together with what a commit staged.
 */
export class LiveIndex {
  /** Live (non-background) children by owner. */
  readonly #children = new Map<number, Set<number>>();
  /** Waiting tasks by the task they wait on. */
  readonly #waitersOn = new Map<number, Set<number>>();
  readonly #waitingOn = new Map<number, number[]>();
  readonly sleepers = new Set<number>();

  /**
   * Takes a committed record into the index. Returns the members of a failFast wait it starts (some may have
   * failed before the wait was committed: the caller looks them up), otherwise undefined.
   */
  index(task: TaskRecord): readonly number[] | undefined {
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
    if (task.state.status === "sleeping") this.sleepers.add(task.id);
    else this.sleepers.delete(task.id);
    return failFast;
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

  hasLiveOwnedWork(tx: KernelTx, id: number): boolean {
    return this.liveChildren(tx, id).length > 0;
  }
}

/** True when task `id` is live as `tx` sees it. */
export function isLive(tx: KernelTx, id: number): boolean {
  const task = tx.task(id);
  return task !== undefined && task.state.status !== "terminal";
}
