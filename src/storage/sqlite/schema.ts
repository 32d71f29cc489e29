/**
 * The whole SQLite schema, top to bottom. Each record is stored whole as JSON in `record`; the other columns
 * are copies for indexes and for hand-written SQL (S11: the seed's queries run on `tasks` unchanged).
 *
 * `pi_durable_meta` is the marker: a database that has it is ours. The other tables keep the plain names
 * hand-written SQL uses; in a database shared with an app (a Durable Object's SQLite) every other table is the
 * app's and is left alone (see schema-open.ts).
 *
 * Versions: 1 named the marker `meta`; 2 renamed it `pi_durable_meta` (an app's own `meta` no longer collides);
 * 3 added the fenced log (`pi_durable_epochs`, `pi_durable_log`, and `log_position` in the marker; decision 0029);
 * 4 split the log's tail into rows under the row limit (`pi_durable_log_parts`) and keeps a place's forks
 * (`pi_durable_forks`; decision 0039); 5 writes one row per fenced transaction (decision 0048): the log's head is its
 * last row, and `log_position` is only the head's floor, written when the tail is trimmed or a copy rebuilt (a
 * version 4 database's `log_position` is its head, already a valid floor: the migration only moves the version); 6 may
 * leave a fenced step's task row in its log only (decision 0081: `tasks_behind_log` in the marker), which a version 5
 * reader would take for current rows, so it must refuse the file (a version 5 file never has the key: the migration
 * only moves the version).
 */
export const SCHEMA_VERSION = 6;

/**
 * The metadata key that says the task table is behind the log (decision 0081): its value is the log position the
 * table is complete through; the rows past it are replayed at the next writable open, and a read-only open refuses.
 */
export const TASKS_BEHIND_LOG = "tasks_behind_log";

/** The marker table: its `schema_version` row says which schema the rest is. */
export const META_TABLE = "pi_durable_meta";

/** The fenced log's epochs (version 3). */
export const EPOCHS_TABLE = "pi_durable_epochs";

/** The rest of the log tail's long transactions (version 4). */
export const LOG_PARTS_TABLE = "pi_durable_log_parts";

/** The tables besides the marker, as hand-written SQL names them. */
export const DATA_TABLES = ["conversations", "tasks", "entries", "submissions", "documents"] as const;

export const SCHEMA = `
CREATE TABLE IF NOT EXISTS pi_durable_meta (
  key   TEXT PRIMARY KEY,
  value TEXT NOT NULL
) WITHOUT ROWID;

-- The fenced log (decision 0029), written only by a harness that holds a lease: the head's position is the last
-- row's of pi_durable_log, or, when the tail is trimmed to nothing, the marker's log_position (decision 0048: the
-- head's floor, written by a trim and a rebuild only); each lease epoch that wrote is one row, with the position
-- where its stretch begins.
CREATE TABLE IF NOT EXISTS pi_durable_epochs (
  epoch INTEGER PRIMARY KEY,
  start INTEGER NOT NULL
);
-- The log's tail: each fenced transaction's batch, kept until the place it is pushed to acknowledged it. On a
-- storage whose rows are limited (a Durable Object's 2 MB) a longer batch's JSON goes in slices: the first here,
-- the rest in pi_durable_log_parts by part 1, 2, … (decision 0039), written and trimmed together.
CREATE TABLE IF NOT EXISTS pi_durable_log (
  position INTEGER PRIMARY KEY,
  epoch    INTEGER NOT NULL,
  batch    TEXT NOT NULL
);
CREATE TABLE IF NOT EXISTS pi_durable_log_parts (
  position INTEGER NOT NULL,
  part     INTEGER NOT NULL,
  text     TEXT NOT NULL,
  PRIMARY KEY (position, part)
) WITHOUT ROWID;
-- This place's forks (decision 0039): its transactions another place's history does not hold, kept for the app
-- until it dismisses them, once per key (the same fork found again is not kept twice). Local: no batch writes
-- them, no push carries them.
CREATE TABLE IF NOT EXISTS pi_durable_forks (
  key    TEXT PRIMARY KEY,
  record TEXT NOT NULL
) WITHOUT ROWID;

CREATE TABLE IF NOT EXISTS conversations (
  id     INTEGER PRIMARY KEY,
  owner  INTEGER,
  record TEXT NOT NULL
);

CREATE TABLE IF NOT EXISTS tasks (
  id              INTEGER PRIMARY KEY,
  conversation_id INTEGER NOT NULL,
  kind            TEXT NOT NULL,
  status          TEXT NOT NULL,
  record          TEXT NOT NULL
);
-- Open reads only live work; terminal rows are receipts and never scanned.
CREATE INDEX IF NOT EXISTS tasks_live ON tasks (status) WHERE status <> 'terminal';
CREATE INDEX IF NOT EXISTS tasks_conversation ON tasks (conversation_id);

CREATE TABLE IF NOT EXISTS entries (
  id              INTEGER PRIMARY KEY,
  conversation_id INTEGER NOT NULL,
  kind            TEXT NOT NULL,
  record          TEXT NOT NULL
);
CREATE INDEX IF NOT EXISTS entries_conversation ON entries (conversation_id, id);

CREATE TABLE IF NOT EXISTS submissions (
  id              INTEGER PRIMARY KEY,
  conversation_id INTEGER NOT NULL,
  request_id      TEXT,
  status          TEXT NOT NULL,
  record          TEXT NOT NULL
);
CREATE INDEX IF NOT EXISTS submissions_open ON submissions (status) WHERE status IN ('queued', 'running');
CREATE UNIQUE INDEX IF NOT EXISTS submissions_request ON submissions (conversation_id, request_id)
  WHERE request_id IS NOT NULL;

CREATE TABLE IF NOT EXISTS documents (
  scope  TEXT NOT NULL,
  key    TEXT NOT NULL,
  record TEXT NOT NULL,
  PRIMARY KEY (scope, key)
) WITHOUT ROWID;
`;

