/**
 * The `SqliteDatabase` facade over a Durable Object's own SQLite (`ctx.storage.sql`), so `SqliteStorage`, its
 * schema and hand-written SQL run on an object unchanged.
 *
 * ```ts
 * const storage = await SqliteStorage.open(new DurableObjectDatabase(ctx.storage), "durable-object");
 * ```
 *
 * How it maps the facade onto what an object allows:
 * - A transaction body runs in `ctx.storage.transactionSync` (the object refuses BEGIN and SAVEPOINT); a
 *   throwing body rolls back.
 * - Changed-row counts come from `changes()`: the cursor's `rowsWritten` counts index entries too.
 * - The object refuses most PRAGMAs, `query_only` among them. `SqliteStorage.query()` brackets a read-only
 *   query with `PRAGMA query_only = 1 / 0`; here those two statements switch this facade's own guard, and so
 *   does opening it `readOnly`. There is no `sqlite3_stmt_readonly` on an object, so the guard asks SQLite for
 *   the statement's program (`EXPLAIN`) and refuses one that opens a write transaction — what
 *   `sqlite3_stmt_readonly` itself looks at — and it runs the statement inside a transaction that is rolled
 *   back should the cursor report a written row after all.
 * - BLOBs come back as `Uint8Array`. Integers beyond ±2^53 cannot be bound (refused); the object binds every
 *   JavaScript number as a REAL (`typeof(?)` is 'real', `json_array(?)` gives `[5.0]`): CAST where that matters.
 */
import { HarnessClosed, ImageUnavailable, QueryNotReadOnly, ReadOnlySession } from "../errors.ts";
import type { SqliteDatabase, SqliteTransaction, SqlRow, SqlValue } from "../storage/sqlite/database.ts";
import type { DurableObjectStorage, SqlCursor } from "./types.ts";

/** The PRAGMA `SqliteStorage.query()` wraps a read-only statement in; the object itself refuses it. */
const QUERY_ONLY = /^\s*pragma\s+query_only\s*=\s*(0|1|on|off|true|false)\s*;?\s*$/i;
/** Opcodes that make SQLite report a statement as not read-only (besides a write `Transaction`). */
const WRITING_OPCODES = new Set(["Vacuum", "JournalMode", "Checkpoint", "VUpdate", "VCreate", "VDestroy", "OpenWrite"]);

export interface DurableObjectDatabaseOptions {
  /** Refuse every write (for a read-only harness on an object). */
  readOnly?: boolean;
}

export class DurableObjectDatabase implements SqliteDatabase {
  readonly readOnly: boolean;
  /** An object's SQLite is the app's too (its own tables, `ctx.storage.put()`'s `_cf_KV`): the harness shares it. */
  readonly shared = true;
  readonly #storage: DurableObjectStorage;
  /** `storage.sql`, read once: on workerd every read of the property crosses into the runtime. */
  readonly #sql: DurableObjectStorage["sql"];
  #closed = false;
  /** Set by `PRAGMA query_only = 1` inside a transaction body (see the module comment). */
  #queryOnly = false;
  readonly #handle: SqliteTransaction;

