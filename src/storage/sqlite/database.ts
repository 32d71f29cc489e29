/**
 * The async facade every SQLite backend implements. Operations are serialized: each one starts after the
 * previous one settled, so a transaction never interleaves with another statement.
 */
import type { QueryLimits } from "./query-rules.ts";

export type SqlValue = null | number | string | bigint | Uint8Array;
export type SqlRow = Record<string, SqlValue>;

export interface SqliteDatabase {
  /** Runs one or more statements that return nothing. */
  exec(sql: string): Promise<void>;
  /** Runs one statement; returns the number of changed rows. */
  run(sql: string, ...params: SqlValue[]): Promise<number>;
  /** First row of one statement, or undefined. */
  get(sql: string, ...params: SqlValue[]): Promise<SqlRow | undefined>;
  /** Every row of one statement. */
  all(sql: string, ...params: SqlValue[]): Promise<SqlRow[]>;
  /**
   * Hands each row of one statement to `onRow` as it is read, keeping none: a large read whose rows become
   * something else at once (the open's live tasks, decision 0054) then holds no array of row texts while it runs.
   * Optional: without it the caller reads them with `all`.
   */
  each?(sql: string, onRow: (row: SqlRow) => void): Promise<void>;
  /**
   * Runs `body` inside BEGIN IMMEDIATE … COMMIT. The body gets a synchronous handle so a transaction is one
   * uninterrupted turn of the database. A throwing body rolls back and the error is rethrown.
   */
  transaction<T>(body: (tx: SqliteTransaction) => T): Promise<T>;
  /**
   * Runs one read-only statement for `storage.query()` (the door pages reach), deciding before it changes
   * anything: a statement that would write or change the connection (a PRAGMA that sets something,
   * transaction control, ATTACH, several statements) rejects with `QueryNotReadOnly`, one SQLite cannot
   * prepare or run with `QueryFailed`, one past `limits` with `QueryLimitExceeded` (docs/decisions/0020).
   * Optional: without it `storage.query()` falls back to a stricter text check plus `PRAGMA query_only`.
   */
  query?(sql: string, params: SqlValue[], limits: QueryLimits): Promise<SqlRow[]>;
  /**
   * On a read-only database: runs `body` in one transaction that writes only the connection's TEMP schema (in memory,
   * gone at close; the file is not touched) — what a read-only open keeps beside the file (decision 0088: the task
   * rows behind its log). The body's statements name `temp.` objects only. Optional: without it such a file is
   * refused (`TasksBehindLog`).
   */
  temporary?<T>(body: (tx: SqliteTransaction) => T): Promise<T>;
  /** True when the database refuses writes (opened read-only). */
  readonly readOnly: boolean;
  /**
   * True when the database also holds another app's tables (a Durable Object's SQLite, with the app's tables
   * and its `ctx.storage.put()` KV): the harness creates its schema beside them and never takes them for
   * damage. Absent: the file is the harness's alone, and tables that are not ours make it foreign.
   */
  readonly shared?: boolean;
  /** The most bytes one row holds, where the platform limits it (a Durable Object: 2 MB). */
  readonly maxRowBytes?: number;
  /**
   * Holds back the automatic WAL checkpoint until the returned release is called (decision 0033). Optional:
   * a database without a write-ahead log of its own (memory, a Durable Object's) has nothing to hold.
   */
  holdCheckpoints?(): () => void;
  /** The bytes of the whole database (for copies, downloads and crash simulation). */
  exportImage(): Promise<Uint8Array>;
  close(): Promise<void>;
}

/** Synchronous statements inside one transaction. */
export interface SqliteTransaction {
  run(sql: string, ...params: SqlValue[]): number;
  get(sql: string, ...params: SqlValue[]): SqlRow | undefined;
  all(sql: string, ...params: SqlValue[]): SqlRow[];
  /**
   * Hands each row of one statement to `onRow` as it is stepped, keeping none (decision 0084: a snapshot read a row at
   * a time inside its one transaction). Optional: without it the caller reads them with `all`.
   */
  each?(sql: string, onRow: (row: SqlRow) => void): void;
  /**
   * Optional (decision 0056): a count that moves whenever any statement writes a row of the database, on a
   * connection that is its file's only writer (SQLite's `sqlite3_total_changes`, on a private in-memory database or
   * an exclusively locked file): equal counts mean nothing was written in between. A connection that cannot promise
   * that (another may write the file) leaves it out, and the fenced log then reads its head for each check.
   */
  writes?(): number;
}
