import type { Clock } from "../base/clock.ts";
import type { KernelTx } from "../session/tx.ts";
import type { ResolvedSettings } from "../settings.ts";
import { progressOf } from "../storage/progress.ts";
import type { Checkpoint, TaskRecord } from "../storage/records.ts";
import { type Invocation, type Mode, newInvocation } from "./invocation.ts";
import { isLive, type LiveIndex } from "./live-index.ts";
import type { DefinitionResolver } from "./resolve.ts";
import { fault, finalRecord, hasIntent, mark, ownerHasIntent, take, terminate } from "./transitions.ts";

/** Invocations started per scheduling pass (one commit); the next pass follows at once. */
const RESERVATION_BATCH = 256;

export interface PassOptions {
  readonly index: LiveIndex;
  readonly resolver: DefinitionResolver;
  /** The invocations running now; a pass adds the ones it reserves. */
  readonly invocations: Map<number, Invocation>;
  /** Where a pass notes the sleepers it found due, with their `until` (the sleep timer skips them). */
  readonly seenDue: Map<number, number>;
  readonly clock: Clock;
  readonly settings: ResolvedSettings;
}

/**
 * One scheduling pass, inside one commit: reconcile the candidates (cascades, failFast, finalization), then
 * reserve invocations for the tasks that can run, at most `RESERVATION_BATCH` per pass. The candidates a full
 * pass leaves are kept, reconciled and in order, for the next one.
 */
export class SchedulingPass {
  readonly #options: PassOptions;
  /**
   * Candidates a full pass left for the next one: reconciled already, in reservation order, from `#deferredAt` on. A pass
   * that takes from it moves the cursor instead of copying what is left (decision 0059: after a crash with 10,000
   * running, 40 passes copied the remaining backlog each, about 200,000 ids in front of the last task's start).
   */
  #deferred: number[] = [];
  #deferredAt = 0;
  /** No pass has run yet: the next is the first after the open, which ranks by progress too (decision 0112). */
  #first = true;

  constructor(options: PassOptions) {
    this.#options = options;
  }

  get hasDeferred(): boolean {
    return this.#deferredAt < this.#deferred.length;
  }

