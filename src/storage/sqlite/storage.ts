import type { Json } from "../../base/json.ts";
import { DatabaseCorrupt, ReadOnlySession } from "../../errors.ts";
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
} from "../records.ts";
import { logSlices, parseAll, parseStored } from "../rows.ts";
import type { DamagedRow, EntryRange, RebuildStage, Row, Storage, StoredState } from "../storage.ts";
import { commitRows, largestRowId, logText, refuseLargeRows } from "./commit-rows.ts";
import type { SqliteDatabase, SqliteTransaction } from "./database.ts";
import { DeferredTaskRows, type DeferTaskRows, mayDefer, recoverTaskRows, type Turn } from "./deferred.ts";
import { FencedLog } from "./fenced-log.ts";
import { readLiveTasks } from "./live-tasks.ts";
import { queryOnly, toSqlValue } from "./query-fallback.ts";
import { type QueryLimits, queryLimits } from "./query-rules.ts";
import { recountOf, storeRecount } from "./recount.ts";
import { OWED_KEY, OwedRecount } from "./recount-owed.ts";
import { optional, parseRecord, taskListQuery } from "./row-read.ts";
import { SQL } from "./schema.ts";
import { type MetaTable, type PreparedSchema, pinnedLease, prepareSchema, readMeta } from "./schema-open.ts";
import { SnapshotStore } from "./snapshot-store.ts";
import { OVERLAID_LIVE_TASKS, type Overlaid } from "./task-overlay.ts";
import { TaskRowWriter } from "./task-rows-write.ts";
import { rememberRows, type TaskText, taskTexts } from "./task-text.ts";

export interface SqliteStorageOptions {
  /** Caps on what one `query()` may return and cost; unset ones keep their defaults (`DEFAULT_QUERY_LIMITS`). */
  queryLimits?: Partial<QueryLimits>;
  /**
   * A fenced step of live tasks whose status stays writes its log row only; the task rows wait in memory and are
   * written at the next flush point (decision 0081). Default off (`openSqliteStorage` turns it on, decision
   * 0086); needs a connection that counts its writes (`SqliteTransaction.writes`), else nothing defers.
   */
  deferTaskRows?: DeferTaskRows;
}

/**
 * Storage on any `SqliteDatabase` (sqlite-wasm in memory or on OPFS, or another driver). One `apply` is one
 * transaction. Opening checks the schema version before it writes anything.
 */
export class SqliteStorage implements Storage {
  readonly label: string;
  readonly #db: SqliteDatabase;
  /**
   * The stored status of each live task this storage has read or written. Most commits move a task from
   * running to running with a new checkpoint; when the status is unchanged only `record` is rewritten, which
   * spares the partial index on `status` (about a third of a step's SQLite time).
   */
  readonly #liveStatus = new Map<number, string>();
  /**
   * The text each live task's record was last written with, in pieces around its state (decision 0041): a
   * commit that changes only the state serializes only the state.
   */
  readonly #texts = new Map<number, TaskText>();
  /** The fenced log: its head as this storage last read or stored it, its check, its row, its tail (fenced-log.ts). */
  readonly #log: FencedLog;
  /** Writes each batch's task rows, several steps to a statement (task-rows-write.ts). */
  readonly #rows = new TaskRowWriter();
  /** The task rows fenced steps left waiting, when this storage defers them (deferred.ts). */
  readonly #deferred: DeferredTaskRows | undefined;
  readonly #snapshots: SnapshotStore;
  readonly #owed: OwedRecount; // S4's restarts this open (or a crashed one) still owes (decision 0092)
  /** Where the metadata is: version 1's table on a read-only open of a database that was not migrated. */
  readonly #meta: MetaTable;
  /** Whether the tail's slices' table exists (not on a read-only open of a database before version 4). */
  readonly #parts: boolean;
  /** What one `query()` may return and cost (defaults in `DEFAULT_QUERY_LIMITS`). */
  readonly queryLimits: QueryLimits;
  readonly #liveTasks: string; // through the overlay of a read-only file behind its log (decision 0088)
  /** The live rows read in one row (decision 0110): not through the overlay, nor where a row is limited. */
  readonly #liveTasksJoined: string | undefined;

