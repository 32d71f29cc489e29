/**
 * The C functions we call straight on the wasm exports: numbers in, numbers out, no argument adapters. Two
 * reasons beyond speed: 3.54.1's `capi.sqlite3_bind_null` wrapper is declared void (returns undefined,
 * hiding errors) and its `capi.sqlite3_bind_text` throws a ReferenceError when given a JS string.
 * Pointers are plain numbers in this 32-bit build; i64 parameters and results are BigInts.
 */
export interface RawApi {
  sqlite3_prepare_v3(db: number, sql: number, bytes: number, flags: number, ppStmt: number, pzTail: number): number;
  sqlite3_finalize(stmt: number): number;
  sqlite3_stmt_readonly(stmt: number): number;
  sqlite3_step(stmt: number): number;
  sqlite3_reset(stmt: number): number;
  sqlite3_clear_bindings(stmt: number): number;
  sqlite3_changes(db: number): number;
  sqlite3_total_changes(db: number): number;
  sqlite3_get_autocommit(db: number): number;
  sqlite3_bind_parameter_count(stmt: number): number;
  sqlite3_bind_null(stmt: number, index: number): number;
  sqlite3_bind_int(stmt: number, index: number, value: number): number;
  sqlite3_bind_int64(stmt: number, index: number, value: bigint): number;
  sqlite3_bind_double(stmt: number, index: number, value: number): number;
  sqlite3_bind_text(stmt: number, index: number, pointer: number, bytes: number, destructor: number): number;
  sqlite3_bind_blob(stmt: number, index: number, pointer: number, bytes: number, destructor: number): number;
  sqlite3_bind_zeroblob(stmt: number, index: number, bytes: number): number;
  sqlite3_column_count(stmt: number): number;
  sqlite3_column_type(stmt: number, index: number): number;
  sqlite3_column_double(stmt: number, index: number): number;
  sqlite3_column_int64(stmt: number, index: number): bigint;
  sqlite3_column_blob(stmt: number, index: number): number;
  /** The raw export: a pointer to the value as UTF-8 (the library's wrapper of the same name returns a JS string). */
  sqlite3_column_text(stmt: number, index: number): number;
  sqlite3_column_bytes(stmt: number, index: number): number;
  sqlite3_stmt_status(stmt: number, op: number, reset: number): number;
}

/** The library wrappers we keep: they convert C strings, or wrap variadic C functions. */
export interface WrappedApi {
  sqlite3_errmsg(db: number): string;
  sqlite3_js_rc_str(rc: number): string | undefined;
  sqlite3_column_name(stmt: number, index: number): string;
  sqlite3_db_config(db: number, op: number, onoff: number, pOut: number): number;
  sqlite3_js_db_export(db: number): Uint8Array;
  SQLITE_WASM_DEALLOC: number;
}

export const SQLITE_ROW = 100;
export const SQLITE_DONE = 101;
export const SQLITE_INTEGER = 1;
export const SQLITE_FLOAT = 2;
export const SQLITE_TEXT = 3;
export const SQLITE_BLOB = 4;
export const SQLITE_BUSY = 5;
export const SQLITE_READONLY = 8;
export const SQLITE_IOERR = 10;
export const SQLITE_CORRUPT = 11;
export const SQLITE_FULL = 13;
export const SQLITE_NOTADB = 26;
export const SQLITE_INTERRUPT = 9;
export const SQLITE_AUTH = 23;
export const SQLITE_PREPARE_PERSISTENT = 1;
export const SQLITE_STMTSTATUS_REPREPARE = 5;
export const SQLITE_DBCONFIG_NO_CKPT_ON_CLOSE = 1010;

/**
 * Marks a database image in `bytes` (its header at `offset`) as a rollback-journal file if it is a WAL one
 * (header bytes 18 and 19 are 2): a WAL-flagged file without its WAL cannot be opened in memory
 * (SQLITE_CANTOPEN), and a serialized image holds every committed page, so rollback mode is exact.
 */
export function asRollbackImage(bytes: Uint8Array, offset = 0): void {
  if (bytes[offset + 18] === 2 && bytes[offset + 19] === 2) bytes.fill(1, offset + 18, offset + 20);
}
