/** Opening, storage and read-only SQL: what a database, its lock and its quota can refuse. */
import { DurableError } from "./base.ts";

/** A write, `resume()`, `submit()` or task creation on a harness opened with `readOnly: true`. */
export class ReadOnlySession extends DurableError {
  override name = "ReadOnlySession";
  constructor(what: string) {
    super(`${what} is not allowed: this harness was opened read-only. Open it without readOnly to change it.`);
  }
}

/** Any call on a harness (or storage) after `close()`. */
export class HarnessClosed extends DurableError {
  override name = "HarnessClosed";
  constructor(what = "Harness") {
    super(`${what} is closed. Open a new one on the same storage to continue.`);
  }
}

/** A bad `HarnessOptions` / `settings` value, rejected at open before anything is read or written. */
export class InvalidSetting extends DurableError {
  override name = "InvalidSetting";
}

/** The database was written by a newer version of pi-durable-web. Nothing was changed. */
export class SchemaTooNew extends DurableError {
  override name = "SchemaTooNew";
  constructor(
    readonly found: number,
    readonly supported: number,
  ) {
    super(
      `The database has schema version ${found}, but this pi-durable-web supports at most ${supported}. ` +
        `Upgrade pi-durable-web to open it; the database was left unmodified.`,
    );
  }
}

/**
 * The file's task rows are behind its fenced log (decision 0081: a crash while a fenced step's task row waited in
 * memory). A writable open brings them up to date from the log, a read-only one reads through the log in memory
 * (decision 0088); only a read-only database that cannot hold that overlay (no `SqliteDatabase.temporary`) is refused
 * with this. Nothing was changed.
 */
export class TasksBehindLog extends DurableError {
  override name = "TasksBehindLog";
  constructor(
    readonly label: string,
    readonly through: number,
  ) {
    super(
      `${label}: its task rows are complete only through log position ${through} (the rest is in its log, after a crash). ` +
        "Open it writable once (it brings them up to date), then read-only; it was left unmodified.",
    );
  }
}

/** The bytes are not a SQLite database, or the database failed its integrity check. Nothing was changed. */
export class DatabaseCorrupt extends DurableError {
  override name = "DatabaseCorrupt";
}

/** The storage quota of the origin (or disk) is exhausted; the failed commit left no trace. */
export class StorageQuotaExceeded extends DurableError {
  override name = "StorageQuotaExceeded";
}

/** Another owner (for example another tab) holds the database. */
export class DatabaseLocked extends DurableError {
  override name = "DatabaseLocked";
}

/**
 * A statement passed to `storage.query()` would write, or change the connection (a PRAGMA that sets
 * something, transaction control, ATTACH), or is more than one statement. It was not run, and nothing changed.
 */
export class QueryNotReadOnly extends DurableError {
  override name = "QueryNotReadOnly";
  constructor(sql: string, why = "this statement would write or change the connection") {
    super(`storage.query() runs one read-only statement only; ${why}: ${sql.slice(0, 120)}`);
  }
}

/** SQLite could not prepare or run a `storage.query()` statement (a typo, an unknown column, a statement too long). Nothing changed. */
export class QueryFailed extends DurableError {
  override name = "QueryFailed";
  constructor(sqliteMessage: string, options?: { cause?: unknown }) {
    super(`storage.query() failed: ${sqliteMessage}. Fix the statement and run it again; nothing was changed.`, options);
  }
}

/** A `storage.query()` statement returned or cost more than its limit (`queryLimits`); it was stopped, nothing changed. */
export class QueryLimitExceeded extends DurableError {
  override name = "QueryLimitExceeded";
  constructor(
    readonly limit: "maxRows" | "maxBytes" | "maxSteps",
    readonly value: number,
  ) {
    const what = { maxRows: `more than ${value} rows`, maxBytes: `more than ${value} bytes`, maxSteps: `more than ${value} SQLite steps` }[
      limit
    ];
    super(
      `storage.query() stopped the statement: it would return or take ${what} (queryLimits.${limit}). Add a LIMIT or a ` +
        `narrower WHERE, or raise queryLimits.${limit} where the storage is opened.`,
    );
  }
}

/** The environment cannot host the requested database (for example opfs-sahpool outside a dedicated Web Worker). */
export class StorageUnavailable extends DurableError {
  override name = "StorageUnavailable";
}

/** A Durable Object cannot hand out its database file as bytes (`exportImage()`). */
export class ImageUnavailable extends DurableError {
  override name = "ImageUnavailable";
  constructor() {
    super(
      "A Durable Object's SQLite database cannot be exported as a file image. Read it with storage.query() (or " +
        "copy rows out through the harness) instead.",
    );
  }
}
