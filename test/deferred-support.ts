/** Decision 0081's tests' fixtures: SQLite storages that defer fenced steps' task rows, crashed as a process is. */

import type { DeferTaskRows } from "../src/storage/sqlite/deferred.ts";
import { openSqliteStorage } from "../src/storage/sqlite/open-storage.ts";
import { TASKS_BEHIND_LOG } from "../src/storage/sqlite/schema.ts";
import type { SqliteStorage } from "../src/storage/sqlite/storage.ts";
import type { Storage } from "../src/storage/storage.ts";
import type { SweepBackend } from "../src/testing/index.ts";

/** The seed's own query (S11), unchanged. */
export const SEED_QUERY =
  "SELECT id, status, record ->> '$.state.checkpoint.n' AS n, record ->> '$.memos' AS memos, record ->> '$.restarts' AS restarts FROM tasks";

/**
 * The storage, except that its image is the database's own (what the disk holds at a crash: the waiting rows are
 * lost with the process), not the storage's (which writes them first, as a copy should).
 */
export function crashImages(
  storage: SqliteStorage,
  seen?: { behind: number; images: number },
  onBehind?: (image: Uint8Array) => Promise<void>,
): Storage {
  return new Proxy(storage, {
    get(target, key) {
      if (key === "exportImage")
        return async () => {
          const behind = (await target.database.get("SELECT 1 FROM pi_durable_meta WHERE key = ?", TASKS_BEHIND_LOG)) !== undefined;
          const image = await target.database.exportImage();
          if (seen) {
            seen.images++;
            if (behind) seen.behind++;
          }
          if (behind) await onBehind?.(image);
          return image;
        };
      const value = Reflect.get(target, key, target) as unknown;
      return typeof value === "function" ? value.bind(target) : value;
    },
  });
}

/**
 * A sweep backend on SQLite in memory with deferring on, crashed through the database's image; `seen` counts the
 * images taken and those taken while task rows waited (the crashes that need the replay), each of which `onBehind`
 * gets.
 */
export function deferringBackend(
  deferTaskRows: DeferTaskRows = true,
  onBehind?: (image: Uint8Array) => Promise<void>,
): SweepBackend & { seen: { behind: number; images: number } } {
  const seen = { behind: 0, images: 0 };
  return {
    seen,
    create: async () => crashImages(await openSqliteStorage({ vfs: "memory", deferTaskRows }), seen, onBehind),
    fromImage: async (image) => crashImages(await openSqliteStorage({ vfs: "memory", image, deferTaskRows }), seen, onBehind),
  };
}
