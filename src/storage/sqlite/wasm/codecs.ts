import type { Sqlite3Static } from "@sqlite.org/sqlite-wasm";
import type { SqlRow, SqlValue } from "../database.ts";
import {
  type RawApi,
  SQLITE_BLOB,
  SQLITE_FLOAT,
  SQLITE_INTEGER,
  SQLITE_STMTSTATUS_REPREPARE,
  SQLITE_TEXT,
  type WrappedApi,
} from "./capi.ts";

// The codecs between JavaScript values and SQLite's: binding parameters and reading result rows, straight
// on the wasm heap.

/** Texts up to this many UTF-16 units are encoded straight into the wasm heap (see `utf8Copy`). */
const DIRECT_ENCODE_MAX_CHARS = 64 * 1024;
const utf8Encoder = new TextEncoder();
const utf8Decoder = new TextDecoder();

/** A prepared statement, with its result column names (refreshed when SQLite re-prepares it). */
export interface Statement {
  readonly pointer: number;
  readonly parameters: number;
  names: string[] | undefined;
  reprepares: number;
}

export class Codecs {
  readonly #sqlite3: Sqlite3Static;
  readonly #c: RawApi;
  readonly #capi: WrappedApi;

  constructor(sqlite3: Sqlite3Static) {
    this.#sqlite3 = sqlite3;
    this.#c = sqlite3.wasm.exports as RawApi;
    this.#capi = sqlite3.capi as unknown as WrappedApi;
  }

  /** Binds `value` to parameter `index`; returns SQLite's result code. Values SQLite has no type for throw. */
  bind(statement: number, index: number, value: SqlValue | undefined | boolean): number {
    const c = this.#c;
    if (value === null || value === undefined) return c.sqlite3_bind_null(statement, index);
    if (typeof value === "number") {
      if ((value | 0) === value) return c.sqlite3_bind_int(statement, index, value);
      if (Number.isSafeInteger(value)) return c.sqlite3_bind_int64(statement, index, BigInt(value));
      return c.sqlite3_bind_double(statement, index, value);
    }
    if (typeof value === "string") {
      // SQLITE_WASM_DEALLOC frees the copy when SQLite is done with it (also when the bind fails).
      const [pointer, bytes] = this.utf8Copy(value);
      return c.sqlite3_bind_text(statement, index, pointer, bytes, this.#capi.SQLITE_WASM_DEALLOC);
    }
    if (typeof value === "bigint") {
      // The wasm boundary would wrap an out-of-range BigInt modulo 2^64 without a word.
      if (BigInt.asIntN(64, value) !== value) throw new RangeError(`Parameter ${index} (${value}) does not fit in a 64-bit integer.`);
      return c.sqlite3_bind_int64(statement, index, value);
    }
    if (value instanceof Uint8Array) {
      if (value.byteLength === 0) return c.sqlite3_bind_zeroblob(statement, index, 0); // an empty allocation would bind NULL instead
      const pointer = this.#sqlite3.wasm.allocFromTypedArray(value);
      return c.sqlite3_bind_blob(statement, index, pointer, value.byteLength, this.#capi.SQLITE_WASM_DEALLOC);
    }
    if (typeof value === "boolean") return c.sqlite3_bind_int(statement, index, value ? 1 : 0);
    throw new TypeError(
      `Cannot bind a ${typeof value} to parameter ${index}; pass null, a number, string, bigint or Uint8Array (JSON.stringify objects).`,
    );
  }

  /**
   * A NUL-terminated UTF-8 copy of `text` in the wasm heap, as `[pointer, bytes]` (bytes without the NUL).
   * Encoded straight into the heap: the library's `allocCString` encodes into a fresh array and copies it, and
   * that was the largest single cost of recovering 10,000 running tasks (two records written per task).
   * Sized for the worst case (3 bytes per UTF-16 unit); long texts take the exact-size path instead, so a
   * large document never grows the wasm memory (which cannot shrink) by three times its size.
   */
  utf8Copy(text: string): [number, number] {
    const { wasm } = this.#sqlite3;
    if (text.length > DIRECT_ENCODE_MAX_CHARS) return wasm.allocCString(text, true) as [number, number];
    const capacity = text.length * 3 + 1;
    const pointer = wasm.alloc(capacity) as number;
    const heap = wasm.heap8u();
    const { written } = utf8Encoder.encodeInto(text, heap.subarray(pointer, pointer + capacity - 1));
    heap[pointer + written] = 0;
    return [pointer, written];
  }

  /** The current result row of `statement`, keyed by column name. */
  row(statement: Statement): SqlRow {
    const c = this.#c;
    const pointer = statement.pointer;
    // Column names can change only when SQLite re-prepares the statement (schema change under SELECT *).
    const reprepares = c.sqlite3_stmt_status(pointer, SQLITE_STMTSTATUS_REPREPARE, 0);
    let names = statement.names;
    if (names === undefined || reprepares !== statement.reprepares) {
      const count = c.sqlite3_column_count(pointer);
      names = [];
      for (let index = 0; index < count; index += 1) names.push(this.#capi.sqlite3_column_name(pointer, index));
      statement.names = names;
      statement.reprepares = reprepares;
    }
    const row: SqlRow = {};
    for (let index = 0; index < names.length; index += 1) row[names[index]!] = this.#column(pointer, index);
    return row;
  }

  #column(statement: number, index: number): SqlValue {
    const c = this.#c;
    switch (c.sqlite3_column_type(statement, index)) {
      case SQLITE_INTEGER: {
        // A double holds every integer up to 2^53 exactly and is far cheaper than a BigInt round trip.
        const value = c.sqlite3_column_double(statement, index);
        return Number.isSafeInteger(value) ? value : c.sqlite3_column_int64(statement, index);
      }
      case SQLITE_FLOAT:
        return c.sqlite3_column_double(statement, index);
      case SQLITE_TEXT: {
        // Decoded straight from the wasm heap with the length SQLite knows (the library's wrapper scans for
        // the terminating NUL first). column_text must come before column_bytes (SQLite's rule).
        const pointer = c.sqlite3_column_text(statement, index);
        const bytes = c.sqlite3_column_bytes(statement, index);
        return bytes === 0 ? "" : utf8Decoder.decode(this.#sqlite3.wasm.heap8u().subarray(pointer, pointer + bytes));
      }
      case SQLITE_BLOB: {
        const bytes = c.sqlite3_column_bytes(statement, index);
        const pointer = c.sqlite3_column_blob(statement, index);
        return bytes === 0 ? new Uint8Array(0) : this.#sqlite3.wasm.heap8u().slice(pointer, pointer + bytes);
      }
      default:
        return null;
    }
  }
}
