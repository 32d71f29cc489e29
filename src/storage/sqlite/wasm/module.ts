import sqlite3InitModule, { type Sqlite3Static } from "@sqlite.org/sqlite-wasm";
import { isHandleContention, isNamedError } from "./errors.ts";

// The shared module: one sqlite-wasm instance per JS context, and the library's logger intercepted.

let modulePromise: Promise<Sqlite3Static> | undefined;

/**
 * The last error the OPFS pool reported through the library's logger. The pool turns a JS exception in a
 * write (for example Chromium's `QuotaExceededError`) into a bare `SQLITE_IOERR`; the logger is the only
 * place the original exception is still visible, so the error translation looks here to recognise a full quota.
 */
let lastVfsError: { name: string; message: string } | undefined;
/** While > 0, the pool is being (re)acquired and its lock-contention errors are expected: do not log them. */
let acquiringPools = 0;

/**
 * The one sqlite-wasm instance of this JS context, initialised on first use. A second `sqlite3InitModule()`
 * would create a second wasm instance with its own VFS registry, and two pools in one context fight over
 * the same access handles — so everything (including tests) must go through this.
 */
export function loadSqlite(): Promise<Sqlite3Static> {
  modulePromise ??= initModule().catch((error: unknown) => {
    modulePromise = undefined; // a failed wasm fetch may succeed on the next call
    throw error;
  });
  return modulePromise;
}

/** The SQLite library version, e.g. `"3.54.1"`. */
export async function sqliteVersion(): Promise<string> {
  return (await loadSqlite()).version.libVersion;
}

/** The name of the last error the VFS logged since `forgetVfsError()` (a full quota shows only there). */
export function lastVfsErrorName(): string | undefined {
  return lastVfsError?.name;
}

/** Called before each database operation, so an error logged by an earlier one is not taken for its own. */
export function forgetVfsError(): void {
  lastVfsError = undefined;
}

/** Runs `work` while the pool's lock-contention errors are expected (they are retried, not logged). */
export async function whileAcquiringPool<T>(work: () => Promise<T>): Promise<T> {
  acquiringPools += 1;
  try {
    return await work();
  } finally {
    acquiringPools -= 1;
  }
}

function initModule(): Promise<Sqlite3Static> {
  const global = globalThis as { sqlite3ApiConfig?: Record<string, unknown> };
  // Read once by the library's bootstrap, then deleted by it.
  global.sqlite3ApiConfig = {
    ...global.sqlite3ApiConfig,
    error: (...args: unknown[]) => {
      const error = args.find(isNamedError);
      if (error) lastVfsError = { name: error.name, message: String(error.message) };
      if (acquiringPools > 0 && error && isHandleContention(error)) return;
      console.error(...args);
    },
    // We only use opfs-sahpool. With COOP/COEP headers the plain "opfs" VFSes would otherwise install
    // themselves and spawn an async-proxy worker (~50-100 ms) for nothing.
    disable: { vfs: { opfs: true, "opfs-wl": true } },
  };
  return sqlite3InitModule();
}
