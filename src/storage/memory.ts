import type { Json } from "../base/json.ts";
import { DurableError, HarnessClosed, ReadOnlySession } from "../errors.ts";
import { continuesLog } from "./log.ts";
import type {
  Batch,
  ConversationRecord,
  DocumentRecord,
  EntryRecord,
  EpochStart,
  LogMark,
  PinnedLease,
  Snapshot,
  SubmissionRecord,
  TaskRecord,
  TaskStatus,
} from "./records.ts";
import { columnBytes, parseAll, parseStored, refuseLargeRow } from "./rows.ts";
import type { DamagedRow, EntryRange, Row, Storage, StoredState } from "./storage.ts";

export interface MemoryStorageOptions {
  readOnly?: boolean;
  /**
   * Rows of at most this many bytes, as on a Durable Object (2_000_000): a commit with a larger row is refused
   * with `InvalidInput` (limit `maxRowBytes`), as there. Default: unlimited.
   */
  maxRowBytes?: number;
}

interface Image {
  format: "pi-durable-memory/1";
  nextId: number;
  rootConversationId?: number;
  tasks: Record<string, string>;
  conversations: Record<string, string>;
  entries: Record<string, string>;
  submissions: Record<string, string>;
  documents: Record<string, string>;
  /** The fenced log's head and where each epoch's stretch begins (decision 0029); absent before a fenced commit. */
  log?: LogMark;
  epochs?: Record<string, number>;
  /** The log's tail: each fenced batch by position, until trimmed. */
  tail?: Record<string, string>;
  /** The pinned lease this place holds (decision 0039). */
  pinned?: PinnedLease;
  /** Kept forks by key (decision 0039). */
  forks?: Record<string, string>;
}

/**
 * Storage in memory with SQLite's semantics: records are kept serialized (reads are detached copies) and a
 * batch is serialized completely before anything changes, so a batch that fails halfway leaves no trace.
 * `exportImage()` / `MemoryStorage.fromImage()` copy it, which is how unit tests simulate a crash.
 */
export class MemoryStorage implements Storage {
  readonly label = "memory";
  #image: Image;
  #closed = false;

  constructor(options: MemoryStorageOptions = {}) {
    this.readOnly = options.readOnly ?? false;
    this.maxRowBytes = options.maxRowBytes;
    this.#image = { format: "pi-durable-memory/1", nextId: 1, tasks: {}, conversations: {}, entries: {}, submissions: {}, documents: {} };
  }
  readonly readOnly: boolean;
  /** The most bytes one row holds: undefined (rows are limited by memory) unless `options.maxRowBytes` says. */
  readonly maxRowBytes: number | undefined;

  static fromImage(bytes: Uint8Array, options: MemoryStorageOptions = {}): MemoryStorage {
    let image: Image;
    try {
      image = JSON.parse(new TextDecoder().decode(bytes)) as Image;
    } catch (error) {
      throw new DurableError("These bytes are not a MemoryStorage image (not JSON).", { cause: error });
    }
    if (image?.format !== "pi-durable-memory/1") throw new DurableError("These bytes are not a MemoryStorage image.");
    const storage = new MemoryStorage(options);
    storage.#image = image;
    return storage;
  }

  #open(): Image {
    if (this.#closed) throw new HarnessClosed("Storage");
    return this.#image;
  }

  async load(): Promise<StoredState> {
    const image = this.#open();
    const damaged: DamagedRow[] = [];
    const rows = (table: keyof Image & string) => Object.entries(image[table] as Record<string, string>);
    const byId = <T extends { id: number }>(list: T[]) => list.sort((a, b) => a.id - b.id);
    const liveTasks = byId(parseAll<TaskRecord>("tasks", rows("tasks"), damaged).filter((task) => task.state.status !== "terminal"));
    const documents = parseAll<DocumentRecord>("documents", rows("documents"), damaged);
    const openSubmissions = byId(
      parseAll<SubmissionRecord>("submissions", rows("submissions"), damaged).filter(
        (s) => s.status === "queued" || s.status === "running",
      ),
    );
    return {
      nextId: image.nextId,
      rootConversationId: image.rootConversationId,
      liveTasks,
      conversations: byId(parseAll<ConversationRecord>("conversations", rows("conversations"), damaged)),
      documents,
      openSubmissions,
      ...(image.log ? { log: { ...image.log } } : {}),
      ...(image.pinned ? { pinned: { ...image.pinned } } : {}),
      ...(damaged.length > 0 ? { damaged } : {}),
    };
  }

