/** A commit's rows: their size checks and the texts its log row is made of (out of storage.ts in decision 0081). */
import type { Batch, ConversationRecord, DocumentRecord, EntryRecord, SubmissionRecord, TaskRecord } from "../records.ts";
import { columnBytes, refuseLargeRow } from "../rows.ts";
import type { SqlValue } from "./database.ts";
import { batchText, stepText } from "./log-write.ts";

/** A commit's rows, serialized: each list's rows as their statements' parameters. */
export interface CommitRows {
  tasks: ReadonlyArray<{ task: TaskRecord; record: string }>;
  conversations: readonly SqlValue[][];
  entries: readonly SqlValue[][];
  submissions: readonly SqlValue[][];
  documents: readonly SqlValue[][];
}

/** `InvalidInput` for the first row past `max` bytes (a Durable Object's 2 MB), before anything runs. */
export function refuseLargeRows(max: number, { tasks, conversations, entries, submissions, documents }: CommitRows): void {
  for (const { task, record } of tasks)
    refuseLargeRow(max, "tasks", task.id, record, columnBytes(task.id, task.conversationId, task.kind, task.state.status));
  for (const [id, owner, record] of conversations)
    refuseLargeRow(max, "conversations", id as number, record as string, columnBytes(id as number, owner as number | null));
  for (const [id, conversationId, kind, record] of entries)
    refuseLargeRow(max, "entries", id as number, record as string, columnBytes(id as number, conversationId as number, kind as string));
  for (const [id, conversationId, requestId, status, record] of submissions)
    refuseLargeRow(
      max,
      "submissions",
      id as number,
      record as string,
      columnBytes(id as number, conversationId as number, requestId as string | null, status as string),
    );
  for (const [scope, key, record] of documents)
    if (record !== undefined)
      refuseLargeRow(max, "documents", `${scope}/${key}`, record as string, columnBytes(scope as string, key as string));
}

export const NONE: readonly string[] = [];

const NO_ROWS: readonly SqlValue[][] = [];

/**
 * A batch's conversations, entries, submissions and documents as their statements' parameters. A list left empty (a
 * task's step has only its task) maps nothing and makes no array or function (decision 0091).
 */
export function commitRows(batch: Batch): Omit<CommitRows, "tasks"> {
  return {
    conversations: batch.conversations.length === 0 ? NO_ROWS : batch.conversations.map(conversationRow),
    entries: batch.entries.length === 0 ? NO_ROWS : batch.entries.map(entryRow),
    submissions: batch.submissions.length === 0 ? NO_ROWS : batch.submissions.map(submissionRow),
    documents: batch.documents.length === 0 ? NO_ROWS : batch.documents.map(documentRow),
  };
}

function conversationRow(c: ConversationRecord): SqlValue[] {
  return [c.id, c.owner ?? null, JSON.stringify(c)];
}

function entryRow(e: EntryRecord): SqlValue[] {
  return [e.id, e.conversationId, e.kind, JSON.stringify(e)];
}

function submissionRow(s: SubmissionRecord): SqlValue[] {
  return [s.id, s.conversationId, s.requestId ?? null, s.status, JSON.stringify(s)];
}

/** A removed document's row is its key alone (the statement deletes it). */
function documentRow(d: DocumentRecord): SqlValue[] {
  return d.value === null ? [d.scope, d.key] : [d.scope, d.key, JSON.stringify(d)];
}

/**
 * A fenced batch's log text (`JSON.stringify(batch)`, text for text), made of its rows' own texts (decision 0042): a
 * lone task's step in one template (0120), any other batch by `batchText`; an empty list is not mapped (0056).
 */
export function logText(batch: Batch, { tasks, conversations, entries, submissions, documents }: CommitRows): string {
  return (
    (tasks.length === 1 ? stepText(batch, tasks[0]!.record) : undefined) ??
    batchText(batch, {
      tasks: tasks.length === 0 ? NONE : tasks.map((row) => row.record),
      conversations: texts(conversations, 2),
      entries: texts(entries, 3),
      submissions: texts(submissions, 4),
      documents: documentTexts(documents, batch),
    })
  );
}

/** The JSON texts at `column` of a list's rows (none mapped for an empty list). */
function texts(rows: readonly SqlValue[][], column: number): readonly string[] {
  return rows.length === 0 ? NONE : rows.map((row) => row[column] as string);
}

/** The documents' JSON texts for the log (a removed document's row has none: its record's own text). */
function documentTexts(rows: readonly SqlValue[][], batch: Batch): readonly string[] {
  return rows.length === 0 ? NONE : rows.map((row, index) => (row[2] as string | undefined) ?? JSON.stringify(batch.documents[index]));
}

export function largestRowId(batch: Batch): number {
  let largest = 0;
  for (const rows of [batch.tasks, batch.entries, batch.conversations, batch.submissions]) {
    for (const row of rows) if (row.id > largest) largest = row.id;
  }
  return largest;
}
