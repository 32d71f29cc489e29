import { continuesLog } from "../log.ts";
import type { Batch, LogMark } from "../records.ts";
import type { SqliteTransaction, SqlRow } from "./database.ts";
import { SQL } from "./schema.ts";

/** A batch's lists as the rows of its transaction spell them: each item's JSON text, in the batch's order. */
export type BatchTexts = Readonly<Record<"tasks" | "conversations" | "entries" | "submissions" | "documents", readonly string[]>>;

/**
 * `JSON.stringify(batch)`, text for text, made from the texts its rows were already serialized to (decision 0042):
 * a fenced transaction's log row repeats its rows, and serializing every record a second time for it was the
 * largest part of what a lease added to a step. Members in the batch's own key order, as JSON spells them (its own
 * enumerable keys: `Object.keys`); the fence and numbers spelled here (decision 0093: a step's batch serializes
 * nothing but its task's state). A batch of exactly a step's members (`STEP_MEMBERS`, in that order) whose fence is a
 * plain mark is spelled in one template (decision 0118: the walk over its members was most of the text's cost).
 */
export function batchText(batch: Batch, texts: BatchTexts): string {
  const members = batch as unknown as Record<string, unknown>;
  const keys = Object.keys(members);
  if (isStep(keys)) {
    const fence = members.fence;
    const mark = typeof fence === "object" && fence !== null ? markText(fence as Record<string, unknown>) : undefined;
    if (mark !== undefined)
      return `{"tasks":${listText(texts.tasks)},"conversations":${listText(texts.conversations)},"entries":${listText(texts.entries)},"submissions":${listText(texts.submissions)},"documents":${listText(texts.documents)},"fence":${mark}}`;
  }
  let text = "";
  for (let index = 0; index < keys.length; index++) {
    const key = keys[index]!;
    const list = listOf(texts, key);
    const value = list ? listText(list) : memberText(members[key]);
    if (value === undefined) continue; // an undefined member: JSON leaves it out
    text += `${text.length > 0 ? "," : "{"}${memberKey(key)}${value}`;
  }
  return text.length > 0 ? `${text}}` : "{}";
}

/**
 * `JSON.stringify(batch)` of a lone task's step — a step's members (`STEP_MEMBERS`, in that order), one task whose
 * row text is `record`, the four other lists empty, a plain mark — spelled as the task's text between two constant
 * pieces (the second one's epoch kept from the last call); undefined for any other batch, which `batchText` spells.
 * Decision 0120: the text `batchText` builds from the lists' texts is a rope of about fifteen strings a step, and what
 * a fenced step allocates beyond a step with no lease brings the young generation's collections forward.
 */
export function stepText(batch: Batch, record: string): string | undefined {
  if (batch.tasks.length !== 1 || batch.conversations.length + batch.entries.length + batch.submissions.length + batch.documents.length > 0)
    return undefined;
  const fence = batch.fence as unknown;
  if (typeof fence !== "object" || fence === null || !isStep(Object.keys(batch))) return undefined;
  const mark = fence as Record<string, unknown>;
  const { epoch, position } = mark; // read once: a getter could answer a check and the text differently
  if (!plainMark(mark, epoch, position)) return undefined;
  return `{"tasks":[${record}${stepTail(epoch)}${position}}}`;
}

/** The step's text from the task's row's end to the fence's position: one per epoch, kept for the last one. */
let lastTail: { readonly epoch: number; readonly text: string } | undefined;

function stepTail(epoch: number): string {
  if (lastTail?.epoch !== epoch)
    lastTail = { epoch, text: `],"conversations":[],"entries":[],"submissions":[],"documents":[],"fence":{"epoch":${epoch},"position":` };
  return lastTail.text;
}

/** A step's batch's members, in the order the session makes them (decision 0118). */
const STEP_MEMBERS = ["tasks", "conversations", "entries", "submissions", "documents", "fence"] as const;

function isStep(keys: readonly string[]): boolean {
  if (keys.length !== STEP_MEMBERS.length) return false;
  for (let index = 0; index < STEP_MEMBERS.length; index++) if (keys[index] !== STEP_MEMBERS[index]) return false;
  return true;
}

/** `JSON.stringify(value)` of a batch's other members: a finite number and a fence (`LogMark`) without calling it. */
function memberText(value: unknown): string | undefined {
  if (typeof value === "number" && Number.isFinite(value)) return String(value);
  if (typeof value === "object" && value !== null) {
    const mark = markText(value as Record<string, unknown>);
    if (mark !== undefined) return mark;
  }
  return JSON.stringify(value);
}

