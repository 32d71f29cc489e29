/**
 * What a pushed transaction must look like before a copy stores it (docs/decisions/0031): the fields storage
 * reads to write its rows (ids, conversation ids, kinds, statuses, a document's scope and key) of the right
 * types, and its fence. The values inside (a checkpoint, an entry's payload) are the sender's JSON, bounded by
 * the link's walk (size, depth, plain JSON) before this runs; the copy does not judge them — whoever may push
 * may write (a write power at the object's doors).
 */
import { describeValue } from "../shape.ts";
import type { LoggedBatch } from "./handover.ts";

const TASK_STATUSES = new Set(["pending", "running", "waiting", "sleeping", "completing", "terminal"]);
const SUBMISSION_STATUSES = new Set(["queued", "running", "done", "unanswered"]);
/** Each list of a batch holds at most this many records (a group commit of thousands of tasks is far below). */
export const MAX_BATCH_RECORDS = 100_000;

type Fields = Record<string, unknown>;

const isObject = (value: unknown): value is Fields => typeof value === "object" && value !== null && !Array.isArray(value);
const isId = (value: unknown) => Number.isSafeInteger(value) && (value as number) > 0;
const isCount = (value: unknown) => Number.isSafeInteger(value) && (value as number) >= 0;

/** Why `value` is not a row of a list (`what` at `path`), or undefined. */
type RowCheck = (row: Fields, path: string) => string | undefined;

const task: RowCheck = (row, path) => {
  if (!isId(row.id)) return `${path}.id must be a positive integer; got ${describeValue(row.id)}`;
  if (!isCount(row.conversationId)) return `${path}.conversationId must be an integer; got ${describeValue(row.conversationId)}`;
  if (typeof row.kind !== "string") return `${path}.kind must be a string; got ${describeValue(row.kind)}`;
  const state = row.state;
  if (!isObject(state) || !TASK_STATUSES.has(state.status as string))
    return `${path}.state must be an object with a task status; got ${describeValue(isObject(state) ? state.status : state)}`;
  return undefined;
};

const conversation: RowCheck = (row, path) => {
  if (!isId(row.id)) return `${path}.id must be a positive integer; got ${describeValue(row.id)}`;
  if (row.owner !== undefined && !isId(row.owner)) return `${path}.owner must be a task id; got ${describeValue(row.owner)}`;
  return undefined;
};

const entry: RowCheck = (row, path) => {
  if (!isId(row.id)) return `${path}.id must be a positive integer; got ${describeValue(row.id)}`;
  if (!isCount(row.conversationId)) return `${path}.conversationId must be an integer; got ${describeValue(row.conversationId)}`;
  if (typeof row.kind !== "string") return `${path}.kind must be a string; got ${describeValue(row.kind)}`;
  return undefined;
};

const submission: RowCheck = (row, path) => {
  if (!isId(row.id)) return `${path}.id must be a positive integer; got ${describeValue(row.id)}`;
  if (!isCount(row.conversationId)) return `${path}.conversationId must be an integer; got ${describeValue(row.conversationId)}`;
  if (row.type !== "input" && row.type !== "write") return `${path}.type must be "input" or "write"; got ${describeValue(row.type)}`;
  if (!SUBMISSION_STATUSES.has(row.status as string)) return `${path}.status must be a submission status; got ${describeValue(row.status)}`;
  if (row.requestId !== undefined && typeof row.requestId !== "string")
    return `${path}.requestId must be a string; got ${describeValue(row.requestId)}`;
  return undefined;
};

const document: RowCheck = (row, path) => {
  if (typeof row.scope !== "string" || typeof row.key !== "string") return `${path} must have a string scope and key`;
  if (!Object.hasOwn(row, "value")) return `${path}.value must be JSON or null (a deletion)`;
  return undefined;
};

const LISTS: ReadonlyArray<[keyof LoggedBatch, RowCheck]> = [
  ["tasks", task],
  ["conversations", conversation],
  ["entries", entry],
  ["submissions", submission],
  ["documents", document],
];

const CHECKS = new Map(LISTS);

/** Why `row`, the `index`th of list `name` of the batch at `path`, is not such a row (decision 0084: a row checked alone). */
export function rowProblem(name: keyof LoggedBatch, row: unknown, path: string, index: number): string | undefined {
  const check = CHECKS.get(name);
  const at = `${path}.${name}[${index}]`;
  if (!check) return `${path} has no list ${JSON.stringify(name)}`;
  return isObject(row) ? check(row, at) : `${at} must be an object; got ${describeValue(row)}`;
}

const KNOWN = new Set(["fence", "nextId", "rootConversationId", ...LISTS.map(([name]) => name)]);

/**
 * Why `value` (already plain JSON within the link's bounds) is not a stored transaction with its place in the
 * log, or undefined: then it is a `LoggedBatch`.
 */
export function batchProblem(value: unknown, path: string): string | undefined {
  if (!isObject(value)) return `${path} must be an object; got ${describeValue(value)}`;
  for (const key of Object.keys(value)) if (!KNOWN.has(key)) return `${path} has no field ${JSON.stringify(key)}`;
  const fence = value.fence;
  if (!isObject(fence) || !isId(fence.epoch) || !isId(fence.position))
    return `${path}.fence must be { epoch, position } (positive integers)`;
  if (value.nextId !== undefined && !isId(value.nextId)) return `${path}.nextId must be a positive integer`;
  if (value.rootConversationId !== undefined && !isId(value.rootConversationId))
    return `${path}.rootConversationId must be a positive integer`;
  for (const [name] of LISTS) {
    const rows = value[name];
    if (!Array.isArray(rows)) return `${path}.${name} must be an array; got ${describeValue(rows)}`;
    if (rows.length > MAX_BATCH_RECORDS) return `${path}.${name} holds more than ${MAX_BATCH_RECORDS} records`;
    for (let index = 0; index < rows.length; index++) {
      const problem = rowProblem(name, rows[index], path, index);
      if (problem) return problem;
    }
  }
  return undefined;
}
