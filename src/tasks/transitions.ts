/**
 * The task state transitions. Every transition is decided inside one commit: each function here is a pure
 * function of the commit's `tx` (and of the committed live index), stages its writes on `tx` and nothing
 * else, so a transition is stored whole or not at all. The scheduler calls them from its passes and the task
 * runtime's commits; nothing else writes a task's state (creation is `tx.createTask`, recovery the session's).
 */

import { jsonEqual } from "../base/json.ts";
import { InvalidCommit, NotFound } from "../errors.ts";
import type { What } from "../limits.ts";
import type { KernelTx } from "../session/tx.ts";
import { pendingAt, progressOf } from "../storage/progress.ts";
import type { BlockedReason, Checkpoint, TaskOutcome, TaskRecord, TaskState } from "../storage/records.ts";
import type { Mode } from "./invocation.ts";
import type { LiveIndex } from "./live-index.ts";
import type { NextTaskState } from "./types.ts";

/** Why the scheduler ended a task `faulted` (the handler's own outcomes are completed, failed or aborted). */
export type FaultReason = "phase_failed" | "no_progress" | "abort_failed" | "restart_limit";

/** Reads a stored (terminal) task: the check a commit runs for ids it does not hold live. */
export type StoredTask = (id: number) => Promise<TaskRecord | undefined>;

/** A terminal outcome, held as `completing` while owned work is live. Drops memos and restarts. */
export function terminate(tx: KernelTx, index: LiveIndex, task: TaskRecord, outcome: TaskOutcome): void {
  if (index.hasLiveOwnedWork(tx, task.id)) {
    const { memos: _memos, restarts: _restarts, ...rest } = task;
    tx.putTask({ ...rest, state: { status: "completing", outcome } });
    return;
  }
  tx.putTask(finalRecord(tx, task, outcome));
}

/** The terminal record of `task`. */
export function finalRecord(tx: KernelTx, task: TaskRecord, outcome: TaskOutcome): TaskRecord {
  const { memos: _memos, restarts: _restarts, ...rest } = task;
  return { ...rest, endedAt: tx.now(), state: { status: "terminal", outcome } };
}

/**
 * Ends `task` `faulted` and reports it (`task_faulted`). A restart-limit fault carries how often the task was
 * cut off (`detail`).
 */
export function fault(tx: KernelTx, index: LiveIndex, task: TaskRecord, reason: FaultReason, message: string): void {
  const detail = reason === "restart_limit" ? { reason, restarts: task.restarts ?? 0 } : undefined;
  terminate(tx, index, task, { status: "faulted", error: { message, ...(detail ? { detail } : {}) } });
  tx.report({
    kind: "task_faulted",
    taskId: task.id,
    taskKind: task.kind,
    conversationId: task.conversationId,
    reason,
    message,
    ...(detail ? { detail } : {}),
  });
}

/**
 * Takes a task for an invocation: it is `running` at `checkpoint` from now on (no write if it already is). A start is
 * not progress: the state keeps the stamp of the task's last step (decision 0112).
 */
export function take(tx: KernelTx, task: TaskRecord, record: TaskRecord, checkpoint: Checkpoint, now: number): void {
  if (task.state.status !== "running" || record !== task) {
    const progressed = progressOf(task.state);
    const state: TaskState = progressed === undefined ? { status: "running", checkpoint } : { status: "running", checkpoint, progressed };
    tx.putTask({ ...record, state, startedAt: record.startedAt ?? now });
  }
}

/** A cascade's abort mark on a live task; queues it so its own children are marked in turn. */
export function mark(tx: KernelTx, id: number, queue: number[]): void {
  const task = tx.task(id);
  if (!task || task.abortRequested || task.state.status === "terminal") return;
  tx.putTask({ ...task, abortRequested: true });
  queue.push(id);
}

/** Whether `task` means its owned work to stop: an abort mark, or an outcome other than completed. */
export function hasIntent(task: TaskRecord): boolean {
  return task.abortRequested || (task.state.status === "completing" && task.state.outcome.status !== "completed");
}

/** Whether an owner up the (non-background) chain of `task` has an intent: then `task` does not run. */
export function ownerHasIntent(tx: KernelTx, task: TaskRecord): boolean {
  if (task.background) return false;
  let owner = task.owner === undefined ? undefined : tx.task(task.owner);
  while (owner) {
    if (hasIntent(owner)) return true;
    if (owner.background || owner.owner === undefined) return false;
    owner = tx.task(owner.owner);
  }
  return false;
}

/** A close is not a crash: the running tasks go back to pending without counting a restart. */
export function parkRunning(tx: KernelTx, except: ReadonlySet<number>): void {
  for (const task of [...tx.liveTasks()]) {
    if (task.state.status === "running" && !except.has(task.id)) tx.putTask({ ...task, state: pendingAt(task.state) });
  }
}

/** What a task's checkpoint is called in a refusal's message (`checkpointWhat` makes one per invocation). */
export const checkpointOf =
  (task: TaskRecord): What =>
  () =>
    `The checkpoint of task ${task.id} (${task.kind})`;

/**
 * Validates and stages the state a task committed. Any state change clears `restarts` (S6: progress). The state
 * carries the step's progress stamp (`progressed`, decision 0112: one more than the largest the live index has seen),
 * inside the state, so a step still changes its record's state only and its row text is still spliced (decision 0041).
 * `checkpoint` names the checkpoint in a refusal: a task's invocation passes the one it made for all its steps
 * (decision 0077: a closure less on every step); by default one is made for `current`.
 */
