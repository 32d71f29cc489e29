import { DatabaseCorrupt, DatabaseLocked, ReadOnlySession, StorageQuotaExceeded } from "../../../errors.ts";
import { SQLITE_BUSY, SQLITE_CORRUPT, SQLITE_FULL, SQLITE_IOERR, SQLITE_NOTADB, SQLITE_READONLY } from "./capi.ts";

/** What the translation needs to know of the database the error came from. */
export interface ErrorSource {
  /** Names the database in messages ("the database … in the OPFS pool …"). */
  readonly label: string;
  readonly readOnly: boolean;
  /** The name of the error the VFS logged during the operation, if any (see `lastVfsErrorName`). */
  readonly vfsError: string | undefined;
}

/**
 * A failed SQLite call as one of the library's error classes where one applies: a full quota, a damaged file,
 * a second connection, a write to a read-only database. Anything else stays the `SQLite3Error` it was.
 */
export function translateSqliteError(rc: number, error: Error, source: ErrorSource): Error {
  const primary = rc & 0xff;
  const quota = source.vfsError === "QuotaExceededError";
  if (primary === SQLITE_FULL || (primary === SQLITE_IOERR && quota)) {
    return new StorageQuotaExceeded(
      `The storage quota for this site is exhausted, so the write to ${source.label} failed and was rolled back. ` +
        `Free some space (delete old data, or ask the browser for persistent storage), then retry.`,
      { cause: error },
    );
  }
  if (primary === SQLITE_CORRUPT || primary === SQLITE_NOTADB) {
    return new DatabaseCorrupt(
      `${capitalize(source.label)} is damaged or is not a SQLite database (${error.message}). It was left exactly ` +
        `as found; export it for inspection, or open a different database to start over.`,
      { cause: error },
    );
  }
  if (primary === SQLITE_BUSY) {
    // The pool's files belong to this worker alone, so only a second connection here can hold the lock.
    return new DatabaseLocked(
      `${capitalize(source.label)} is already open in this worker (${error.message}). Close the other connection first.`,
      {
        cause: error,
      },
    );
  }
  if (primary === SQLITE_READONLY && source.readOnly) {
    return Object.assign(new ReadOnlySession("Writing to the database"), { cause: error });
  }
  return error;
}

/** The message of a database that failed `PRAGMA quick_check`. */
export function integrityFailure(label: string, problems: string[]): DatabaseCorrupt {
  return new DatabaseCorrupt(
    `${capitalize(label)} failed its integrity check (PRAGMA quick_check: ${problems.slice(0, 3).join("; ")}` +
      `${problems.length > 3 ? `; … ${problems.length - 3} more` : ""}). It was left exactly as found; export it for ` +
      `inspection, or open a different database to start over.`,
  );
}

export function isNamedError(value: unknown): value is { name: string; message: unknown } {
  return typeof value === "object" && value !== null && typeof (value as { name?: unknown }).name === "string" && "message" in value;
}

/** Another context holds the pool's sync access handles (Chromium's wording varies by path). */
export function isHandleContention(error: unknown): boolean {
  if (!isNamedError(error)) return false;
  return error.name === "NoModificationAllowedError" || /Access Handles cannot be created/i.test(String(error.message));
}

export function describe(error: unknown): string {
  return isNamedError(error) ? `${error.name}: ${String(error.message)}` : String(error);
}

function capitalize(text: string): string {
  return text.charAt(0).toUpperCase() + text.slice(1);
}