/**
 * How many rows one statement of `SQL.updateTaskRecords` carries: two parameters a row, at most 64 in all (a
 * Durable Object's SQLite binds at most 100 per statement). A group's rows go in the largest that fit.
 */
export const TASK_RECORD_ROWS = [32, 16, 8, 4, 2] as const;
export type TaskRecordRows = (typeof TASK_RECORD_ROWS)[number];

const UPDATE_TASK_RECORDS = Object.fromEntries(
  TASK_RECORD_ROWS.map((rows) => [
    rows,
    `UPDATE tasks SET record = v.column2 FROM (VALUES ${Array.from({ length: rows }, () => "(?, ?)").join(", ")}) AS v WHERE tasks.id = v.column1`,
  ]),
) as Record<TaskRecordRows, string>;

/**
 * How many rows one statement of `SQL.upsertTasks` carries (decision 0087): five parameters a row, at most 80 in
 * all (under a Durable Object's 100). A batch's rows that are new or change their status go in the largest that fit.
 */
export const TASK_UPSERT_ROWS = [16, 8, 4, 2] as const;
export type TaskUpsertRows = (typeof TASK_UPSERT_ROWS)[number];

const UPSERT_TASKS = Object.fromEntries(
  TASK_UPSERT_ROWS.map((rows) => [
    rows,
    `INSERT INTO tasks (id, conversation_id, kind, status, record) VALUES ${Array.from({ length: rows }, () => "(?, ?, ?, ?, ?)").join(", ")}
    ON CONFLICT (id) DO UPDATE SET status = excluded.status, record = excluded.record`,
  ]),
) as Record<TaskUpsertRows, string>;

