/**
 * The test hooks of the e2e page. The worker exposes `WorkerApi` over comlink; the page puts a wrapped
 * handle on `window.e2e`, and the Playwright tests reach it with `page.evaluate`. Only plain data crosses.
 */
export interface OpenInfo {
  /** Time inside the worker for `openSqliteDatabase` (module init, pool install with retries, checks). */
  openMs: number;
  journalMode: string;
  lockingMode: string;
}

export interface OpenOptions {
  path?: string;
  readOnly?: boolean;
  maxWaitMs?: number;
}

export interface WorkerApi {
  /** Opens the database (creating table `rows` unless read-only). */
  open(options?: OpenOptions): Promise<OpenInfo>;
  /** Commits `count` rows, one transaction each; resolves after the last commit. Returns the last id. */
  insert(count: number, payloadBytes?: number): Promise<number>;
  /** Keeps committing one row per transaction until the page dies. */
  startWriting(): void;
  /** How many rows the writing loop has committed so far (each counted after its COMMIT returned). */
  written(): number;
  /** Row count, min/max id, and how many rows carry uncommitted text. */
  stats(): Promise<{ count: number; minId: number | null; maxId: number | null; uncommitted: number }>;
  integrityCheck(): Promise<string[]>;
  /** Holds the automatic WAL checkpoint (decision 0033) until `releaseCheckpoints()`. */
  holdCheckpoints(): void;
  releaseCheckpoints(): void;
  /** Frames in the write-ahead log now (`PRAGMA wal_checkpoint(PASSIVE)`'s log column; it also checkpoints). */
  walFrames(): Promise<number>;
  /**
   * BEGIN, then rewrite every row and add `extraRows` under `PRAGMA cache_size = 2` (so pages spill into
   * the WAL file before any commit), and return with the transaction still open.
   */
  holdOpenTransaction(extraRows: number): Promise<void>;
  /** Exports the image, opens it in memory and counts the rows there (proves the export is consistent). */
  exportAndCount(): Promise<{ bytes: number; count: number; header: string }>;
  close(): Promise<void>;
  /** The pool's file names (the pool is resumed if a close paused it). */
  poolFiles(): Promise<string[]>;
  /** SHA-256 (hex) and size of a file in the pool, read with the pool's exportFile. */
  poolFileDigest(path: string): Promise<{ size: number; sha256: string }>;
  /**
   * Damages the (closed) database: keeps the 100-byte SQLite header, overwrites the rest of page 1 (the
   * schema b-tree) and page 2 with garbage, and writes it back with the pool's importDb.
   */
  damage(path: string): Promise<{ size: number; sha256: string }>;
  /**
   * Runs the storage conformance cases (src/testing/storage-conformance.ts) on SqliteStorage over OPFS, each
   * case on a fresh database file; copies open in memory. Returns each case's name and error, if any.
   */
  conformance(): Promise<Array<{ name: string; error?: string }>>;
  /**
   * Decision 0088 on OPFS: a storage at `path` (deferring, as on opfs-sahpool by default) takes a task and `steps` fenced
   * steps, and its connection closes without writing what waited (the crash's file: the mark and the log). Then the file
   * is opened read-only: each task's checkpoint `n` and the mark as it reads them, and the file's digest before and after.
   */
  readOnlyBehindLog(
    path: string,
    steps: number,
  ): Promise<{ mark: string | null; seen: Array<{ id: number; n: number }>; before: string; after: string }>;
}

export interface E2eWindow {
  e2e: {
    api: import("comlink").Remote<WorkerApi>;
    /** worker.terminate() (no cleanup runs in the worker), then a fresh worker. */
    restartWorker(): void;
  };
}

declare global {
  interface Window extends E2eWindow {}
}