export function applyNext(
  tx: KernelTx,
  index: LiveIndex,
  current: TaskRecord,
  next: NextTaskState,
  mode: Mode,
  stored: StoredTask,
  checkpoint: What = checkpointOf(current),
): void {
  let state: TaskState;
  switch (next.status) {
    case "running":
      // Frozen as built: the step's record then needs no deepFreeze walk when it is staged and published.
      state = Object.freeze({
        status: "running",
        checkpoint: tx.admitFrozen(next.checkpoint, checkpoint),
        progressed: index.nextProgress(),
      });
      break;
    case "sleeping":
      // No `until`: a wait with no deadline, ended by a commit that wakes the task (`wakeSleeper`).
      if (next.until !== undefined && (typeof next.until !== "number" || !Number.isFinite(next.until)))
        throw new InvalidCommit(`sleepUntil needs a finite time on the harness clock; got ${String(next.until)}.`);
      state =
        next.until === undefined
          ? { status: "sleeping", checkpoint: tx.admit(next.checkpoint, checkpoint), progressed: index.nextProgress() }
          : { status: "sleeping", until: next.until, checkpoint: tx.admit(next.checkpoint, checkpoint), progressed: index.nextProgress() };
      break;
    case "waiting": {
      if (mode === "abort") throw new InvalidCommit(`Abort handler of task ${current.id} cannot wait.`);
      const on = [...new Set(next.on)];
      const policy = next.policy ?? "allSettled";
      validateWait(tx, current, on, policy, stored);
      state = { status: "waiting", checkpoint: tx.admit(next.checkpoint, checkpoint), on, policy, progressed: index.nextProgress() };
      break;
    }
    case "terminal": {
      const outcome = tx.admit(next.outcome, () => `The outcome of task ${current.id} (${current.kind})`);
      if (!["completed", "failed", "aborted"].includes(outcome.status)) {
        throw new InvalidCommit(`A task may end completed, failed or aborted; "${outcome.status}" is the scheduler's to write.`);
      }
      terminate(tx, index, current, outcome);
      return;
    }
    default:
      throw new InvalidCommit(`Unknown task state ${JSON.stringify((next as { status?: unknown }).status)}.`);
  }
  const record: TaskRecord = { ...current, state };
  // Progress (a state other than the last, its stamp aside) clears `restarts`; a commit of the same state keeps both
  // its restarts and the stamp of its last progress (decision 0112).
  if (record.restarts !== undefined) {
    if (!sameBesideStamp(current.state, state)) delete record.restarts;
    else record.state = state = withStamp(state, progressOf(current.state));
  }
  // A committed record and a frozen state make a record frozen whole (`deepFreeze` holds frozen for deep-frozen).
  tx.putTask(Object.isFrozen(current) && Object.isFrozen(state) ? Object.freeze(record) : record);
}

/** Whether two states are the same JSON but for their progress stamps (members that are undefined do not count). */
function sameBesideStamp(a: TaskState, b: TaskState): boolean {
  return jsonEqual({ ...a, progressed: undefined }, { ...b, progressed: undefined });
}

/** `state` with `progressed` as its stamp (none when undefined), frozen when `state` is. */
function withStamp(state: TaskState, progressed: number | undefined): TaskState {
  const { progressed: _old, ...rest } = state as TaskState & { progressed?: number };
  const out = (progressed === undefined ? rest : { ...rest, progressed }) as TaskState;
  return Object.isFrozen(state) ? Object.freeze(out) : out;
}

function validateWait(tx: KernelTx, waiter: TaskRecord, on: number[], policy: string, stored: StoredTask): void {
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
        const record = await stored(member);
        if (!record) throw new NotFound(`Task ${member} does not exist.`);
        if (policy === "failFast" && record.owner !== waiter.id) {
          throw new InvalidCommit(`failFast waits only on tasks that task ${waiter.id} owns directly; task ${member} is not one.`);
        }
      }
    });
  }
}

/**
 * Ends the sleep of `task` early, in the commit of someone other than the task (a person's decision): it is
 * `pending` at the checkpoint it slept at and runs at the next pass. Returns false (and writes nothing) when the
 * task is not sleeping, or sleeps at another phase than `phase`.
 */
export function wakeSleeper(tx: KernelTx, id: number, phase: string): boolean {
  const task = tx.task(id);
  if (task?.state.status !== "sleeping" || task.state.checkpoint.phase !== phase) return false;
  const { restarts: _restarts, ...rest } = task;
  tx.putTask({ ...rest, state: pendingAt(task.state) });
  return true;
}

/**
 * A durable abort mark on `task` (its owned work is marked by the next pass's cascade). A task that can never
 * run its abort handler (`blocked()` says why: its definition is missing or unusable) is orphaned at once,
 * unless its work is live.
 */
export function requestAbort(
  tx: KernelTx,
  index: LiveIndex,
  task: TaskRecord,
  blocked: () => BlockedReason | undefined,
): "marked" | "terminal" {
  if (task.abortRequested) return "marked";
  const marked: TaskRecord = { ...task, abortRequested: true };
  const reason = blocked();
  if (reason && task.state.status !== "completing" && !index.hasLiveOwnedWork(tx, task.id)) {
    terminate(tx, index, marked, { status: "orphaned", reason });
    return "terminal";
  }
  tx.putTask(marked);
  return "marked";
}
