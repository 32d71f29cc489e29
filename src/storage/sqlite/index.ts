export type { SqliteDatabase, SqliteTransaction, SqlRow, SqlValue } from "./database.ts";
export type { DeferTaskRows } from "./deferred.ts";
export { openSqliteStorage } from "./open-storage.ts";
export { DEFAULT_QUERY_LIMITS, type QueryLimits } from "./query-rules.ts";
export { SCHEMA_VERSION } from "./schema.ts";
export { SqliteStorage, type SqliteStorageOptions } from "./storage.ts";
export { DEFAULT_DATABASE_PATH, installSahPool, type OpenSqliteOptions, openSqliteDatabase, sqliteVersion } from "./wasm.ts";