export const SQL = {
  tableNames: `SELECT name FROM sqlite_schema WHERE type = 'table'`,
  readMeta: `SELECT key, value FROM pi_durable_meta`,
  readMetaKey: `SELECT value FROM pi_durable_meta WHERE key = ?`,
  largestId: `SELECT max(id) AS id FROM (SELECT max(id) AS id FROM tasks UNION ALL SELECT max(id) FROM entries
    UNION ALL SELECT max(id) FROM conversations UNION ALL SELECT max(id) FROM submissions)`,
  deleteMeta: `DELETE FROM pi_durable_meta WHERE key = ?`,
  writeMeta: `INSERT INTO pi_durable_meta (key, value) VALUES (?, ?) ON CONFLICT (key) DO UPDATE SET value = excluded.value`,
  /**
   * The fenced log's head (decision 0048): the tail's last position, else (trimmed to nothing, or a rebuilt copy)
   * the marker's floor. The floor is never above a row still kept, so the larger of the two is the head.
   */
  logHead: `SELECT CASE WHEN last IS NULL THEN floor WHEN floor IS NULL OR last >= floor THEN last ELSE floor END AS position,
    (SELECT max(epoch) FROM pi_durable_epochs) AS epoch
    FROM (SELECT (SELECT max(position) FROM pi_durable_log) AS last,
      (SELECT CAST(value AS INTEGER) FROM pi_durable_meta WHERE key = 'log_position') AS floor)`,
  /**
   * The log's last row, its position and epoch (decisions 0048, 0058): the whole fence check of a same-epoch
   * continuation, a read in the commit's transaction (no write besides the log row). The last row is the head, and
   * every other writer's commit (any epoch's start included) adds a row above it; a rebuild clears the log, and the
   * copy may be followed back to the same position — under the epoch that wrote it there, so finding the last row
   * at the position *and* epoch where the storage left it means no one else wrote since (only that epoch's holder
   * writes under it). (An `INSERT … SELECT … WHERE` on the log itself was measured slower: SQLite stages an insert
   * that reads its own table.)
   */
  lastLogRow: `SELECT position, epoch FROM pi_durable_log ORDER BY position DESC LIMIT 1`,
  /** The head's floor kept before a trim removes rows (decision 0048): the last row's position, if any. */
  keepLogFloor: `INSERT INTO pi_durable_meta (key, value) SELECT 'log_position', head FROM (SELECT max(position) AS head FROM pi_durable_log)
    WHERE head IS NOT NULL ON CONFLICT (key) DO UPDATE SET value = excluded.value`,
  startEpoch: `INSERT INTO pi_durable_epochs (epoch, start) VALUES (?, ?)`,
  appendLog: `INSERT INTO pi_durable_log (position, epoch, batch) VALUES (?, ?, ?)`,
  appendLogPart: `INSERT INTO pi_durable_log_parts (position, part, text) VALUES (?, ?, ?)`,
  /** Version 3's tail (a read-only open of it): one row per transaction. */
  readLogRows: `SELECT position, 0 AS part, batch AS text FROM pi_durable_log WHERE position > ? ORDER BY position LIMIT ?`,
  /** The tail's transactions after a position, at most a number of them, each as its slices in order. One statement. */
  readLog: `WITH head AS (SELECT position, batch FROM pi_durable_log WHERE position > ? ORDER BY position LIMIT ?)
    SELECT position, 0 AS part, batch AS text FROM head
    UNION ALL SELECT position, part, text FROM pi_durable_log_parts WHERE position IN (SELECT position FROM head)
    ORDER BY position, part`,
  /**
   * `readLog` within a byte budget (decision 0047): the tail's transactions after a position, at most a number of
   * them and no more than their stored text (first slice and parts) fits in the budget, but always the first.
   */
  readLogWithin: `WITH head AS (SELECT position, batch FROM pi_durable_log WHERE position > ? ORDER BY position LIMIT ?),
    sized AS (SELECT position, sum(length(CAST(batch AS BLOB)) + coalesce((SELECT sum(length(CAST(p.text AS BLOB)))
      FROM pi_durable_log_parts p WHERE p.position = head.position), 0)) OVER (ORDER BY position) AS running FROM head),
    kept AS (SELECT position FROM sized WHERE running <= ? OR position = (SELECT min(position) FROM head))
    SELECT position, 0 AS part, batch AS text FROM pi_durable_log WHERE position IN (SELECT position FROM kept)
    UNION ALL SELECT position, part, text FROM pi_durable_log_parts WHERE position IN (SELECT position FROM kept)
    ORDER BY position, part`,
  trimLog: `DELETE FROM pi_durable_log WHERE position <= ?`,
  trimLogParts: `DELETE FROM pi_durable_log_parts WHERE position <= ?`,
  readEpochs: `SELECT epoch, start FROM pi_durable_epochs ORDER BY epoch`,
  keepFork: `INSERT INTO pi_durable_forks (key, record) VALUES (?, ?) ON CONFLICT (key) DO NOTHING`,
  readForks: `SELECT key, record FROM pi_durable_forks ORDER BY key`,
  dismissFork: `DELETE FROM pi_durable_forks WHERE key = ?`,
  /**
   * Through the partial index, named: without it the planner scans the whole table in id order to spare the
   * sort, reading every finished row at every open (decision 0027). In the index's order (by status, then id),
   * not sorted: SQLite's sorter would copy every live record (2.2 MB for 10,000 tasks) in front of the first
   * resumed step; `load()` puts the parsed records in id order instead (decision 0104).
   */
  liveTasks: `SELECT id, record FROM tasks INDEXED BY tasks_live WHERE status <> 'terminal'`,
  /**
   * The same rows in one row (decision 0110): their ids joined by commas and their records by the control character
   * U+001E (never in a record's JSON text: JSON escapes every control character), in the index's order, so the load
   * reads no live row into JavaScript one by one. Beside them what says whether that is every row: how many records
   * are text (as many as ids: one for one).
   */
  liveTasksJoined: `SELECT sum(typeof(record) = 'text') AS texts, group_concat(id) AS ids,
    group_concat(record, char(30)) AS records FROM tasks INDEXED BY tasks_live WHERE status <> 'terminal'`,
  /** The hot path: a live task's new state. Kind and conversation never change, so only two columns move. */
  updateTask: `UPDATE tasks SET status = ?, record = ? WHERE id = ?`,
  updateTaskRecord: `UPDATE tasks SET record = ? WHERE id = ?`,
  /** A group's steps (decision 0041): the records of `rows` live tasks whose status stays, in one statement. */
  updateTaskRecords: (rows: TaskRecordRows) => UPDATE_TASK_RECORDS[rows],
  /**
   * `rows` tasks that are new or change status (decision 0087), in one statement: a new one is inserted, one already
   * there gets its status and record, as `updateTask` then `insertTask` did one row at a time.
   */
  upsertTasks: (rows: TaskUpsertRows) => UPSERT_TASKS[rows],
  insertTask: `INSERT INTO tasks (id, conversation_id, kind, status, record) VALUES (?, ?, ?, ?, ?)`,
  getTask: `SELECT record FROM tasks WHERE id = ?`,
  upsertConversation: `INSERT INTO conversations (id, owner, record) VALUES (?, ?, ?)
    ON CONFLICT (id) DO UPDATE SET record = excluded.record`,
  getConversation: `SELECT record FROM conversations WHERE id = ?`,
  listConversations: `SELECT id, record FROM conversations ORDER BY id`,
  insertEntry: `INSERT INTO entries (id, conversation_id, kind, record) VALUES (?, ?, ?, ?)
    ON CONFLICT (id) DO UPDATE SET record = excluded.record`,
  listEntries: `SELECT record FROM entries WHERE conversation_id = ? AND id > ? AND id < ? ORDER BY id`,
  listLastEntries: `SELECT record FROM entries WHERE conversation_id = ? AND id > ? AND id < ? ORDER BY id DESC LIMIT ?`,
  getEntry: `SELECT record FROM entries WHERE id = ?`,
  upsertSubmission: `INSERT INTO submissions (id, conversation_id, request_id, status, record) VALUES (?, ?, ?, ?, ?)
    ON CONFLICT (id) DO UPDATE SET status = excluded.status, record = excluded.record`,
  getSubmission: `SELECT record FROM submissions WHERE id = ?`,
  findSubmission: `SELECT record FROM submissions WHERE conversation_id = ? AND request_id = ?`,
  listSubmissions: `SELECT record FROM submissions WHERE conversation_id = ? ORDER BY id`,
  upsertDocument: `INSERT INTO documents (scope, key, record) VALUES (?, ?, ?)
    ON CONFLICT (scope, key) DO UPDATE SET record = excluded.record`,
  deleteDocument: `DELETE FROM documents WHERE scope = ? AND key = ?`,
  getDocument: `SELECT record FROM documents WHERE scope = ? AND key = ?`,
  allDocuments: `SELECT scope || '/' || key AS id, record FROM documents`,
  openSubmissions: `SELECT id, record FROM submissions WHERE status IN ('queued', 'running') ORDER BY id`,
  listDocuments: `SELECT record FROM documents WHERE scope = ? ORDER BY key`,
  /** A snapshot's rows (decision 0047), every one of each table, read in one transaction. */
  snapshotRows: {
    tasks: `SELECT id, record FROM tasks ORDER BY id`,
    conversations: `SELECT id, record FROM conversations ORDER BY id`,
    entries: `SELECT id, record FROM entries ORDER BY id`,
    submissions: `SELECT id, record FROM submissions ORDER BY id`,
    documents: `SELECT scope || '/' || key AS id, record FROM documents ORDER BY scope, key`,
  },
  /** What a rebuild replaces (decision 0047): every row and the log; the forks and the app's tables stay. */
  clearForRebuild: [
    `DELETE FROM tasks`,
    `DELETE FROM conversations`,
    `DELETE FROM entries`,
    `DELETE FROM submissions`,
    `DELETE FROM documents`,
    `DELETE FROM pi_durable_log`,
    `DELETE FROM pi_durable_log_parts`,
    `DELETE FROM pi_durable_epochs`,
    `DELETE FROM pi_durable_meta WHERE key IN ('pinned_lease', 'root_conversation', 'tasks_behind_log')`,
  ],
} as const;
