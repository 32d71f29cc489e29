import type { Json } from "../base/json.ts";
import type {
  Batch,
  ConversationRecord,
  DocumentRecord,
  EntryRecord,
  EpochStart,
  LogMark,
  PinnedLease,
  Snapshot,
  SnapshotHead,
  SnapshotList,
  SnapshotRows,
  SubmissionRecord,
  TaskRecord,
  TaskStatus,
} from "./records.ts";

/**
 * A rebuild staged beside the copy (decision 0084; `Storage.stageRebuild`): rows written as a snapshot's parts
 * arrive, then swapped in whole. Until `commit` the copy is untouched; a crash leaves it as it was.
 */
export interface RebuildStage {
  /** Writes checked rows beside the copy (not into it). `InvalidInput` for a row past the storage's row limit. */
  add(rows: SnapshotRows): Promise<void>;
  /** Replaces the copy with the rows staged and `head`, in one transaction (as `Storage.rebuild`); the stage is spent. */
  commit(head: SnapshotHead): Promise<void>;
  /** Drops the rows staged (a refused or abandoned take); the copy is untouched. */
  discard(): Promise<void>;
}

/** What a harness reads at open: enough to rebuild its in-memory mirror of live work. */
export interface StoredState {
  nextId: number;
  rootConversationId?: number;
  /** Every task whose status is not `terminal`. */
  liveTasks: TaskRecord[];
  conversations: ConversationRecord[];
  /** Every current document (they are few and small: one slot per conversation concern). */
  documents: DocumentRecord[];
  /** Submissions that are not settled yet. */
  openSubmissions: SubmissionRecord[];
  /** The head of the fenced log (its last position and that commit's epoch); absent before any fenced commit. */
  log?: LogMark;
  /** The pinned lease this storage's place was granted, while it holds it (`rememberLease`, decision 0039). */
  pinned?: PinnedLease;
  /**
   * Rows that could not be parsed (bad JSON, `null`, no `state`), left out of the lists above. A writable
   * open refuses the database with `DatabaseCorrupt`; a read-only one opens it for inspection.
   */
  damaged?: DamagedRow[];
}

export interface DamagedRow {
  table: string;
  id: number | string;
  problem: string;
}

export type Row = Record<string, Json>;

/**
 * The storage contract. A harness is the only writer; it serializes its commits, and `apply` writes one
 * `Batch` atomically: after a crash either all of it is there or none of it.
 */
/** Which entries `listEntries` reads (ids exclusive; `last` keeps the newest of the range). */
export interface EntryRange {
  afterId?: number;
  beforeId?: number;
  last?: number;
}