  /** Runs a pass over `ids` (and the deferred ones), `failed` the failed outcomes seen; fills `started`. */
  run(tx: KernelTx, ids: number[], failed: number[], started: Invocation[]): void {
    const { index, resolver, invocations, seenDue, clock, settings } = this.#options;
    const added = new Set<number>(); // candidates the reconcile adds to `ids` (failFast waiters, cascades)
    const mixed = this.#reconcile(tx, ids, added, failed);
    const now = clock.now();
    // Reservation order. A pass with no rest from an earlier one (the first after an open) takes its reconciled
    // candidates fewest restarts first, then by id (decision 0105; ranked only when the reconcile saw more than one
    // count). A pass with a rest takes it first, in its order, then its own new candidates by id (decision 0109): new
    // work never goes in front of what an earlier pass deferred, so a deferred task is reached within
    // ⌈its position / RESERVATION_BATCH⌉ passes however much new work the started tasks make. The first pass after
    // the open ranks by the progress stamps too (decision 0112): within a count, the task that stepped last first, so
    // on a first crash (every count 1) the task that was stepping is not behind every one that was not.
    const sorted = candidateIds(ids, added);
    const rest = this.#deferredAt < this.#deferred.length;
    const first = this.#first;
    this.#first = false;
    const ordered = rest
      ? afterRest(this.#deferred, this.#deferredAt, sorted)
      : first
        ? byProgress(tx, sorted)
        : mixed
          ? byRestarts(tx, sorted)
          : sorted;
    let position = ordered === this.#deferred ? this.#deferredAt : 0;
    this.#deferred = [];
    this.#deferredAt = 0;
    for (; position < ordered.length; position++) {
      const id = ordered[position]!;
      if (started.length >= RESERVATION_BATCH) {
        // Start this batch before reserving more: after a crash with thousands of tasks, the first ones
        // resume while the rest are still being reserved. The rest go round again at once, without being
        // reconciled, sorted or copied again (each pass stays proportional to its batch, not to the backlog).
        this.#deferred = ordered;
        this.#deferredAt = position;
        break;
      }
      const task = tx.task(id);
      if (!task || invocations.has(id)) continue;
      const status = task.state.status;
      // A running task without an invocation is one whose run ended on an abort mark or at a definition
      // handover: it is taken again (in abort mode, or under the new definition) without a new write.
      if (status === "completing" || status === "terminal") continue;
      if (status === "waiting" && task.state.on.some((member) => isLive(tx, member))) continue;
      // An abort mark does not wait for the sleep (or retry backoff) to end: the abort runs now (B1).
      // A sleep without `until` lasts until a commit wakes the task (`wakeSleeper`).
      if (status === "sleeping" && task.state.until !== undefined) {
        if (task.state.until > now) seenDue.delete(id);
        else seenDue.set(id, task.state.until);
      }
      if (status === "sleeping" && (task.state.until === undefined || task.state.until > now) && !task.abortRequested) continue;
      const mode: Mode = task.abortRequested ? "abort" : "run";
      if (mode === "abort" && index.hasLiveOwnedWork(tx, id)) continue;
      if (mode === "run" && ownerHasIntent(tx, task)) continue;
      const resolution = resolver.resolve(task);
      if (!resolution.ok) {
        if (mode === "abort") terminate(tx, index, task, { status: "orphaned", reason: resolution.reason });
        continue;
      }
      let record = task;
      if (resolution.migrated) {
        record = { ...task, version: resolution.definition.version, input: resolution.migrated.input };
      }
      const checkpoint = resolution.migrated?.checkpoint ?? (task.state as { checkpoint: Checkpoint }).checkpoint;
      let invocationMode: Mode = mode;
      const limit = settings.restartLimit;
      const restarts = record.restarts ?? 0;
      // S6 (B6): the limit also holds for the abort handler, and for onRestartLimit itself (which runs at
      // `restarts === limit`; one more cut-off means it is the handler that kills the process).
      const handler = mode === "abort" ? "abort handler" : resolution.definition.onRestartLimit ? "restart-limit handler" : undefined;
      if ((mode === "abort" && restarts >= limit) || (mode === "run" && restarts >= limit && (!handler || restarts > limit))) {
        const cut = mode === "abort" || restarts > limit ? `'s ${handler}` : "";
        const message = `Task ${record.id} (${record.kind})${cut} was cut off ${restarts} times in a row without progress; the restart limit is ${limit}, so it was not run again.`;
        fault(tx, index, record, "restart_limit", message);
        continue;
      }
      if (mode === "run" && restarts >= limit) invocationMode = "limit";
      take(tx, task, record, checkpoint, now);
      const invocation = newInvocation(record, resolution.definition, invocationMode);
      invocations.set(record.id, invocation);
      started.push(invocation);
    }
  }

  /** Reconciles the candidates; whether they hold more than one restart count (decision 0105: then ranked). */
  #reconcile(tx: KernelTx, ids: readonly number[], added: Set<number>, failed: number[]): boolean {
    const { index } = this.#options;
    // The counts seen, told apart on the records this loop reads anyway (no lookup a candidate more in the common case).
    let count: number | undefined;
    let mixed = false;
    // failFast: a failed member marks the other live members of every failFast wait it belongs to.
    // The work is `ids` (last first) under a stack of what marking and finalizing push (decision 0129: the order of
    // one stack of `ids` and the pushes, without copying `ids` into it or adding each back to a set of candidates).
    const queue: number[] = [];
    let next = ids.length - 1;
    for (const id of failed) {
      for (const waiterId of index.waitersOn(id)) {
        const waiter = tx.task(waiterId);
        if (waiter?.state.status !== "waiting" || waiter.state.policy !== "failFast") continue;
        for (const member of waiter.state.on) mark(tx, member, queue);
        added.add(waiterId);
        const seen = restartsOf(waiter);
        if (count === undefined) count = seen;
        else if (seen !== count) mixed = true;
      }
    }
    // Cascades and finalization, to a fixpoint: marking a child may free an owner, finalizing may free its owner.
    while (queue.length > 0 || next >= 0) {
      const pushed = queue.length > 0;
      const id = pushed ? queue.pop()! : ids[next--]!;
      const task = tx.task(id);
      if (!task) continue;
      if (pushed) added.add(id);
      const seen = restartsOf(task);
      if (count === undefined) count = seen;
      else if (seen !== count) mixed = true;
      if (hasIntent(task)) {
        for (const child of index.liveChildren(tx, id)) mark(tx, child, queue);
      }
      if (task.state.status === "completing" && !index.hasLiveOwnedWork(tx, id)) {
        tx.putTask(finalRecord(tx, task, task.state.outcome));
        if (task.owner !== undefined) queue.push(task.owner);
        for (const waiter of index.waitersOn(id)) queue.push(waiter);
      }
    }
    return mixed;
  }
}

