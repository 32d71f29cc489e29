/// <reference lib="webworker" />
/**
 * What a commit costs on OPFS, counted rather than timed (decision 0061): every call the opfs-sahpool VFS makes on
 * its files' sync access handles (xWrite → `write`, xRead → `read`, xSync and xClose → `flush`, xFileSize →
 * `getSize`, xTruncate → `truncate`; its xLock, xUnlock and xCheckReservedLock touch no handle), with the bytes and
 * the time spent in them, and every statement a database facade runs (in a transaction or not) with the bytes it
 * binds. Installed around one measured stretch and removed after it.
 */
import type { SqliteDatabase, SqliteTransaction, SqlValue } from "../../../src/storage/sqlite/database.ts";

export interface IoCounts {
  writes: number;
  writeBytes: number;
  /** Writes of a whole 4,096-byte page (the WAL's frames carry one page each, after a 24-byte header write). */
  pageWrites: number;
  /** How many writes of each size. */
  writeSizes: Record<number, number>;
  reads: number;
  flushes: number;
  getSizes: number;
  truncates: number;
  /** Time inside the handles' calls (ms): all of them, and the writes' and flushes' alone. */
  handleMs: number;
  writeMs: number;
  flushMs: number;
  /** Messages posted on a MessagePort (the worker's macrotask hops: event-loop.ts's probe and yield) and timers set. */
  portMessages: number;
  timers: number;
  transactions: number;
  /** Time from each `transaction()` call to its promise settling (ms): the facade's queue, BEGIN, the body, COMMIT. */
  transactionMs: number;
  /** Statements run inside transactions, and outside any. */
  statements: number;
  statementsOutside: number;
  /** Bytes of the text and blob parameters bound (numbers count 8). */
  boundBytes: number;
  /** The statements' texts, each with the times it ran. */
  sql: Record<string, number>;
}

const METHODS = ["write", "read", "flush", "getSize", "truncate"] as const;
const PAGE = 4096;

function zero(): IoCounts {
  return {
    writes: 0,
    writeBytes: 0,
    pageWrites: 0,
    writeSizes: {},
    reads: 0,
    flushes: 0,
    getSizes: 0,
    truncates: 0,
    handleMs: 0,
    writeMs: 0,
    flushMs: 0,
    portMessages: 0,
    timers: 0,
    transactions: 0,
    transactionMs: 0,
    statements: 0,
    statementsOutside: 0,
    boundBytes: 0,
    sql: {},
  };
}

function bound(params: readonly SqlValue[]): number {
  let bytes = 0;
  for (const value of params) {
    if (typeof value === "string") bytes += value.length;
    else if (value instanceof Uint8Array) bytes += value.byteLength;
    else if (value !== null) bytes += 8;
  }
  return bytes;
}

/**
 * Counts, while `body` runs, the sync access handles' calls (every handle of this worker) and the statements of
 * `database` (its methods wrapped on the instance, put back after).
 */
export async function countIo<T>(database: SqliteDatabase, body: () => Promise<T>): Promise<{ result: T; counts: IoCounts }> {
  const counts = zero();
  const proto = FileSystemSyncAccessHandle.prototype as unknown as Record<string, (...args: unknown[]) => unknown>;
  const originals = METHODS.map((name) => [name, proto[name]!] as const);
  for (const [name, original] of originals) {
    proto[name] = function (this: unknown, ...args: unknown[]) {
      const started = performance.now();
      try {
        return original.apply(this, args);
      } finally {
        const ms = performance.now() - started;
        counts.handleMs += ms;
        if (name === "write") counts.writeMs += ms;
        else if (name === "flush") counts.flushMs += ms;
        if (name === "write") {
          const bytes = (args[0] as ArrayBufferView).byteLength;
          counts.writes++;
          counts.writeBytes += bytes;
          if (bytes === PAGE) counts.pageWrites++;
          counts.writeSizes[bytes] = (counts.writeSizes[bytes] ?? 0) + 1;
        } else if (name === "read") counts.reads++;
        else if (name === "flush") counts.flushes++;
        else if (name === "getSize") counts.getSizes++;
        else counts.truncates++;
      }
    };
  }
  const port = MessagePort.prototype as unknown as Record<string, (...args: unknown[]) => unknown>;
  const postMessage = port.postMessage!;
  port.postMessage = function (this: unknown, ...args: unknown[]) {
    counts.portMessages++;
    return postMessage.apply(this, args);
  };
  const setTimer = globalThis.setTimeout;
  globalThis.setTimeout = ((...args: Parameters<typeof setTimeout>) => {
    counts.timers++;
    return setTimer(...args);
  }) as typeof setTimeout;
  const note = (sql: string, params: readonly SqlValue[], inside: boolean) => {
    if (inside) counts.statements++;
    else counts.statementsOutside++;
    counts.boundBytes += bound(params);
    counts.sql[sql] = (counts.sql[sql] ?? 0) + 1;
  };
  const noted = <R>(sql: string, params: readonly SqlValue[], inside: boolean, run: () => R): R => {
    note(sql, params, inside);
    return run();
  };
  const db = database as unknown as Record<string, unknown>;
  const own = ["transaction", "run", "get", "all", "exec"].filter((name) => Object.hasOwn(db, name));
  const methods = {
    transaction: database.transaction.bind(database),
    run: database.run.bind(database),
    get: database.get.bind(database),
    all: database.all.bind(database),
    exec: database.exec.bind(database),
  };
  db.transaction = async <R>(inner: (tx: SqliteTransaction) => R) => {
    const started = performance.now();
    try {
      return await transaction(inner);
    } finally {
      counts.transactionMs += performance.now() - started;
    }
  };
  const transaction = <R>(inner: (tx: SqliteTransaction) => R) =>
    methods.transaction((tx) => {
      counts.transactions++;
      const counted: SqliteTransaction = {
        run: (sql, ...params) => noted(sql, params, true, () => tx.run(sql, ...params)),
        get: (sql, ...params) => noted(sql, params, true, () => tx.get(sql, ...params)),
        all: (sql, ...params) => noted(sql, params, true, () => tx.all(sql, ...params)),
        ...(tx.writes ? { writes: () => tx.writes!() } : {}),
      };
      return inner(counted);
    });
  db.run = (sql: string, ...params: SqlValue[]) => noted(sql, params, false, () => methods.run(sql, ...params));
  db.get = (sql: string, ...params: SqlValue[]) => noted(sql, params, false, () => methods.get(sql, ...params));
  db.all = (sql: string, ...params: SqlValue[]) => noted(sql, params, false, () => methods.all(sql, ...params));
  db.exec = (sql: string) => noted(sql, [], false, () => methods.exec(sql));
  try {
    return { result: await body(), counts };
  } finally {
    for (const [name, original] of originals) proto[name] = original;
    port.postMessage = postMessage;
    globalThis.setTimeout = setTimer;
    for (const name of ["transaction", "run", "get", "all", "exec"]) if (!own.includes(name)) delete db[name];
  }
}