/**
 * A fence's text — `{"epoch":…,"position":…}` — when it is exactly that: those two own enumerable keys in that
 * order, both finite numbers, no `toJSON` (own or inherited: JSON.stringify would call it).
 */
function markText(mark: Record<string, unknown>): string | undefined {
  const { epoch, position } = mark; // read once, as in stepText
  return plainMark(mark, epoch, position) ? `{"epoch":${epoch},"position":${position}}` : undefined;
}

/**
 * Whether `mark`, whose members read `epoch` and `position` (once, by the caller), is exactly a plain mark, as
 * `markText` spells it (a check that makes no text: decision 0120).
 */
function plainMark(mark: Record<string, unknown>, epoch: unknown, position: unknown): epoch is number {
  const keys = Object.keys(mark);
  if (keys.length !== 2 || keys[0] !== "epoch" || keys[1] !== "position") return false;
  if (typeof epoch !== "number" || typeof position !== "number" || !Number.isFinite(epoch) || !Number.isFinite(position)) return false;
  return typeof mark.toJSON !== "function";
}

/** The texts of `key`'s list, when it is one of the row lists (no prototype lookup: `texts` may be any object). */
function listOf(texts: BatchTexts, key: string): readonly string[] | undefined {
  switch (key) {
    case "tasks":
    case "conversations":
    case "entries":
    case "submissions":
    case "documents":
      return texts[key];
    default:
      return undefined;
  }
}

function listText(list: readonly string[]): string {
  return list.length === 0 ? "[]" : list.length === 1 ? `[${list[0]}]` : `[${list.join(",")}]`;
}

/** `"key":` for a batch's members, kept for the few names a batch has (decision 0056: one less JSON.stringify each). */
const MEMBER_KEYS = new Map<string, string>();

function memberKey(key: string): string {
  let text = MEMBER_KEYS.get(key);
  if (text === undefined) {
    text = `${JSON.stringify(key)}:`;
    if (MEMBER_KEYS.size < 32) MEMBER_KEYS.set(key, text);
  }
  return text;
}

/**
 * Checks and advances the fenced log inside the transaction that carries the commit (decision 0029), then appends
 * its slices (one text: the only one). `known` is the head this storage itself last read or stored. The head is the log's last row
 * (decision 0048: one row per fenced transaction, the marker is not rewritten). When the batch continues `known`
 * under the same epoch, the row is inserted if the last row is still where `known` left it, at its position and
 * under its epoch — one read, the whole check: every other writer's commit, any new epoch's included, adds a row
 * above it, and a copy rebuilt and followed back to that position holds it under the epoch that wrote it there
 * (decision 0058). Anything else
 * (including a log trimmed to nothing or a rebuilt copy, which have no last row) reads the head and decides as
 * before: `StaleEpoch` or `LogOutOfOrder`, nothing written. `unchanged`: the caller knows nothing was written on
 * the connection since `known` was the head (decision 0056, `FencedLog`), so the last row need not be read.
 */
export function writeLog(
  tx: SqliteTransaction,
  fence: LogMark,
  known: LogMark | undefined,
  slices: string | readonly string[],
  label: string,
  unchanged = false,
): void {
  let continued = known !== undefined && known.epoch === fence.epoch && fence.position === known.position + 1;
  if (continued && !unchanged) {
    const last = tx.get(SQL.lastLogRow);
    // The epoch too (decision 0058): a copy rebuilt by another writer and followed back to this position under a
    // newer epoch has its last row here again (the ABA 0042 left open).
    continued = last?.position === known!.position && last?.epoch === known!.epoch;
  }
  if (!continued && continuesLog(logHead(tx.get(SQL.logHead)), fence, label)) tx.run(SQL.startEpoch, fence.epoch, fence.position);
  if (typeof slices === "string") {
    tx.run(SQL.appendLog, fence.position, fence.epoch, slices);
    return;
  }
  tx.run(SQL.appendLog, fence.position, fence.epoch, slices[0]!);
  for (let part = 1; part < slices.length; part++) tx.run(SQL.appendLogPart, fence.position, part, slices[part]!);
}

/** The log's head from `SQL.logHead`'s row, or undefined before the first fenced commit. */
export function logHead(row: SqlRow | undefined): LogMark | undefined {
  if (row?.position === null || row?.position === undefined) return undefined;
  return { position: Number(row.position), epoch: Number(row.epoch ?? 0) };
}
