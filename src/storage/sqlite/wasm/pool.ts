import type { SAHPoolUtil, Sqlite3Static } from "@sqlite.org/sqlite-wasm";
import { SerialQueue } from "../../../base/serial.ts";
import { DatabaseLocked, StorageUnavailable } from "../../../errors.ts";
import { describe, isHandleContention } from "./errors.ts";
import { loadSqlite, whileAcquiringPool } from "./module.ts";

// The OPFS pool ("SyncAccessHandle pool"): acquired with a bounded retry, shared by the connections of this
// context, paused (its handles released) when the last one closes.

export const DEFAULT_MAX_WAIT_MS = 15_000;
/** Capacity of a new pool. Each database needs two slots (file + WAL); the library default is 6. */
const POOL_CAPACITY = 16;

export interface PoolState {
  readonly name: string;
  readonly directory: string;
  util: SAHPoolUtil;
  /** Open connections using the pool; the pool is paused (handles released) when it drops to 0. */
  users: number;
}

const pools = new Map<string, PoolState>();
/**
 * Acquiring, unpausing and pausing a pool must never overlap: a failed `unpauseVfs()` releases every handle
 * of the pool, including those a concurrent successful acquisition just took.
 */
const poolLock = new SerialQueue();

/**
 * Installs (or resumes) the OPFS pool and returns the library's pool utility — for inspectors and tests
 * that need the raw file bytes (`exportFile`, `importDb`, `getFileNames`). Closing the last database opened
 * with `openSqliteDatabase` pauses the pool, which invalidates this object until the next call.
 */
export async function installSahPool(options: { poolDirectory?: string; maxWaitMs?: number } = {}): Promise<SAHPoolUtil> {
  const sqlite3 = await loadSqlite();
  const pool = await poolLock.run(() => acquirePool(sqlite3, options.poolDirectory, options.maxWaitMs ?? DEFAULT_MAX_WAIT_MS));
  return pool.util;
}

/** The pool for a new connection (counted as one more user). */
export function retainPool(sqlite3: Sqlite3Static, directory: string | undefined, maxWaitMs: number): Promise<PoolState> {
  return poolLock.run(async () => {
    const pool = await acquirePool(sqlite3, directory, maxWaitMs);
    pool.users += 1;
    return pool;
  });
}

/** Gives a connection's use of the pool back; the last one pauses it. */
export function releasePool(pool: PoolState): Promise<void> {
  return poolLock.run(async () => {
    pool.users -= 1;
    if (pool.users > 0) return;
    try {
      // Releasing the handles lets another tab (or the next owner after a "take over") open the pool
      // without waiting for this worker to die.
      pool.util.pauseVfs();
    } catch {
      // Files opened outside this adapter are still open; keep the pool running for them.
    }
  });
}

/**
 * Installs the pool with a bounded retry. The handles of a reloaded page's worker are released
 * asynchronously (measured: usually before the new worker asks, once ~300 ms later, and indefinitely
 * while a second tab holds them), so `NoModificationAllowedError` is retried with backoff until
 * `maxWaitMs`. `preserveOnInitFailure` is essential: the library's default answers a failed install by
 * deleting the whole pool directory, which loses every database when the other holder lets go mid-way.
 */
function acquirePool(sqlite3: Sqlite3Static, directory: string | undefined, maxWaitMs: number): Promise<PoolState> {
  const name = directory === undefined ? "opfs-sahpool" : `opfs-sahpool-${directory.replace(/[^A-Za-z0-9_-]/g, "_")}`;
  const started = performance.now();
  let delay = 25;
  return whileAcquiringPool(async () => {
    for (let attempt = 1; ; attempt += 1) {
      try {
        const util = await sqlite3.installOpfsSAHPoolVfs({
          name,
          directory,
          initialCapacity: POOL_CAPACITY,
          preserveOnInitFailure: true,
          // Without it the library returns its cached failed promise forever. (Missing from 3.54.1's types.)
          forceReinitIfPreviouslyFailed: attempt > 1,
        } as Parameters<Sqlite3Static["installOpfsSAHPoolVfs"]>[0]);
        if (util.isPaused()) await util.unpauseVfs();
        let pool = pools.get(name);
        if (!pool) {
          pool = { name, directory: directory ?? ".opfs-sahpool", util, users: 0 };
          pools.set(name, pool);
        }
        pool.util = util;
        return pool;
      } catch (error) {
        if (!isHandleContention(error)) {
          throw new StorageUnavailable(
            `The OPFS pool cannot be opened here (${describe(error)}). opfs-sahpool needs a dedicated Web Worker in a ` +
              `browser with OPFS sync access handles; use vfs "memory" elsewhere.`,
            { cause: error },
          );
        }
        const waited = performance.now() - started;
        if (waited + delay > maxWaitMs) {
          throw new DatabaseLocked(
            `The OPFS pool "${directory ?? ".opfs-sahpool"}" is held by another tab or by a worker that is still shutting ` +
              `down (waited ${Math.round(waited)} ms over ${attempt} attempts). Close the other tab, or reload this one.`,
            { cause: error },
          );
        }
        await new Promise((resolve) => setTimeout(resolve, delay));
        delay = Math.min(delay * 2, 500);
      }
    }
  });
}
