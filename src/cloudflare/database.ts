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
 * - The object refuses BEGIN, ATTACH and most PRAGMAs itself. `query()` (the door of `storage.query()`) and a
 *   database opened `readOnly` decide whether a statement only reads before anything runs
 *   (docs/decisions/0020): there is no authorizer or `sqlite3_stmt_readonly` on an object, and SQLite applies
 *   a PRAGMA's value while it *compiles* the PRAGMA (also under `EXPLAIN`), so a PRAGMA is judged from its
 *   text alone (query-rules.ts: one statement, a read-only name, no argument unless it names a table), and
 *   any other statement from its program (`EXPLAIN`): one that opens a write transaction is refused, which is
 *   what `sqlite3_stmt_readonly` itself looks at. It then runs inside a transaction that is rolled back should
 *   the cursor report a written row after all, and stops at the row and byte caps between rows (the object
 *   offers no step budget: a single row that takes long is bounded only by the object's CPU limit).
 * - BLOBs come back as `Uint8Array`. Integers beyond ±2^53 cannot be bound (refused); the object binds every
 *   JavaScript number as a REAL (`typeof(?)` is 'real', `json_array(?)` gives `[5.0]`): CAST where that matters.
 */
import {
  DurableError,
  HarnessClosed,
  ImageUnavailable,
  QueryFailed,
  QueryLimitExceeded,
  QueryNotReadOnly,
  ReadOnlySession,
} from "../errors.ts";
import type { SqliteDatabase, SqliteTransaction, SqlRow, SqlValue } from "../storage/sqlite/database.ts";
import { pragmaOnlyReads, type QueryLimits, sqlStatements, statementShape, valueBytes } from "../storage/sqlite/query-rules.ts";
import type { DurableObjectStorage, SqlCursor } from "./types.ts";

/** The longest statement the object's SQLite compiles (SQLITE_LIMIT_SQL_LENGTH), in UTF-8 bytes. */
const MAX_STATEMENT_BYTES = 100_000;
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
  /** A Durable Object row or value holds at most 2 MB (local workerd accepts more; Cloudflare does not). */
  readonly maxRowBytes = 2_000_000;
  readonly #storage: DurableObjectStorage;
  /** `storage.sql`, read once: on workerd every read of the property crosses into the runtime. */
  readonly #sql: DurableObjectStorage["sql"];
  #closed = false;
  readonly #handle: SqliteTransaction;

  constructor(storage: DurableObjectStorage, options: DurableObjectDatabaseOptions = {}) {
    this.#storage = storage;
    this.#sql = storage.sql;
    this.readOnly = options.readOnly ?? false;
    this.#handle = {
      run: (sql, ...params) => this.#run(sql, params),
      get: (sql, ...params) => this.#all(sql, params)[0],
      all: (sql, ...params) => this.#all(sql, params),
      each: (sql, onRow) => this.#each(sql, onRow),
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
    return this.#op(() => this.#storage.transactionSync(() => body(this.#handle)));
  }

  query(sql: string, params: SqlValue[], limits: QueryLimits): Promise<SqlRow[]> {
    return this.#op(() => {
      const bindings = params.map(toBinding);
      this.#check(sql, bindings, (why) => new QueryNotReadOnly(sql, why));
      return this.#storage.transactionSync(() => {
        let cursor: SqlCursor;
        const rows: SqlRow[] = [];
        let bytes = 0;
        try {
          cursor = this.#sql.exec(sql, ...bindings);
          // Row by row, so a query past its caps stops there instead of loading every row first.
          for (const raw of cursor) {
            if (rows.length === limits.maxRows) throw new QueryLimitExceeded("maxRows", limits.maxRows);
            for (const key in raw) bytes += valueBytes(raw[key]);
            if (bytes > limits.maxBytes) throw new QueryLimitExceeded("maxBytes", limits.maxBytes);
            rows.push(fromRow(raw));
          }
        } catch (error) {
          throw asQueryError(error, sql);
        }
        if (cursor.rowsWritten > 0) throw new QueryNotReadOnly(sql); // a write the program check missed: rolled back
        return rows;
      });
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
    this.#execute(sql, params);
    return Number(this.#sql.exec("SELECT changes() AS n").toArray()[0]!.n);
  }

  #all(sql: string, params: SqlValue[]): SqlRow[] {
    return this.#execute(sql, params).map(fromRow);
  }

  /** Steps the cursor row by row (decision 0084): a snapshot's rows are read inside its transaction, none kept. */
  #each(sql: string, onRow: (row: SqlRow) => void): void {
    this.#guard(sql);
    for (const raw of this.#sql.exec(sql)) onRow(fromRow(raw));
  }

  #execute(sql: string, params: SqlValue[]): Record<string, unknown>[] {
    const bindings = params.map(toBinding);
    if (!this.readOnly) return this.#sql.exec(sql, ...bindings).toArray();
    this.#guard(sql, bindings);
    // Should a write get past the program check, the cursor says so and the throw rolls it back.
    return this.#storage.transactionSync(() => {
      const cursor: SqlCursor = this.#sql.exec(sql, ...bindings);
      const rows = cursor.toArray();
      if (cursor.rowsWritten > 0) throw new ReadOnlySession("A write");
      return rows;
    });
  }

  /** On a database opened `readOnly`: refuses a statement that would write. */
  #guard(sql: string, bindings: unknown[] = []): void {
    if (!this.readOnly) return;
    try {
      this.#check(sql, bindings, () => new ReadOnlySession("A write"));
    } catch (error) {
      // The harness's own statement failed to compile: its own error, not a query's.
      throw error instanceof QueryFailed && error.cause ? error.cause : error;
    }
  }

  /**
   * Throws `refuse(why)` unless `sql` is one statement that only reads, deciding without running it: a PRAGMA
   * from its text, anything else from its program. A statement SQLite cannot compile is `QueryFailed`.
   */
  #check(sql: string, bindings: unknown[], refuse: (why?: string) => Error): void {
    const statements = sqlStatements(sql);
    if (statements.length === 0) throw new QueryFailed(`there is no statement in ${JSON.stringify(sql.slice(0, 120))}`);
    // A second statement would run unchecked (exec runs every statement of its text).
    if (statements.length > 1) throw refuse("it holds more than one statement");
    const tokens = statements[0]!;
    const shape = statementShape(tokens);
    if (shape.pragma !== undefined) {
      // Never compiled: compiling `PRAGMA case_sensitive_like = 1`, even under EXPLAIN, already applies it.
      if (shape.pragma === null || !pragmaOnlyReads(shape.pragma.name, shape.pragma.hasArgument)) throw refuse();
      return;
    }
    if (shape.body >= tokens.length) throw new QueryFailed(`incomplete input: ${JSON.stringify(sql.slice(0, 120))}`);
    // The statement's own program, also for `EXPLAIN …` (what it describes must only read too).
    const program = `EXPLAIN ${sql.slice(tokens[shape.body]!.start, tokens[tokens.length - 1]!.end)}`;
    if (valueBytes(program) > MAX_STATEMENT_BYTES) {
      throw new QueryFailed(`statement too long: a query on a Durable Object is at most ${MAX_STATEMENT_BYTES - 8} bytes`);
    }
    let opcodes: Record<string, unknown>[];
    try {
      opcodes = this.#sql.exec(program, ...bindings).toArray();
    } catch (error) {
      const failure = asQueryError(error, sql);
      throw failure instanceof QueryNotReadOnly ? refuse() : failure;
    }
    for (const op of opcodes) {
      const opcode = String(op.opcode);
      if ((opcode === "Transaction" && Number(op.p2) !== 0) || WRITING_OPCODES.has(opcode)) throw refuse();
    }
  }
}

/**
 * The object's error for a query as one of ours: refused by the object (`SQLITE_AUTH`: ATTACH, most PRAGMAs)
 * is `QueryNotReadOnly`, any other SQLite error `QueryFailed` with SQLite's words.
 */
function asQueryError(error: unknown, sql: string): Error {
  if (error instanceof DurableError) return error;
  const message = error instanceof Error ? error.message : String(error);
  if (/SQLITE_AUTH\b/.test(message)) return new QueryNotReadOnly(sql);
  return new QueryFailed(message.replace(/^Error: /, "").replace(/: SQLITE_\w+$/, ""), { cause: error });
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
