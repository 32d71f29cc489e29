import { deepFreeze } from "../base/json.ts";
import type { Batch, ConversationRecord, DocumentRecord, SubmissionRecord, TaskRecord } from "../storage/records.ts";
import type { StoredState } from "../storage/storage.ts";
import { documentKey, HANDOVER_KEY_PREFIX, TASK_KEYS } from "./keys.ts";

/**
 * The session's in-memory mirror of committed state (live tasks, current documents, open submissions, conversations,
 * hand-over keys, the id counter): how an open fills it from storage and how each stored batch moves it. Apart from
 * `session.ts` because it is what the line's commits change, not the line; `publish` is on every commit's path, so it
 * is a plain function of the session's own fields (no object, no closure: decision 0077).
 */

/** The fields of `Session` the mirror is made of. */
export interface SessionMirror {
  readonly live: Map<number, TaskRecord>;
  readonly conversations: Map<number, ConversationRecord>;
  readonly documents: Map<string, DocumentRecord>;
  readonly openSubmissions: Map<number, SubmissionRecord>;
  /** Hand-over task keys (a follower tab's) and when each expires: the ones `KernelTx` deletes when due. */
  readonly handoverKeys: Map<string, number>;
  nextId: number;
  rootConversationId: number | undefined;
}

/** Fills the mirror at open with what storage loaded (`liveTasks`: the loaded ones the open kept, now frozen). */
export function loadMirror(mirror: SessionMirror, state: StoredState, liveTasks: readonly TaskRecord[]): void {
  for (const task of liveTasks) mirror.live.set(task.id, deepFreeze(task));
  for (const conversation of state.conversations) mirror.conversations.set(conversation.id, conversation);
  for (const document of state.documents) {
    mirror.documents.set(documentKey(document.scope, document.key), document);
    indexHandover(mirror.handoverKeys, document.scope, document.key, document.value);
  }
  for (const submission of state.openSubmissions) mirror.openSubmissions.set(submission.id, submission);
}

/** Moves the mirror on by a stored batch (its records are frozen as they enter it). */
export function publish(mirror: SessionMirror, batch: Batch): void {
  if (batch.nextId !== undefined) mirror.nextId = batch.nextId;
  if (batch.rootConversationId !== undefined) mirror.rootConversationId = batch.rootConversationId;
  // Indexed loops, not for…of: a batch's unstaged lists are one shared frozen array, and Node 20's optimized
  // for…of over a frozen array allocates its iterator and a result object each time (decision 0077).
  const { tasks, conversations, documents, submissions } = batch;
  for (let at = 0; at < tasks.length; at++) {
    const task = deepFreeze(tasks[at]!);
    if (task.state.status === "terminal") mirror.live.delete(task.id);
    else mirror.live.set(task.id, task);
  }
  for (let at = 0; at < conversations.length; at++) mirror.conversations.set(conversations[at]!.id, conversations[at]!);
  for (let at = 0; at < documents.length; at++) {
    const document = documents[at]!;
    const key = documentKey(document.scope, document.key);
    if (document.value === null) mirror.documents.delete(key);
    else mirror.documents.set(key, { scope: document.scope, key: document.key, value: document.value });
    if (document.scope === TASK_KEYS) indexHandover(mirror.handoverKeys, document.scope, document.key, document.value);
  }
  for (let at = 0; at < submissions.length; at++) {
    const submission = submissions[at]!;
    if (submission.status === "queued" || submission.status === "running") mirror.openSubmissions.set(submission.id, submission);
    else mirror.openSubmissions.delete(submission.id);
  }
}

function indexHandover(handoverKeys: Map<string, number>, scope: string, key: string, value: unknown): void {
  if (scope !== TASK_KEYS || !key.startsWith(HANDOVER_KEY_PREFIX)) return;
  const expiresAt = (value as { expiresAt?: unknown } | null)?.expiresAt;
  if (typeof expiresAt === "number") handoverKeys.set(key, expiresAt);
  else handoverKeys.delete(key);
}
