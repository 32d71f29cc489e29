import type { Sqlite3Static } from "@sqlite.org/sqlite-wasm";
import type { SqlRow, SqlValue } from "../database.ts";
import {
  type RawApi,
  SQLITE_BLOB,
  SQLITE_FLOAT,
  SQLITE_INTEGER,
  SQLITE_ROW,
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

/** A bind that SQLite refused with result code `rc` (the statement cache turns it into the connection's error). */
export class BindFailed extends Error {
  override readonly name = "BindFailed";
  constructor(readonly rc: number) {
    super(`SQLite refused a parameter (result code ${rc}); the statement's other parameters were cleared.`);
  }
}

/** A prepared statement, with its result column names (refreshed when SQLite re-prepares it). */
export interface Statement {
  readonly pointer: number;
  readonly parameters: number;
  names: string[] | undefined;
  reprepares: number;
  /** The block its texts are bound from (`bindTexts`, `SQLITE_STATIC`), freed when it is reset; 0 when none. */
  block: number;
}

/** The most UTF-16 units of text one statement binds from one block (`bindTexts`); more go text by text. */
const BLOCK_MAX_CHARS = 64 * 1024;

/** `each`'s staging buffer (decision 0085): the most bytes of text decoded at once. */
const STAGE_BYTES = 256 * 1024;
/** Longer texts are decoded on their own (one call's cost is then small beside its bytes'). */
const STAGE_TEXT_MAX = 16 * 1024;
/** The most rows `each` holds before handing them on. */
const STAGE_ROWS = 1024;

export class Codecs {
  readonly #sqlite3: Sqlite3Static;
  readonly #c: RawApi;
  readonly #capi: WrappedApi;
  /** `each`'s staging buffer, made at its first use; taken while one `each` runs (another one makes its own). */
  #stage: Uint8Array | undefined;

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
   * Binds all of `params` with their texts encoded at once into one block of the wasm heap, bound in place
   * (`SQLITE_STATIC`): one allocation, one `encodeInto` and one free for a statement's texts instead of one each
   * — a group's 32-row update binds 32 records (decision 0060). Only when every text is ASCII, which the one
   * encode tells (as many bytes written as units read), so each text's bytes are where its units are; returns
   * false, with nothing bound, otherwise or for fewer than two texts, and the caller binds them one by one.
   * On true the statement holds the block until `freeBlock` (after its reset and cleared bindings).
   */
  bindTexts(statement: Statement, params: readonly SqlValue[]): boolean {
    let texts = 0;
    let joined = "";
    for (const value of params) {
      if (typeof value !== "string") continue;
      texts++;
      joined += value;
    }
    if (texts < 2 || joined.length === 0 || joined.length > BLOCK_MAX_CHARS) return false;
    const { wasm } = this.#sqlite3;
    const block = wasm.alloc(joined.length) as number;
    const { read, written } = utf8Encoder.encodeInto(joined, wasm.heap8u().subarray(block, block + joined.length));
    if (read !== joined.length || written !== joined.length) {
      wasm.dealloc(block);
      return false;
    }
    statement.block = block;
    const c = this.#c;
    let at = block;
    for (let index = 0; index < params.length; index += 1) {
      const value = params[index];
      let rc: number;
      if (typeof value === "string") {
        rc = c.sqlite3_bind_text(statement.pointer, index + 1, at, value.length, 0); // SQLITE_STATIC: the block outlives the binding
        at += value.length;
      } else rc = this.bind(statement.pointer, index + 1, value);
      if (rc !== 0) {
        this.freeBlock(statement);
        throw new BindFailed(rc);
      }
    }
    return true;
  }

  /** Clears a statement's bindings and frees the block its texts were bound from, if any. */
  freeBlock(statement: Statement): void {
    if (statement.block === 0) return;
    this.#c.sqlite3_clear_bindings(statement.pointer);
    this.#sqlite3.wasm.dealloc(statement.block);
    statement.block = 0;
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
    const names = this.#names(statement);
    const row: SqlRow = {};
    for (let index = 0; index < names.length; index += 1) row[names[index]!] = this.#column(statement.pointer, index);
    return row;
  }

  /**
   * Steps `statement` to its end and hands `onRow` each row `row` would read, in order; returns the last step's
   * result code (the rows before a failed step are handed first). Short texts are not decoded one by one: each is
   * copied out of the wasm heap into a staging buffer, and the buffer is decoded with one call — when it is all
   * ASCII each text is a slice of it, otherwise each is decoded from its own bytes, as `row` would. In a freshly
   * started Chromium worker (a reload's open, 10,000 live rows) a `TextDecoder.decode` call costs far more than its
   * bytes (decision 0085). Rows are handed on a batch at a time (at most `STAGE_ROWS`, or `STAGE_BYTES` of text).
   */
  each(statement: Statement, onRow: (row: SqlRow) => void): number {
    const c = this.#c;
    const pointer = statement.pointer;
    const stage = this.#stage ?? new Uint8Array(STAGE_BYTES);
    this.#stage = undefined;
    const rows: SqlRow[] = [];
    // Each staged text: the row it belongs to, its column's name, and where its bytes end in the stage.
    const owners: SqlRow[] = [];
    const keys: string[] = [];
    const ends: number[] = [];
    let used = 0;
    const decodeStaged = () => {
      if (ends.length === 0) return;
      const joined = utf8Decoder.decode(stage.subarray(0, used));
      // UTF-8 never decodes to more UTF-16 units than bytes, and only ASCII and U+FFFD (a byte that is not UTF-8)
      // take one byte a unit: equal lengths and no U+FFFD mean every byte is ASCII, so units and bytes line up.
      const ascii = joined.length === used && !joined.includes("\uFFFD");
      let start = 0;
      for (let at = 0; at < ends.length; at += 1) {
        const end = ends[at]!;
        owners[at]![keys[at]!] = ascii ? joined.slice(start, end) : utf8Decoder.decode(stage.subarray(start, end));
        start = end;
      }
      owners.length = 0;
      keys.length = 0;
      ends.length = 0;
      used = 0;
    };
    const handOn = () => {
      decodeStaged();
      for (let at = 0; at < rows.length; at += 1) onRow(rows[at]!);
      rows.length = 0;
    };
    let rc: number;
    try {
      while ((rc = c.sqlite3_step(pointer)) === SQLITE_ROW) {
        const names = this.#names(statement);
        const row: SqlRow = {};
        for (let index = 0; index < names.length; index += 1) {
          const name = names[index]!;
          if (c.sqlite3_column_type(pointer, index) === SQLITE_TEXT) {
            const text = c.sqlite3_column_text(pointer, index); // before column_bytes (SQLite's rule)
            const bytes = c.sqlite3_column_bytes(pointer, index);
            if (bytes > 0 && bytes <= STAGE_TEXT_MAX) {
              if (used + bytes > STAGE_BYTES) decodeStaged();
              stage.set(this.#sqlite3.wasm.heap8u().subarray(text, text + bytes), used);
              used += bytes;
              owners.push(row);
              keys.push(name);
              ends.push(used);
              row[name] = ""; // its place among the keys; the text is set when the stage is decoded
              continue;
            }
          }
          row[name] = this.#column(pointer, index);
        }
        rows.push(row);
        if (rows.length >= STAGE_ROWS) handOn();
      }
      handOn();
    } finally {
      this.#stage = stage;
    }
    return rc;
  }

  /** The result column names of `statement`, read again only when SQLite re-prepared it (schema change under SELECT *). */
  #names(statement: Statement): string[] {
    const c = this.#c;
    const pointer = statement.pointer;
    const reprepares = c.sqlite3_stmt_status(pointer, SQLITE_STMTSTATUS_REPREPARE, 0);
    let names = statement.names;
    if (names === undefined || reprepares !== statement.reprepares) {
      const count = c.sqlite3_column_count(pointer);
      names = [];
      for (let index = 0; index < count; index += 1) names.push(this.#capi.sqlite3_column_name(pointer, index));
      statement.names = names;
      statement.reprepares = reprepares;
    }
    return names;
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