  async apply(batch: Batch): Promise<void> {
    const image = this.#open();
    if (this.readOnly) throw new ReadOnlySession("A write");
    const { tasks, conversations, entries, submissions, documents } = this.#rows(batch);
    const fence = batch.fence;
    // The tail keeps a transaction of any size (SQLite splits it into rows under the limit; decision 0039).
    const logged = fence ? JSON.stringify(batch) : undefined;
    if (fence) {
      if (continuesLog(image.log, fence, this.label)) (image.epochs ??= {})[String(fence.epoch)] = fence.position;
      image.log = { epoch: fence.epoch, position: fence.position };
      (image.tail ??= {})[String(fence.position)] = logged!;
    }
    for (const [id, text] of tasks) image.tasks[id] = text;
    for (const [id, text] of conversations) image.conversations[id] = text;
    for (const [id, text] of entries) image.entries[id] = text;
    for (const [id, text] of submissions) image.submissions[id] = text;
    for (const [key, text] of documents) {
      if (text === null) delete image.documents[key];
      else image.documents[key] = text;
    }
    if (batch.nextId !== undefined) image.nextId = batch.nextId;
    if (batch.rootConversationId !== undefined) image.rootConversationId = batch.rootConversationId;
  }

  /** Serializes every row of `batch` first (a value that is not JSON rejects it before any change), sizes checked. */
  #rows(batch: Batch) {
    const tasks = batch.tasks.map((task) => [String(task.id), JSON.stringify(task)] as const);
    const conversations = batch.conversations.map((c) => [String(c.id), JSON.stringify(c)] as const);
    const entries = batch.entries.map((e) => [String(e.id), JSON.stringify(e)] as const);
    const submissions = batch.submissions.map((s) => [String(s.id), JSON.stringify(s)] as const);
    const documents = batch.documents.map((d) => [docKey(d.scope, d.key), d.value === null ? null : JSON.stringify(d)] as const);
    if (this.maxRowBytes !== undefined) {
      const max = this.maxRowBytes;
      for (const [table, rows] of [
        ["tasks", tasks],
        ["conversations", conversations],
        ["entries", entries],
        ["submissions", submissions],
        ["documents", documents],
      ] as const) {
        for (const [id, text] of rows) if (text !== null) refuseLargeRow(max, table, id, text, columnBytes(id));
      }
    }
    return { tasks, conversations, entries, submissions, documents };
  }

  async readLog(after: number, limit: number, maxBytes = Infinity): Promise<Array<Batch & { fence: LogMark }>> {
    const rows = Object.entries(this.#open().tail ?? {})
      .filter(([position]) => Number(position) > after)
      .sort(([a], [b]) => Number(a) - Number(b))
      .slice(0, limit);
    let bytes = 0;
    const within = rows.filter(([, text], index) => (bytes += text.length) <= maxBytes || index === 0);
    return within.map(([position, text]) => parseStored<Batch & { fence: LogMark }>("memory", "log", position, text));
  }

  async readSnapshot(): Promise<Snapshot | undefined> {
    const image = this.#open();
    if (!image.log) return undefined;
    const table = <T>(name: "tasks" | "conversations" | "entries" | "submissions") => values<T & { id: number }>(image[name], name);
    const documents = Object.entries(image.documents)
      .sort(([a], [b]) => (a < b ? -1 : a > b ? 1 : 0))
      .map(([key, text]) => parseStored<DocumentRecord>("memory", "documents", key, text));
    return {
      batch: {
        fence: { ...image.log },
        nextId: image.nextId,
        ...(image.rootConversationId === undefined ? {} : { rootConversationId: image.rootConversationId }),
        tasks: table<TaskRecord>("tasks"),
        conversations: table<ConversationRecord>("conversations"),
        entries: table<EntryRecord>("entries"),
        submissions: table<SubmissionRecord>("submissions"),
        documents,
      },
      epochs: await this.readEpochs(),
    };
  }

  async rebuild(snapshot: Snapshot): Promise<void> {
    const image = this.#open();
    if (this.readOnly) throw new ReadOnlySession("Rebuilding from a snapshot");
    const { batch, epochs } = snapshot;
    const { tasks, conversations, entries, submissions, documents } = this.#rows(batch);
    // Everything is serialized and checked above: from here the image is swapped whole, as one transaction.
    const next: Image = {
      format: "pi-durable-memory/1",
      nextId: batch.nextId,
      ...(batch.rootConversationId === undefined ? {} : { rootConversationId: batch.rootConversationId }),
      tasks: Object.fromEntries(tasks),
      conversations: Object.fromEntries(conversations),
      entries: Object.fromEntries(entries),
      submissions: Object.fromEntries(submissions),
      documents: Object.fromEntries(documents.filter((row): row is readonly [string, string] => row[1] !== null)),
      log: { epoch: batch.fence.epoch, position: batch.fence.position },
      epochs: Object.fromEntries(epochs.map(({ epoch, start }) => [String(epoch), start])),
      ...(image.forks ? { forks: image.forks } : {}),
    };
    this.#image = next;
  }

  async readEpochs(): Promise<EpochStart[]> {
    return Object.entries(this.#open().epochs ?? {})
      .map(([epoch, start]) => ({ epoch: Number(epoch), start }))
      .sort((a, b) => a.epoch - b.epoch);
  }

  async rememberLease(lease: PinnedLease | undefined): Promise<void> {
    const image = this.#open();
    if (this.readOnly) throw new ReadOnlySession("Remembering a lease");
    if (lease) image.pinned = { place: lease.place, epoch: lease.epoch };
    else delete image.pinned;
  }

  async keepFork(key: string, record: Json): Promise<void> {
    const image = this.#open();
    if (this.readOnly) throw new ReadOnlySession("Keeping a fork");
    const forks = (image.forks ??= {});
    if (!Object.hasOwn(forks, key)) forks[key] = JSON.stringify(record);
  }

  async readForks(): Promise<Array<{ key: string; record: Json }>> {
    return Object.entries(this.#open().forks ?? {})
      .sort(([a], [b]) => (a < b ? -1 : a > b ? 1 : 0))
      .map(([key, text]) => ({ key, record: parseStored<Json>("memory", "forks", key, text) }));
  }

  async dismissFork(key: string): Promise<void> {
    const image = this.#open();
    if (this.readOnly) throw new ReadOnlySession("Dismissing a fork");
    if (image.forks) delete image.forks[key];
  }

  async trimLog(through: number): Promise<void> {
    const image = this.#open();
    if (this.readOnly) throw new ReadOnlySession("Trimming the log");
    for (const position of Object.keys(image.tail ?? {})) if (Number(position) <= through) delete image.tail![position];
  }

  async getTask(id: number): Promise<TaskRecord | undefined> {
    return parse(this.#open().tasks[String(id)], "tasks", id);
  }

  async listTasks(filter: { status?: TaskStatus; conversationId?: number } = {}): Promise<TaskRecord[]> {
    return values<TaskRecord>(this.#open().tasks, "tasks").filter(
      (task) =>
        (filter.status === undefined || task.state.status === filter.status) &&
        (filter.conversationId === undefined || task.conversationId === filter.conversationId),
    );
  }

  async getConversation(id: number): Promise<ConversationRecord | undefined> {
    return parse(this.#open().conversations[String(id)], "conversations", id);
  }

  async listConversations(): Promise<ConversationRecord[]> {
    return values<ConversationRecord>(this.#open().conversations, "conversations");
  }

  async listEntries(conversationId: number, options: EntryRange = {}): Promise<EntryRecord[]> {
    const after = options.afterId ?? 0;
    const before = options.beforeId ?? Infinity;
    const range = values<EntryRecord>(this.#open().entries, "entries").filter(
      (e) => e.conversationId === conversationId && e.id > after && e.id < before,
    );
    return options.last === undefined ? range : range.slice(Math.max(0, range.length - options.last));
  }

  async getEntry(id: number): Promise<EntryRecord | undefined> {
    return parse(this.#open().entries[String(id)], "entries", id);
  }

  async getDocument(scope: string, key: string): Promise<Json | undefined> {
    return parse<DocumentRecord>(this.#open().documents[docKey(scope, key)], "documents", key)?.value;
  }

  async listDocuments(scope: string): Promise<DocumentRecord[]> {
    return Object.entries(this.#open().documents)
      .map(([key, text]) => parseStored<DocumentRecord>("memory", "documents", key, text))
      .filter((d) => d.scope === scope)
      .sort((a, b) => (a.key < b.key ? -1 : a.key > b.key ? 1 : 0));
  }

  async getSubmission(id: number): Promise<SubmissionRecord | undefined> {
    return parse(this.#open().submissions[String(id)], "submissions", id);
  }

  async findSubmission(conversationId: number, requestId: string): Promise<SubmissionRecord | undefined> {
    return values<SubmissionRecord>(this.#open().submissions, "submissions").find(
      (s) => s.conversationId === conversationId && s.requestId === requestId,
    );
  }

  async listSubmissions(conversationId: number): Promise<SubmissionRecord[]> {
    return values<SubmissionRecord>(this.#open().submissions, "submissions").filter((s) => s.conversationId === conversationId);
  }

  async query(): Promise<Row[]> {
    this.#open();
    throw new DurableError("MemoryStorage has no SQL; open a SQLite storage to run queries.");
  }

  async exportImage(): Promise<Uint8Array> {
    return new TextEncoder().encode(JSON.stringify(this.#open()));
  }

  async close(): Promise<void> {
    this.#closed = true;
  }
}

function docKey(scope: string, key: string): string {
  return `${scope}\u0000${key}`;
}

function parse<T>(text: string | undefined, table = "record", id: number | string = "?"): T | undefined {
  return text === undefined ? undefined : parseStored<T>("memory", table, id, text);
}

function values<T extends { id: number }>(table: Record<string, string>, name = "record"): T[] {
  return Object.entries(table)
    .map(([id, text]) => parseStored<T>("memory", name, id, text))
    .sort((a, b) => a.id - b.id);
}