export interface Storage {
  readonly readOnly: boolean;
  /** A short label for messages ("memory", "sqlite:opfs-sahpool:/pi.sqlite3"). */
  readonly label: string;
  /**
   * The most bytes one stored row holds, on a backend that limits it (a Durable Object: 2 MB); undefined
   * where rows are limited only by memory. It lowers the default of `settings.limits.maxBytes`.
   */
  readonly maxRowBytes?: number | undefined;
  load(): Promise<StoredState>;
  /**
   * Stores `batch` in one transaction. May resolve with a fenced batch's log text as it was stored — its
   * `JSON.stringify`, text for text (decision 0042) — so a mirror pushes that text rather than serializing the batch
   * again (decision 0093); resolves with nothing when it made none.
   */
  apply(batch: Batch): Promise<string | void>;
  /**
   * Holds back the backend's own housekeeping of its write-ahead log (SQLite's automatic checkpoint) until the
   * returned release is called: the session holds it over an open's recovery, so the checkpoint that batch
   * would trigger comes after the first resumed step instead of in front of it (decision 0033). Optional.
   */
  holdCheckpoints?(): () => void;
  /**
   * S4 in slices (decision 0092): whether this open's recovery commit left restarts owed, and one slice of them
   * (whether more is owed after it). Optional: a storage without it stores the whole recovery in its one commit.
   */
  readonly owesRestarts?: boolean;
  recountSlice?(): Promise<boolean>;
  /**
   * The log's tail (decision 0029): the fenced transactions after position `after`, at most `limit`, in order, as
   * they were stored. Kept until `trimLog` drops them. Absent on a storage that keeps no log. With `maxBytes`, no
   * more of them than their stored JSON fits in that many bytes — but always the first (a round of a feed is bounded
   * by bytes as well as by count, decision 0047).
   */
  readLog?(after: number, limit: number, maxBytes?: number): Promise<Array<Batch & { fence: LogMark }>>;
  /** Drops the log's tail up to and including `through` (the other place acknowledged it). */
  trimLog?(through: number): Promise<void>;
  /**
   * The whole copy at its log's head, read in one transaction (decision 0047): what another place rebuilds from when
   * it cannot follow this one's log (its copy forked, is empty, or is behind the trimmed tail). Undefined before the
   * first fenced commit. Absent on a storage without a log.
   */
  readSnapshot?(): Promise<Snapshot | undefined>;
  /**
   * Replaces this copy with `snapshot` in one transaction (decision 0047): every row, the log's head and epochs, the
   * id counter and the root conversation become the snapshot's; the log's tail and a remembered pinned lease are
   * dropped (they belong to the history replaced); the kept forks stay. A crash leaves the old copy or the new one.
   * Absent on a storage without a log.
   */
  rebuild?(snapshot: Snapshot): Promise<void>;
  /**
   * The copy at its log's head as `readSnapshot` reads it, in one transaction, but handed over a row at a time as the
   * row's stored JSON text, never parsed (decision 0084): first `head` (the snapshot without its rows), then `row` for
   * each row, list by list in `readSnapshot`'s order. False (nothing handed) before the first fenced commit.
   * Optional: without it the object reads `readSnapshot`.
   */
  readSnapshotRows?(head: (head: SnapshotHead) => void, row: (list: SnapshotList, record: string) => void): Promise<boolean>;
  /**
   * Begins a rebuild staged beside the copy (decision 0084): the snapshot's rows are written as they arrive, outside
   * the copy, and `commit` replaces the copy with them in one transaction as `rebuild` does. What a staged rebuild
   * left (a crash, a refusal) is cleared by the next one. Optional: without it the rows are held until `rebuild`.
   */
  stageRebuild?(): Promise<RebuildStage>;
  /**
   * Where each lease epoch's stretch of the log begins (`pi_durable_epochs`), oldest first: which epoch wrote which
   * position, so two copies can tell where they diverged (a fork, decision 0032). Absent on a storage without a log.
   */
  readEpochs?(): Promise<EpochStart[]>;
  /**
   * Keeps `record` (a fork, decision 0039) under `key` unless one is kept there already: local to this storage, never
   * in a batch nor in the log. Absent on a storage without a log.
   */
  keepFork?(key: string, record: Json): Promise<void>;
  /**
   * Remembers (or, undefined, forgets) the pinned lease this place holds, outside every batch: a reopen while the
   * log's head is still of that epoch writes on under it (decision 0039). Absent on a storage without a log.
   */
  rememberLease?(lease: PinnedLease | undefined): Promise<void>;
  /** The kept forks by key, in key order. */
  readForks?(): Promise<Array<{ key: string; record: Json }>>;
  /** Drops a kept fork (the app showed it, or resubmitted what it needed); an unknown key does nothing. */
  dismissFork?(key: string): Promise<void>;
  getTask(id: number): Promise<TaskRecord | undefined>;
  listTasks(filter?: { status?: TaskStatus; conversationId?: number }): Promise<TaskRecord[]>;
  getConversation(id: number): Promise<ConversationRecord | undefined>;
  listConversations(): Promise<ConversationRecord[]>;
  /**
   * Entries of a conversation in id order: only those after `afterId` and before `beforeId` when given, and
   * of those only the newest `last` (a conversation's last page, read without reading the rest).
   */
  listEntries(conversationId: number, options?: EntryRange): Promise<EntryRecord[]>;
  getEntry(id: number): Promise<EntryRecord | undefined>;
  getDocument(scope: string, key: string): Promise<Json | undefined>;
  listDocuments(scope: string): Promise<DocumentRecord[]>;
  getSubmission(id: number): Promise<SubmissionRecord | undefined>;
  findSubmission(conversationId: number, requestId: string): Promise<SubmissionRecord | undefined>;
  listSubmissions(conversationId: number): Promise<SubmissionRecord[]>;
  /** Read-only SQL; rows keyed by column name. Rejects statements that write. */
  query(sql: string, ...params: Json[]): Promise<Row[]>;
  /** The bytes of the whole database. */
  exportImage(): Promise<Uint8Array>;
  close(): Promise<void>;
}
