import type { TaskRecord } from "../records.ts";

/**
 * A task's record text as last written: the text before its state's value and after it, and the record it was
 * made from. Most commits change only a task's state (a step's next checkpoint): the next text is then
 * `head + state + tail`, and only the state is serialized again (decision 0041).
 */
export interface TaskText {
  /** The record the text was made from: moved on in place once a spliced text of a later version is stored. */
  record: TaskRecord;
  readonly keys: readonly string[];
  readonly head: string;
  readonly tail: string;
}

/** The statuses a state's text spells without escaping (every status there is). */
const STATUSES = new Set(["pending", "running", "waiting", "sleeping", "completing", "terminal"]);

/**
 * `JSON.stringify(task)`, text for text, reusing `last` (the text of an earlier version of the same task) when
 * every member but `state` is the same value — the same primitive or the same object, in the same key order.
 * Pieces are made only of a record whose members were all frozen when its text was made: committed records
 * are deep-frozen (`deepFreeze`), so a member shared with the last version cannot have changed since. Returns
 * the row to write: the text, and the pieces to remember once it is stored (undefined when a member is not
 * frozen yet, or the record's shape is one JSON would not spell member by member). A text spliced from `last`
 * keeps `last` as its pieces (`spliced`): once stored, `last.record` moves on to `task` in place, so a step
 * makes one object for its row rather than three (decision 0060).
 */
export function taskText(task: TaskRecord, last: TaskText | undefined): TaskRow {
  if (last !== undefined && sameBesideState(task, last)) {
    const state = stateText(task.state);
    if (state !== undefined) return { task, record: last.head + state + last.tail, pieces: last, spliced: true };
  }
  return wholeText(task, Object.keys(task));
}

/** `taskText` of each of a batch's tasks, with its cached pieces: a loop, not a `map` and a closure on every step. */
export function taskTexts(tasks: readonly TaskRecord[], cache: ReadonlyMap<number, TaskText>): TaskRow[] {
  const rows = new Array<TaskRow>(tasks.length); // its size at once: an empty list's first push grows it to 17 (decision 0126)
  for (let at = 0; at < tasks.length; at++) rows[at] = taskText(tasks[at]!, cache.get(tasks[at]!.id));
  return rows;
}

/** After a batch's rows are stored: each task's status and the pieces its text was made of, or none once terminal. */
export function rememberRows(rows: readonly TaskRow[], liveStatus: Map<number, string>, texts: Map<number, TaskText>): void {
  for (const { task, pieces, spliced } of rows) {
    if (task.state.status === "terminal") {
      liveStatus.delete(task.id);
      texts.delete(task.id);
    } else {
      liveStatus.set(task.id, task.state.status);
      if (spliced) pieces!.record = task; // the pieces it was spliced from now stand for the stored version
      if (pieces) texts.set(task.id, pieces);
      else texts.delete(task.id);
    }
  }
}

/** A task's row as a batch writes it: its record text, and the pieces to remember once it is stored. */
export interface TaskRow {
  readonly task: TaskRecord;
  readonly record: string;
  readonly pieces: TaskText | undefined;
  /** The text was spliced from `pieces` as they were (`pieces.record` is still the version before `task`). */
  readonly spliced: boolean;
}

/**
 * Whether `task` has `last`'s keys in its order and the same value in every one but `state`. Walked with `for…in`,
 * which makes no key array (one less allocation on every step, decision 0042): a plain record's keys are its own
 * ones, and a record whose walk differs in any way (an inherited key included) only takes the whole text.
 */
function sameBesideState(task: TaskRecord, last: TaskText): boolean {
  const before = last.keys;
  const record = task as unknown as Record<string, unknown>;
  const previous = last.record as unknown as Record<string, unknown>;
  let index = 0;
  for (const key in record) {
    if (key !== before[index++]) return false;
    if (key !== "state" && record[key] !== previous[key]) return false;
  }
  return index === before.length;
}

/**
 * The whole text, member by member, cut around the state's value — a little slower than `JSON.stringify`, so
 * only for a record whose pieces can be reused: one whose members are frozen (a pushed or replayed batch's
 * copies are not) and that stays live (a terminal row is never written again).
 */
function wholeText(task: TaskRecord, keys: readonly string[]): TaskRow {
  const record = task as unknown as Record<string, unknown>;
  if (!reusable(record, keys)) return { task, record: JSON.stringify(task), pieces: undefined, spliced: false };
  // Each piece's members gathered and joined once: a joined text is flat, where `+=` would leave a rope of every
  // member's text that each later step's bind walks again when it flattens `head + state + tail` (decision 0121).
  const head: string[] = ["{"];
  let tail: string[] | undefined;
  let state: string | undefined;
  let separator = "";
  for (const key of keys) {
    if (key === "state") {
      state = stateText(task.state);
      if (state === undefined) return { task, record: JSON.stringify(task), pieces: undefined, spliced: false };
      head.push(`${separator}"state":`);
      tail = [];
      separator = ",";
      continue;
    }
    const value = JSON.stringify(record[key]);
    if (value === undefined) continue; // undefined, a function: JSON leaves the member out
    (tail ?? head).push(`${separator}${JSON.stringify(key)}:${value}`);
    separator = ",";
  }
  if (state === undefined || tail === undefined) return { task, record: JSON.stringify(task), pieces: undefined, spliced: false };
  tail.push("}");
  const before = head.join("");
  const after = tail.join("");
  return { task, record: before + state + after, pieces: { record: task, keys, head: before, tail: after }, spliced: false };
}

/** Whether a record's text is worth cutting into pieces: live, no `toJSON`, every member but its state frozen. */
function reusable(record: Record<string, unknown>, keys: readonly string[]): boolean {
  if (typeof record.toJSON === "function" || (record.state as { status?: unknown } | undefined)?.status === "terminal") return false;
  for (const key of keys) {
    const member = record[key];
    if (key !== "state" && typeof member === "object" && member !== null && !Object.isFrozen(member)) return false;
  }
  return true;
}

/**
 * A state's text; the common shape (status and checkpoint, in that order, then the progress stamp of decision 0112
 * when it is a safe integer) without walking the state itself.
 */
function stateText(state: unknown): string | undefined {
  if (typeof state !== "object" || state === null) return JSON.stringify(state);
  const members = state as Record<string, unknown>;
  const status = members.status;
  if (typeof status === "string" && STATUSES.has(status) && typeof members.toJSON !== "function") {
    // Its keys walked with for…in rather than listed by Object.keys: no key array on every step (decision 0077).
    // Exactly `status`, `checkpoint` and perhaps `progressed`, nothing inherited: then they are its own keys, in JSON's order.
    let shape = 0; // 1: `status` seen first; 2: then `checkpoint`; 3: then `progressed`; -1: anything else
    for (const key in members) {
      if (shape === 0 && key === "status") shape = 1;
      else if (shape === 1 && key === "checkpoint") shape = 2;
      else if (shape === 2 && key === "progressed") shape = 3;
      else {
        shape = -1;
        break;
      }
    }
    if (shape === 2 || shape === 3) {
      const checkpoint = JSON.stringify(members.checkpoint);
      if (checkpoint !== undefined) {
        if (shape === 2) return `{"status":"${status}","checkpoint":${checkpoint}}`;
        const progressed = members.progressed;
        // A safe integer's text is its JSON (-0 included: both spell 0).
        if (typeof progressed === "number" && Number.isSafeInteger(progressed))
          return `{"status":"${status}","checkpoint":${checkpoint},"progressed":${progressed}}`;
      }
    }
  }
  return JSON.stringify(state);
}
