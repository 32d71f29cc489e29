export { openSqliteStorage } from "./open-storage.ts";
export { openSqliteDatabase, installSahPool, sqliteVersion, DEFAULT_DATABASE_PATH, type OpenSqliteOptions } from "./wasm.ts";
export { SqliteStorage } from "./storage.ts";
export { SCHEMA_VERSION } from "./schema.ts";
export type { SqliteDatabase, SqliteTransaction, SqlRow, SqlValue } from "./database.ts";
