/**
 * The `@sqlite.org/sqlite-wasm` (3.54.1, pinned) adapter behind the `SqliteDatabase` facade.
 *
 * Two backends:
 * - `"memory"`: a fresh database, or one made from the bytes of `exportImage()` (crash simulation in Node
 *   tests, copies). Works in Node and in the browser.
 * - `"opfs-sahpool"`: the durable browser store, a file in the library's OPFS "SyncAccessHandle pool".
 *   Works only in a dedicated Web Worker (sync access handles do not exist anywhere else).
 *
 * ```ts
 * const db = await openSqliteDatabase({ vfs: "opfs-sahpool" }); // in the worker
 * await db.transaction((tx) => tx.run("INSERT INTO log(line) VALUES (?)", "hello"));
 * const rows = await db.all("SELECT line FROM log");
 * ```
 *
 * Statements go to the C API directly rather than through the library's `oo1.Stmt`:
 * the oo1 statement methods log a console warning for every failed step, re-read column names on every
 * row and validate each argument several times, and a kernel commit runs through here on the hot path.
 *
 * The parts (`wasm/`): `module.ts` (the one instance per context, the library's logger), `open.ts` (the two
 * open paths), `pool.ts` (the OPFS pool: its lock and retry loop), `capi.ts` (the hand-typed C API),
 * `connection.ts` (the queued connection, its statement cache and codecs), `errors.ts` (SQLite's errors as
 * the library's classes), `event-loop.ts` (the yield that keeps a busy worker responsive).
 */
export { loadSqlite, sqliteVersion } from "./wasm/module.ts";
export { DEFAULT_DATABASE_PATH, type OpenSqliteOptions, openSqliteDatabase } from "./wasm/open.ts";
export { installSahPool } from "./wasm/pool.ts";