  private constructor(db: SqliteDatabase, label: string, schema: Overlaid<PreparedSchema>, limits: QueryLimits, defer: DeferTaskRows) {
    this.#db = db;
    this.#liveTasks = schema.overlaid ? OVERLAID_LIVE_TASKS : SQL.liveTasks;
    // A Durable Object's row holds 2 MB: every live record joined in one value would not fit there.
    this.#liveTasksJoined = schema.overlaid || db.maxRowBytes !== undefined ? undefined : SQL.liveTasksJoined;
    this.label = label;
    this.#meta = schema.meta;
    this.#log = new FencedLog(db, label, schema);
    this.#parts = schema.parts;
    this.queryLimits = limits;
    this.#deferred = defer && !db.readOnly ? new DeferredTaskRows(defer, label) : undefined;
    this.#owed = new OwedRecount(label);
    this.#snapshots = new SnapshotStore(
      db,
      label,
      (body) => this.#writing(body),
      () => this.#log.exists,
      () => this.#rebuilt(),
    );
  }

  get readOnly(): boolean {
    return this.#db.readOnly;
  }

  get maxRowBytes(): number | undefined {
    return this.#db.maxRowBytes;
  }

  /** The database underneath (for benchmarks and diagnostics). */
  get database(): SqliteDatabase {
    return this.#db;
  }

  /**
   * Checks (and on a new or older, writable database creates or migrates) the schema before it writes anything.
   * Refuses newer schemas and files that are not ours (schema-open.ts says how that is told).
   */
  static async open(db: SqliteDatabase, label = "sqlite", options: SqliteStorageOptions = {}): Promise<SqliteStorage> {
    const limits = queryLimits(options.queryLimits);
    const schema = await prepareSchema(db, label);
    const overlaid = await recoverTaskRows(db, label, schema.meta); // before anything reads the task table (0081, 0088)
    return new SqliteStorage(db, label, { ...schema, overlaid }, limits, options.deferTaskRows ?? false);
  }

  async load(): Promise<StoredState> {
    await this.#flushed();
    const meta = await readMeta(this.#db, this.#meta);
    const floor = Number(meta.get("next_id"));
    if (!Number.isSafeInteger(floor) || floor < 1) throw new DatabaseCorrupt(`${this.label}: metadata next_id is damaged.`);
    // Every id ever handed out is in a row (rows are never deleted), so the next id follows the largest
    // one: commits need not rewrite a counter. `next_id` stays as a floor.
    const largest = Number((await this.#db.get(SQL.largestId))?.id ?? 0);
    const nextId = Math.max(floor, largest + 1);
    const root = meta.get("root_conversation");
    const pinned = pinnedLease(meta.get("pinned_lease"));
    const log = await this.#log.load();
    // B4: a row that does not parse is listed as damaged, not thrown: a read-only open still shows the rest.
    const damaged: DamagedRow[] = [];
    const rows = async (sql: string) => (await this.#db.all(sql)).map((row) => [row.id as number | string, row.record] as const);
    // The live tasks are parsed as they are read (decision 0054): with thousands live, an array of every row's
    // text first would outlive a young-generation collection or two in front of the first resumed step.
    // In id order, unsorted by SQLite (0104); in one row where it can be (0110).
    const liveTasks = await readLiveTasks(this.#db, this.#liveTasks, damaged, this.#liveTasksJoined);
    this.#owed.loaded(meta.get(OWED_KEY), liveTasks);
    this.#liveStatus.clear();
    this.#texts.clear();
    for (const task of liveTasks) this.#liveStatus.set(task.id, task.state.status);
    return {
      nextId,
      rootConversationId: root === undefined ? undefined : Number(root),
      liveTasks,
      conversations: parseAll<ConversationRecord>("conversations", await rows(SQL.listConversations), damaged),
      documents: parseAll<DocumentRecord>("documents", await rows(SQL.allDocuments), damaged),
      openSubmissions: parseAll<SubmissionRecord>("submissions", await rows(SQL.openSubmissions), damaged),
      ...(log ? { log } : {}),
      ...(pinned ? { pinned } : {}),
      ...(damaged.length > 0 ? { damaged } : {}),
    };
  }

  /** Resolves with a fenced batch's log text (its JSON, text for text: what a mirror pushes, decision 0093). */
  apply(batch: Batch): Promise<string | undefined> {
    if (this.readOnly) return Promise.reject(new ReadOnlySession("A write"));
    // A batch that is no recount (every step's) goes on with no await (decision 0091) and no async frame (0124) of its
    // own. S4's recovery batch is one statement, or a slice and the rest owed (decisions 0043, 0092).
    try {
      const recount = recountOf(batch, this.#db.maxRowBytes);
      if (recount)
        return storeRecount(batch, recount, this.#owed, (body) => this.#writing(body), this.#liveStatus, this.#texts).then((done) =>
          done ? undefined : this.#stored(batch),
        );
      return this.#stored(batch);
    } catch (error) {
      return Promise.reject(error);
    }
  }

  /** `apply` of a batch that is not S4's recount (or is one the statement did not take); may throw before writing. */
  #stored(batch: Batch): Promise<string | undefined> {
    // Serialize before the transaction: a value that is not JSON fails here and nothing is written.
    const tasks = taskTexts(batch.tasks, this.#texts);
    const { conversations, entries, submissions, documents } = commitRows(batch);
    const max = this.#db.maxRowBytes;
    // A row larger than the platform's (a Durable Object's 2 MB) is the commit's InvalidInput, not an SQL error.
    if (max !== undefined) refuseLargeRows(max, { tasks, conversations, entries, submissions, documents });
    const fence = batch.fence;
    // The log's tail keeps the transaction in slices that each fit in a row (decision 0039), its text made of the
    // rows' own texts (commit-rows.ts).
    const text = fence ? logText(batch, { tasks, conversations, entries, submissions, documents }) : undefined;
    const logged = text === undefined ? undefined : logSlices(text, max);
    let committed: number | undefined | null = null; // the fenced log's write count once written (null: not)
    const deferring = this.#deferred !== undefined && mayDefer(batch, this.#liveStatus);
    // A deferring step's turn (its body ran whole) is put back here if the COMMIT fails (0131): in a handler on the
    // transaction itself, a tick before the connection's next one starts. While restarts are owed the owed restarts'
    // handler is the one on the transaction: `#writing` puts the turn back there, and `failed` here finds it done.
    let opened: Turn | undefined;
    const written = this.#writing(
      (tx, turn) => {
        // The fenced log (decision 0029): checked and advanced inside the transaction that carries the commit.
        if (fence) this.#log.write(tx, fence, logged!);
        // Decision 0081: the log row may be the step's only write; otherwise what waits is written first.
        if (!(deferring && turn!.defer(fence!, tasks))) {
          turn?.flush(fence && { through: fence.position - 1 }); // fenced: its task rows are logged, the mark stays (0086)
          this.#rows.write(tx, tasks, this.#liveStatus);
        }
        if (this.#owed.owing) this.#owed.written(tx, batch.tasks);
        for (const row of conversations) tx.run(SQL.upsertConversation, ...row);
        for (const row of entries) tx.run(SQL.insertEntry, ...row);
        for (const row of submissions) tx.run(SQL.upsertSubmission, ...row);
        for (const row of documents) tx.run(row.length === 2 ? SQL.deleteDocument : SQL.upsertDocument, ...row);
        if (batch.rootConversationId !== undefined) tx.run(SQL.writeMeta, "root_conversation", String(batch.rootConversationId));
        // The counter is rewritten only when the batch minted an id that no row of it carries; otherwise
        // load() finds the next id from the largest row id (rows are never deleted).
        if (batch.nextId !== undefined && batch.nextId > largestRowId(batch) + 1) tx.run(SQL.writeMeta, "next_id", String(batch.nextId));
        if (fence) committed = this.#log.written(tx);
        opened = turn;
      },
      deferring ? "owned" : true,
    );
    return written.then(
      () => {
        // Only after the commit: a rolled-back batch must not leave the cache ahead of the file.
        if (committed !== null) this.#log.stored(fence!, committed);
        rememberRows(tasks, this.#liveStatus, this.#texts);
        return text;
      },
      deferring
        ? (error: unknown) => {
            if (opened) this.#deferred!.failed(opened);
            throw error;
          }
        : undefined,
    );
  }

  get owesRestarts(): boolean {
    return !this.readOnly && this.#owed.owing;
  }

  /** One slice of the restarts this open owes (decision 0092); whether more is owed. */
  recountSlice = (): Promise<boolean> =>
    this.owesRestarts ? this.#writing((tx) => this.#owed.slice(tx, this.#liveStatus)) : Promise.resolve(false);

  holdCheckpoints(): () => void {
    return this.#db.holdCheckpoints?.() ?? (() => {});
  }

  // The fenced log's tail and epochs (fenced-log.ts).
  readLog = (after: number, limit: number, maxBytes?: number): Promise<Array<Batch & { fence: LogMark }>> =>
    this.#log.read(after, limit, maxBytes);
  readEpochs = (): Promise<EpochStart[]> => this.#log.epochs();

  async rememberLease(lease: PinnedLease | undefined): Promise<void> {
    if (this.readOnly) throw new ReadOnlySession("Remembering a lease");
    if (lease) await this.#db.run(SQL.writeMeta, "pinned_lease", JSON.stringify({ place: lease.place, epoch: lease.epoch }));
    else await this.#db.run(SQL.deleteMeta, "pinned_lease");
  }

  async keepFork(key: string, record: Json): Promise<void> {
    if (this.readOnly) throw new ReadOnlySession("Keeping a fork");
    await this.#db.run(SQL.keepFork, key, JSON.stringify(record));
  }

  async readForks(): Promise<Array<{ key: string; record: Json }>> {
    if (!this.#parts) return [];
    return (await this.#db.all(SQL.readForks)).map((row) => ({
      key: String(row.key),
      record: parseStored<Json>("sqlite", "pi_durable_forks", String(row.key), row.record),
    }));
  }

  async dismissFork(key: string): Promise<void> {
    if (this.readOnly) throw new ReadOnlySession("Dismissing a fork");
    await this.#db.run(SQL.dismissFork, key);
  }

  // The copy's snapshot (snapshot-store.ts): read whole or row by row, rebuilt at once or staged (decision 0084).
  readSnapshot = (): Promise<Snapshot | undefined> => this.#snapshots.read();
  readSnapshotRows: NonNullable<Storage["readSnapshotRows"]> = (head, row) => this.#snapshots.readRows(head, row);
  rebuild = (snapshot: Snapshot): Promise<void> => this.#snapshots.rebuild(snapshot);
  stageRebuild = (): Promise<RebuildStage> => this.#snapshots.stage();

  async trimLog(through: number): Promise<void> {
    if (this.readOnly) throw new ReadOnlySession("Trimming the log");
    // What waits is written first: the trim deletes the log rows it is in (decision 0081).
    await this.#log.trim(through, (body) => this.#writing((tx, turn) => body(tx, () => turn?.flush({}))));
  }

  async getTask(id: number): Promise<TaskRecord | undefined> {
    if (this.#deferred?.waits(id)) await this.#flushed();
    return optional(await this.#db.get(SQL.getTask, id), "tasks");
  }

  async listTasks(filter: { status?: TaskStatus; conversationId?: number } = {}): Promise<TaskRecord[]> {
    await this.#flushed();
    const { sql, params } = taskListQuery(filter);
    return (await this.#db.all(sql, ...params)).map((row) => parseRecord<TaskRecord>(row, "tasks"));
  }

  async getConversation(id: number): Promise<ConversationRecord | undefined> {
    return optional(await this.#db.get(SQL.getConversation, id), "conversations");
  }

  async listConversations(): Promise<ConversationRecord[]> {
    return (await this.#db.all(SQL.listConversations)).map((row) => parseRecord<ConversationRecord>(row, "conversations"));
  }

  async listEntries(conversationId: number, options: EntryRange = {}): Promise<EntryRecord[]> {
    const range = [conversationId, options.afterId ?? 0, options.beforeId ?? Number.MAX_SAFE_INTEGER] as const;
    const rows =
      options.last === undefined
        ? await this.#db.all(SQL.listEntries, ...range)
        : (await this.#db.all(SQL.listLastEntries, ...range, options.last)).reverse();
    return rows.map((row) => parseRecord<EntryRecord>(row, "entries"));
  }

  async getEntry(id: number): Promise<EntryRecord | undefined> {
    return optional(await this.#db.get(SQL.getEntry, id), "entries");
  }

  async getDocument(scope: string, key: string): Promise<Json | undefined> {
    return optional<DocumentRecord>(await this.#db.get(SQL.getDocument, scope, key), "documents")?.value;
  }

  async listDocuments(scope: string): Promise<DocumentRecord[]> {
    return (await this.#db.all(SQL.listDocuments, scope)).map((row) => parseRecord<DocumentRecord>(row, "documents"));
  }

  async getSubmission(id: number): Promise<SubmissionRecord | undefined> {
    return optional(await this.#db.get(SQL.getSubmission, id), "submissions");
  }

  async findSubmission(conversationId: number, requestId: string): Promise<SubmissionRecord | undefined> {
    return optional(await this.#db.get(SQL.findSubmission, conversationId, requestId), "submissions");
  }

  async listSubmissions(conversationId: number): Promise<SubmissionRecord[]> {
    return (await this.#db.all(SQL.listSubmissions, conversationId)).map((row) => parseRecord<SubmissionRecord>(row, "submissions"));
  }

  /**
   * Read-only SQL for inspectors, tests and pages: one statement that only reads, decided before anything
   * runs (B10; `SqliteDatabase.query`, docs/decisions/0020). A statement that would write or change the
   * connection is `QueryNotReadOnly`, one SQLite rejects is `QueryFailed`, one past `queryLimits` is
   * `QueryLimitExceeded`; none of them changes anything.
   */
  async query(sql: string, ...params: Json[]): Promise<Row[]> {
    if (typeof sql !== "string") throw new TypeError("storage.query() takes the SQL text as its first argument.");
    const values = params.map(toSqlValue);
    await this.#flushed(); // S11: raw SQL on the tasks table sees every acknowledged step
    return (await queryOnly(this.#db, sql, values, this.queryLimits)) as Row[];
  }

  async exportImage(): Promise<Uint8Array> {
    await this.#flushed(true); // a copy of the rows as they stand (the database's own image is the crash's)
    return this.#db.exportImage();
  }

  /** Closed whether or not what waits could be written (the log holds it: the next open replays it). */
  close = (): Promise<void> => this.#flushed(true).finally(() => this.#db.close());

  /** Only after a rebuild's commit: the caches describe the rows now stored. */
  #rebuilt(): void {
    this.#liveStatus.clear();
    this.#texts.clear();
    this.#log.forget();
    this.#owed.forget();
  }

  /**
   * A writing transaction; with deferring on, a turn of the waiting rows (rolled back with it). `plain`: the body defers
   * nothing, so while nothing waits it may run with no turn (decision 0091); `"owned"`: a deferring step, whose caller
   * puts its turn back if the COMMIT fails (decision 0131). What a crashed open owed is stored first in it (0092).
   */
  #writing<T>(body: (tx: SqliteTransaction, turn: Turn | undefined) => T, plain: boolean | "owned" = false): Promise<T> {
    const deferred = this.#deferred;
    // While restarts are owed every turn is owned, put back by the owed restarts' own handler (review of 0131, M1).
    if (deferred && this.#owed.owing)
      return this.#owed.around<T, Turn | undefined>(
        body,
        (run) => deferred.owned(this.#db, run),
        (turn) => deferred.failed(turn!),
      );
    return this.#owed.around(body, (run) =>
      !deferred
        ? this.#db.transaction((tx) => run(tx, undefined))
        : plain === "owned"
          ? deferred.owned(this.#db, run)
          : deferred.transaction(this.#db, run, plain),
    );
  }

  /** Writes what waits before a read of the task table (0081); `unmarked`: and a kept mark goes (0086: a copy, a close). */
  async #flushed(unmarked = false): Promise<void> {
    if (unmarked ? this.#deferred?.marked : this.#deferred?.waiting)
      await this.#writing((_tx, turn) => turn!.flush(unmarked ? undefined : {}));
  }
}
