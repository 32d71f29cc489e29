export type { SqliteDatabase, SqliteTransaction, SqlRow, SqlValue } from "./database.ts";
export { openSqliteStorage } from "./open-storage.ts";
export { SCHEMA_VERSION } from "./schema.ts";
export { SqliteStorage } from "./storage.ts";
export { DEFAULT_DATABASE_PATH, installSahPool, type OpenSqliteOptions, openSqliteDatabase, sqliteVersion } from "./wasm.ts";