  constructor(storage: DurableObjectStorage, options: DurableObjectDatabaseOptions = {}) {
    this.#storage = storage;
    this.#sql = storage.sql;
    this.readOnly = options.readOnly ?? false;
    this.#handle = {
      run: (sql, ...params) => this.#run(sql, params),
      get: (sql, ...params) => this.#all(sql, params)[0],
      all: (sql, ...params) => this.#all(sql, params),
    };
  }

  exec(sql: string): Promise<void> {
    return this.#op(() => {
      this.#guard(sql);
      this.#sql.exec(sql).toArray();
    });
  }

  run(sql: string, ...params: SqlValue[]): Promise<number> {
    return this.#op(() => this.#run(sql, params));
  }

  get(sql: string, ...params: SqlValue[]): Promise<SqlRow | undefined> {
    return this.#op(() => this.#all(sql, params)[0]);
  }

  all(sql: string, ...params: SqlValue[]): Promise<SqlRow[]> {
    return this.#op(() => this.#all(sql, params));
  }

  transaction<T>(body: (tx: SqliteTransaction) => T): Promise<T> {
    return this.#op(() => {
      try {
        return this.#storage.transactionSync(() => body(this.#handle));
      } finally {
        this.#queryOnly = false;
      }
    });
  }

  exportImage(): Promise<Uint8Array> {
    return Promise.reject(new ImageUnavailable());
  }

  close(): Promise<void> {
    this.#closed = true;
    return Promise.resolve();
  }

  /** Every operation is synchronous underneath; this only turns the outcome into a promise. */
  #op<T>(body: () => T): Promise<T> {
    if (this.#closed) return Promise.reject(new HarnessClosed("Database"));
    try {
      return Promise.resolve(body());
    } catch (error) {
      return Promise.reject(error);
    }
  }

  #run(sql: string, params: SqlValue[]): number {
    // Only a PRAGMA can be `query_only`: look at the first letter before running the pattern on every write.
    const pragma = mayBePragma(sql) ? QUERY_ONLY.exec(sql) : null;
    if (pragma) {
      this.#queryOnly = /^(1|on|true)$/i.test(pragma[1]!);
      return 0;
    }
    this.#execute(sql, params);
    return Number(this.#sql.exec("SELECT changes() AS n").toArray()[0]!.n);
  }

  #all(sql: string, params: SqlValue[]): SqlRow[] {
    return this.#execute(sql, params).map(fromRow);
  }

  #execute(sql: string, params: SqlValue[]): Record<string, unknown>[] {
    const bindings = params.map(toBinding);
    if (!this.#guarded()) return this.#sql.exec(sql, ...bindings).toArray();
    this.#guard(sql, bindings);
    // Should a write get past the program check, the cursor says so and the throw rolls it back.
    return this.#storage.transactionSync(() => {
      const cursor: SqlCursor = this.#sql.exec(sql, ...bindings);
      const rows = cursor.toArray();
      if (cursor.rowsWritten > 0) throw this.#refusal(sql);
      return rows;
    });
  }

  #guarded(): boolean {
    return this.readOnly || this.#queryOnly;
  }

  /** Refuses a statement that would write while the guard is on. */
  #guard(sql: string, bindings: unknown[] = []): void {
    if (!this.#guarded()) return;
    const text = sql.trim().replace(/;\s*$/, "");
    // A second statement would run unchecked (exec runs every statement of its text).
    if (text.includes(";")) throw this.#refusal(sql);
    if (/^explain\b/i.test(text)) return; // EXPLAIN never runs the statement it describes
    let program: Record<string, unknown>[];
    try {
      program = this.#sql.exec(`EXPLAIN ${text}`, ...bindings).toArray();
    } catch {
      // Not a statement SQLite can describe (or one the object refuses): run nothing.
      throw this.#refusal(sql);
    }
    for (const op of program) {
      const opcode = String(op.opcode);
      if ((opcode === "Transaction" && Number(op.p2) !== 0) || WRITING_OPCODES.has(opcode)) throw this.#refusal(sql);
    }
  }

  #refusal(sql: string): Error {
    return this.readOnly ? new ReadOnlySession("A write") : new QueryNotReadOnly(sql);
  }
}

/** Whether the statement's first non-blank character is a `p` (a cheap filter before the PRAGMA pattern). */
function mayBePragma(sql: string): boolean {
  for (let i = 0; i < sql.length; i++) {
    const code = sql.charCodeAt(i);
    if (code === 32 || (code >= 9 && code <= 13)) continue;
    return code === 112 || code === 80;
  }
  return false;
}

function toBinding(value: SqlValue): unknown {
  if (typeof value !== "bigint") return value;
  if (value > BigInt(Number.MAX_SAFE_INTEGER) || value < BigInt(Number.MIN_SAFE_INTEGER)) {
    throw new RangeError(`The integer ${value} is outside ±2^53: a Durable Object's SQLite binds numbers only. Store it as TEXT.`);
  }
  return Number(value);
}

function fromRow(row: Record<string, unknown>): SqlRow {
  const out: SqlRow = {};
  for (const [column, value] of Object.entries(row)) {
    // A number beyond ±2^53 may be a REAL (1e20) or an INTEGER the object returned inexactly; the value cannot
    // tell which, so it is returned as it is. Writes refuse such integers (toBinding), so the harness never has one.
    out[column] = value instanceof ArrayBuffer ? new Uint8Array(value) : (value as SqlValue);
  }
  return out;
}