/**
 * The candidates ascending, each once: `ids` with what the reconcile `added`. `ids` itself when it is ascending and
 * nothing was added (the first pass after an open: every live id, in the mirror's id order) — no set and no sort of
 * every live id in front of the first resumed step (decision 0129).
 */
export function candidateIds(ids: number[], added: ReadonlySet<number>): number[] {
  let ascending = true;
  for (let at = 1; ascending && at < ids.length; at++) ascending = ids[at - 1]! < ids[at]!;
  if (ascending && added.size === 0) return ids;
  const all = new Set(ids);
  for (const id of added) all.add(id);
  return [...all].sort((a, b) => a - b);
}

/** A task's restarts as a reservation rank (S4's count; 0 when absent, or not a finite count). */
function restartsOf(task: TaskRecord | undefined): number {
  const restarts = task?.restarts;
  return typeof restarts === "number" && Number.isFinite(restarts) ? restarts : 0;
}

function rank(tx: KernelTx, id: number): number {
  return restartsOf(tx.task(id));
}

/**
 * `ids` (ascending) with the fewest restarts first, in id order within a count (decision 0105): a task that made
 * progress before the crash is started before ones cut off again and again without progress (S6's suspects), so
 * its next step is not behind theirs. `ids` itself when every one has the same count (the common case).
 */
export function byRestarts(tx: KernelTx, ids: number[]): number[] {
  if (ids.length < 2) return ids;
  const first = rank(tx, ids[0]!);
  let at = 1;
  while (at < ids.length && rank(tx, ids[at]!) === first) at++;
  if (at === ids.length) return ids;
  const byCount = new Map<number, number[]>();
  for (let index = 0; index < ids.length; index++) {
    const id = ids[index]!;
    const count = rank(tx, id);
    const bucket = byCount.get(count);
    if (bucket) bucket.push(id);
    else byCount.set(count, [id]);
  }
  const out: number[] = [];
  for (const count of [...byCount.keys()].sort((a, b) => a - b)) for (const id of byCount.get(count)!) out.push(id);
  return out;
}

/** A task's progress stamp as a reservation rank: larger first, absent (or not a safe integer) after every stamp. */
function progressRank(task: TaskRecord | undefined): number {
  const progressed = task === undefined ? undefined : progressOf(task.state);
  return progressed ?? Number.NEGATIVE_INFINITY;
}

/**
 * `ids` (ascending) ordered by (restarts ascending, progress stamp descending — absent last —, id ascending): the
 * first pass after an open (decision 0112). Each key is read once into an array, then the positions are sorted; `ids`
 * itself when every candidate has the same count and the same stamp (a database whose tasks never stepped).
 */
export function byProgress(tx: KernelTx, ids: number[]): number[] {
  const length = ids.length;
  if (length < 2) return ids;
  const restarts = new Float64Array(length);
  const progressed = new Float64Array(length);
  let equal = true;
  for (let at = 0; at < length; at++) {
    const task = tx.task(ids[at]!);
    restarts[at] = restartsOf(task);
    progressed[at] = progressRank(task);
    if (equal && at > 0 && (restarts[at] !== restarts[0] || progressed[at] !== progressed[0])) equal = false;
  }
  if (equal) return ids;
  // A plain array, not a typed one (decision 0119): its sort (TimSort) takes a run already in order — every candidate
  // with the same count and no stamp, in id order — in one walk, where a typed array's sort compares n·log n times.
  const order = new Array<number>(length);
  for (let at = 0; at < length; at++) order[at] = at;
  // ids ascending: a position's order is its id's, so the last key is the position itself.
  order.sort((a, b) => restarts[a]! - restarts[b]! || (progressed[a] === progressed[b] ? a - b : progressed[a]! > progressed[b]! ? -1 : 1));
  const out = new Array<number>(length);
  for (let at = 0; at < length; at++) out[at] = ids[order[at]!]!;
  return out;
}

/**
 * An earlier pass's rest (`rest` from index `from` on, in its order) and then the ids of `fresh` (ascending) that are
 * not in it: `rest` itself when nothing is new. An id both deferred and new keeps its deferred place.
 */
export function afterRest(rest: number[], from: number, fresh: number[]): number[] {
  if (fresh.length === 0) return rest;
  const unseen = new Set(fresh);
  const out: number[] = [];
  for (let at = from; at < rest.length; at++) {
    const id = rest[at]!;
    out.push(id);
    unseen.delete(id);
  }
  for (const id of fresh) if (unseen.has(id)) out.push(id);
  return out;
}
