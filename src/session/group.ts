import { deepFreeze, type Json } from "../base/json.ts";
import type { Batch, ConversationRecord, DocumentRecord, EntryRecord, SubmissionRecord, TaskRecord } from "../storage/records.ts";

/** What a group reads underneath: the session's committed mirrors. */
interface Mirror {
  readonly live: ReadonlyMap<number, TaskRecord>;
  readonly conversations: ReadonlyMap<number, ConversationRecord>;
  readonly documents: ReadonlyMap<string, DocumentRecord>;
  readonly openSubmissions: ReadonlyMap<number, SubmissionRecord>;
  readonly nextId: number;
}

/** A staged document: `value: null` deletes it. */
type StagedDocument = { scope: string; key: string; value: Json | null };

/**
 * Group commit (decision 0026): the commits of one group, staged one after another over the committed mirror.
 * Each commit of a group is built against the state the commits before it in the group left (this overlay),
 * so it decides exactly as it would have decided alone after them; the overlay is never seen outside the
 * group's own transactions (the mirror changes only once the whole group is stored). `batch()` is the one
 * storage transaction that carries them all: per record its last version, every entry, the largest id.
 */
export class GroupOverlay {
  readonly #mirror: Mirror;
  readonly tasks = new Map<number, TaskRecord>();
  readonly conversations = new Map<number, ConversationRecord>();
  readonly submissions = new Map<number, SubmissionRecord>();
  readonly documents = new Map<string, StagedDocument>();
  readonly #entries: EntryRecord[] = [];
  nextId: number;
  #rootConversationId: number | undefined;
  /** Commits staged so far that wrote something. */
  size = 0;

  constructor(mirror: Mirror) {
    this.#mirror = mirror;
    this.nextId = mirror.nextId;
  }

  /** Takes a commit's batch into the group (the commit passed its checks). */
  stage(batch: Batch, documentKey: (scope: string, key: string) => string): void {
    this.size++;
    if (batch.nextId !== undefined) this.nextId = batch.nextId;
    if (batch.rootConversationId !== undefined) this.#rootConversationId = batch.rootConversationId;
    // Frozen as the mirror's records are: a later commit of the group reads this one's record through its tx,
    // and writing into it must fail that commit, as it would alone, not change what this one stores.
    // Indexed loops: a commit's unstaged lists are one shared frozen array, and Node 20's optimized for…of over
    // a frozen array allocates an iterator and a result object every time (decision 0077).
    const { tasks, conversations, entries, submissions, documents } = batch;
    for (let at = 0; at < tasks.length; at++) this.tasks.set(tasks[at]!.id, deepFreeze(tasks[at]!));
    for (let at = 0; at < conversations.length; at++) this.conversations.set(conversations[at]!.id, conversations[at]!);
    for (let at = 0; at < entries.length; at++) this.#entries.push(entries[at]!);
    for (let at = 0; at < submissions.length; at++) this.submissions.set(submissions[at]!.id, submissions[at]!);
    for (let at = 0; at < documents.length; at++) {
      const document = documents[at]!;
      this.documents.set(documentKey(document.scope, document.key), document);
    }
  }

  /** A task as the group left it (a record it ended included), or as committed. */
  task(id: number): TaskRecord | undefined {
    return this.tasks.get(id) ?? this.#mirror.live.get(id);
  }

  /** Every live task as the group left it. */
  *liveTasks(): Iterable<TaskRecord> {
    for (const [id, record] of this.#mirror.live) if (!this.tasks.has(id)) yield record;
    for (const record of this.tasks.values()) if (record.state.status !== "terminal") yield record;
  }

  conversation(id: number): ConversationRecord | undefined {
    return this.conversations.get(id) ?? this.#mirror.conversations.get(id);
  }

  /** A document's value as the group left it (undefined when absent or deleted). */
  document(key: string): Json | undefined {
    const staged = this.documents.get(key);
    if (staged) return staged.value ?? undefined;
    return this.#mirror.documents.get(key)?.value;
  }

  submission(id: number): SubmissionRecord | undefined {
    return this.submissions.get(id) ?? this.#mirror.openSubmissions.get(id);
  }

  /** Submissions committed open, then the group's versions (open or not: the caller filters). */
  *submissionsSeen(): Iterable<SubmissionRecord> {
    yield* this.#mirror.openSubmissions.values();
    yield* this.submissions.values();
  }

  /** The one batch that stores the whole group. */
  batch(): Batch {
    const batch: Batch = {
      tasks: Array.from(this.tasks.values()),
      conversations: Array.from(this.conversations.values()),
      entries: this.#entries,
      submissions: Array.from(this.submissions.values()),
      documents: Array.from(this.documents.values()),
    };
    if (this.nextId !== this.#mirror.nextId) batch.nextId = this.nextId;
    if (this.#rootConversationId !== undefined) batch.rootConversationId = this.#rootConversationId;
    return batch;
  }
}
