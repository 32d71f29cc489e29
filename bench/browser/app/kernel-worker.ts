/// <reference lib="webworker" />
/**
 * Kernel steps against raw commits, in a dedicated worker on OPFS (opfs-sahpool; the adapter sets the
 * product's journal: locking_mode=EXCLUSIVE, WAL, synchronous=NORMAL). Both databases live in one pool and
 * go through the same `SqliteDatabase` facade; each run is timed inside the worker.
 */
import * as Comlink from "comlink";
import { systemClock } from "../../../src/base/clock.ts";
import { memoryArbiter } from "../../../src/follow/arbiter.ts";
import { createRegistry, BACKGROUND_CONTEXT as ctx, defineExtension, Harness } from "../../../src/index.ts";
import type { SqliteDatabase, SqliteTransaction, SqlValue } from "../../../src/storage/sqlite/database.ts";
import { openSqliteStorage } from "../../../src/storage/sqlite/open-storage.ts";
import { SQL } from "../../../src/storage/sqlite/schema.ts";
import { SqliteStorage } from "../../../src/storage/sqlite/storage.ts";
import { openSqliteDatabase, sqliteVersion } from "../../../src/storage/sqlite/wasm.ts";
import { countIo, type IoCounts } from "./io-count.ts";
import { stepper } from "./tasks.ts";

const POOL = "pi-bench-kernel";

let kernel: Promise<{ storage: SqliteStorage; harness: Harness }> | undefined;
let fenced: Promise<{ storage: SqliteStorage; harness: Harness }> | undefined;
let fencedWritten: Promise<{ storage: SqliteStorage; harness: Harness }> | undefined;
let fencedDeferred: Promise<{ storage: SqliteStorage; harness: Harness }> | undefined;
/** Decision 0076's second ablation: the deferred task-row writes reach the table every this many commits. */
const FLUSH_EVERY = 32;
let raw: Promise<SqliteDatabase> | undefined;

function openKernel() {
  kernel ??= (async () => {
    const storage = await openSqliteStorage({ vfs: "opfs-sahpool", path: "/kernel.sqlite3", poolDirectory: POOL });
    const registry = createRegistry().install(defineExtension({ name: "bench", tasks: [stepper] }));
    const harness = await Harness.open(storage, { registry }, ctx);
    return { storage, harness };
  })();
  return kernel;
}

/**
 * The same kernel on a database of its own, under a lease from an arbiter in this worker (issue 27, decision
 * 0056): every transaction is fenced and logged (its position and epoch, and its log row) as a tab's under its
 * Durable Object's lease, without the link. The lease never lapses during the bench (ten minutes, renewed). The
 * product's storage on OPFS: an effect-free step's task row waits in memory, its log row is its only write
 * (decision 0081).
 */
function openFenced() {
  fenced ??= fencedOn(openSqliteStorage({ vfs: "opfs-sahpool", path: "/fenced.sqlite3", poolDirectory: POOL }));
  return fenced;
}

/**
 * The A/B of decision 0081: the fenced kernel as it was before (`deferTaskRows: false`), each step writing its task
 * row beside its log row. It takes turns with the fenced run.
 */
function openFencedWritten() {
  fencedWritten ??= fencedOn(
    openSqliteStorage({ vfs: "opfs-sahpool", path: "/fenced-written.sqlite3", poolDirectory: POOL, deferTaskRows: false }),
  );
  return fencedWritten;
}

/**
 * Decision 0076's second ablation, in this bench build only (never in src/): the fenced kernel (task rows written at
 * each step) on a database of its own whose facade skips the status-unchanged task-row write (`SQL.updateTaskRecord`)
 * and runs the last one per task, with one metadata row's write, in every FLUSH_EVERY-th transaction: the write
 * pattern decision 0081 builds, without its bookkeeping or recovery (not crash-safe): the bound it can reach.
 */
function openFencedDeferred() {
  fencedDeferred ??= fencedOn(
    (async () => {
      const db = await openSqliteDatabase({ vfs: "opfs-sahpool", path: "/fenced-deferred.sqlite3", poolDirectory: POOL });
      return SqliteStorage.open(deferringTaskRecord(db, FLUSH_EVERY), "sqlite:opfs-sahpool:/fenced-deferred.sqlite3");
    })(),
  );
  return fencedDeferred;
}

/**
 * `db` with every transaction's `SQL.updateTaskRecord` answered "one row changed" and not run (the ablation); the
 * last skipped write of each task is kept and run, with a metadata write, in every `flushEvery`-th transaction; a
 * task's whole-row write (a status change) drops its kept one.
 */
function deferringTaskRecord(db: SqliteDatabase, flushEvery: number): SqliteDatabase {
  const kept = new Map<SqlValue, SqlValue[]>();
  let transactions = 0;
  const skipping = (tx: SqliteTransaction): SqliteTransaction => ({
    run: (sql, ...params) => {
      if (sql === SQL.updateTaskRecord) {
        kept.set(params[1]!, params);
        return 1;
      }
      if (sql === SQL.updateTask) kept.delete(params[2]!);
      return tx.run(sql, ...params);
    },
    get: (sql, ...params) => tx.get(sql, ...params),
    all: (sql, ...params) => tx.all(sql, ...params),
    ...(tx.writes ? { writes: () => tx.writes!() } : {}),
  });
  const flush = (tx: SqliteTransaction) => {
    if (++transactions % flushEvery !== 0) return;
    for (const params of kept.values()) tx.run(SQL.updateTaskRecord, ...params);
    kept.clear();
    tx.run(SQL.writeMeta, "bench_applied_through", String(transactions));
  };
  return new Proxy(db, {
    get(target, key) {
      if (key === "transaction")
        return <T>(body: (tx: SqliteTransaction) => T) =>
          target.transaction((tx) => {
            const result = body(skipping(tx));
            flush(tx);
            return result;
          });
      const value = Reflect.get(target, key, target) as unknown;
      return typeof value === "function" ? value.bind(target) : value;
    },
  });
}

/** The kernel on `opening`'s storage under a lease from an arbiter in this worker (`openFenced`). */
async function fencedOn(opening: Promise<SqliteStorage>): Promise<{ storage: SqliteStorage; harness: Harness }> {
  const storage = await opening;
  const registry = createRegistry().install(defineExtension({ name: "bench", tasks: [stepper] }));
  const lease = { place: "bench", arbiter: memoryArbiter({ clock: systemClock, ttlMs: 600_000 }) };
  const harness = await Harness.open(storage, { registry, lease }, ctx);
  if (harness.readOnly) throw new Error("the fenced bench harness did not get its lease");
  return { storage, harness };
}

/**
 * WAL frames per commit (decision 0076): the automatic checkpoint off, the log emptied (a TRUNCATE checkpoint), then
 * `run`, then a PASSIVE checkpoint's count of the frames in the log, divided by the commits `run` made; the automatic
 * checkpoint back on after. Every commit of a lone step touches whole pages, and on OPFS each is one frame written.
 */
async function walFrames(db: SqliteDatabase, commits: number, run: () => Promise<unknown>): Promise<{ frames: number; perCommit: number }> {
  await db.exec("PRAGMA wal_autocheckpoint = 0");
  try {
    await db.get("PRAGMA wal_checkpoint(TRUNCATE)");
    await run();
    const row = await db.get("PRAGMA wal_checkpoint(PASSIVE)");
    const frames = Number(row?.log);
    return { frames, perCommit: frames / commits };
  } finally {
    await db.exec("PRAGMA wal_autocheckpoint = 1000");
  }
}

/** One task committing `steps` checkpoints on `harness`; ms from creation to its terminal record, and the record's size. */
async function steps(harness: Harness, count: number): Promise<{ ms: number; recordBytes: number }> {
  const root = await harness.root(ctx);
  const started = performance.now();
  const id = await root.commit((tx) => tx.createTask(stepper, { steps: count }), ctx);
  const done = await harness.waitForTask(id, ctx);
  const ms = performance.now() - started;
  if (done.state.status !== "terminal" || done.state.outcome.status !== "completed")
    throw new Error(`bench task did not complete: ${JSON.stringify(done.state)}`);
  const running = { ...done, state: { status: "running", checkpoint: { phase: "step", n: count - 1 } } };
  delete (running as { endedAt?: number }).endedAt;
  return { ms, recordBytes: JSON.stringify(running).length };
}

function openRaw() {
  raw ??= (async () => {
    const db = await openSqliteDatabase({ vfs: "opfs-sahpool", path: "/raw.sqlite3", poolDirectory: POOL });
    await db.exec(
      "CREATE TABLE IF NOT EXISTS raw (id INTEGER PRIMARY KEY, record TEXT NOT NULL); INSERT OR IGNORE INTO raw VALUES (1, '{}')",
    );
    return db;
  })();
  return raw;
}

const api = {
  /** One task committing `steps` checkpoints; returns ms from creation to its terminal record, and the record's size. */
  async kernelSteps(count: number): Promise<{ ms: number; recordBytes: number }> {
    return steps((await openKernel()).harness, count);
  },

  /**
   * `kernelSteps` under a lease (every step fenced and logged). The log's tail is trimmed after the run, outside
   * the time, as a link's acknowledgements would: each run starts from the same tail.
   */
  async fencedSteps(count: number): Promise<{ ms: number; recordBytes: number }> {
    const { harness, storage } = await openFenced();
    const result = await steps(harness, count);
    await storage.trimLog(harness.lease!.position);
    return result;
  },

  /** `fencedSteps` with each step's task row written (deferring off: the A/B of decision 0081, `openFencedWritten`). */
  async fencedWrittenSteps(count: number): Promise<{ ms: number; recordBytes: number }> {
    const { harness, storage } = await openFencedWritten();
    const result = await steps(harness, count);
    await storage.trimLog(harness.lease!.position);
    return result;
  },

  /** The fenced steps of decision 0076's second ablation (`openFencedDeferred`). */
  async fencedDeferredSteps(count: number): Promise<{ ms: number; recordBytes: number }> {
    const { harness, storage } = await openFencedDeferred();
    const result = await steps(harness, count);
    await storage.trimLog(harness.lease!.position);
    return result;
  },

  /**
   * Decision 0076: WAL frames per commit of each kind, counted (`walFrames`), not timed: `count` raw commits, and one
   * task's `count` steps (plus its creation and its terminal commit) with no lease, fenced (the product's: deferring,
   * decision 0081), fenced with each task row written, and the deferred ablation.
   */
  async walFramesPerCommit(count: number): Promise<Record<"raw" | "kernel" | "fenced" | "fencedWritten" | "fencedDeferred", number>> {
    const db = await openRaw();
    const kernel = await openKernel();
    const fenced = await openFenced();
    const written = await openFencedWritten();
    const deferred = await openFencedDeferred();
    const commits = count + 2;
    // The fenced runs' tails are trimmed after the count (as `fencedSteps` does after its time): the trim's own
    // transaction is not a step's.
    const fencedRun = async ({ storage, harness }: { storage: SqliteStorage; harness: Harness }) => {
      const counted = await walFrames(storage.database, commits, () => steps(harness, count));
      await storage.trimLog(harness.lease!.position);
      return counted.perCommit;
    };
    return {
      raw: (await walFrames(db, count, () => api.rawCommits(count))).perCommit,
      kernel: (await walFrames(kernel.storage.database, commits, () => steps(kernel.harness, count))).perCommit,
      fenced: await fencedRun(fenced),
      fencedWritten: await fencedRun(written),
      fencedDeferred: await fencedRun(deferred),
    };
  },

  /**
   * Group commit (decision 0026): `tasks` tasks of `steps / tasks` steps each, created in one commit and stepping
   * at once; ms from the create to the last terminal record, and the storage transactions that took.
   */
  async parallelSteps(tasks: number, steps: number): Promise<{ ms: number; transactions: number }> {
    const { harness, storage } = await openKernel();
    const root = await harness.root(ctx);
    let transactions = 0;
    const apply = storage.apply.bind(storage);
    storage.apply = (batch) => {
      transactions++;
      return apply(batch);
    };
    try {
      const started = performance.now();
      const ids = await root.commit((tx) => Array.from({ length: tasks }, () => tx.createTask(stepper, { steps: steps / tasks })), ctx);
      const done = await Promise.all(ids.map((id) => harness.waitForTask(id, ctx)));
      const ms = performance.now() - started;
      if (done.some((task) => task.state.status !== "terminal" || task.state.outcome.status !== "completed"))
        throw new Error("a parallel bench task did not complete");
      return { ms, transactions };
    } finally {
      storage.apply = apply;
    }
  },

  /** `steps` single-row UPDATE transactions writing a JSON record as large as the task's; returns ms. */
  async rawCommits(steps: number): Promise<{ ms: number; recordBytes: number }> {
    const db = await openRaw();
    const record = {
      id: 2,
      conversationId: 1,
      kind: stepper.name,
      version: 1,
      input: { steps },
      background: false,
      abortRequested: false,
      state: { status: "running", checkpoint: { phase: "step", n: 0 } },
      startedAt: Date.now(),
    };
    let bytes = 0;
    const started = performance.now();
    for (let n = 0; n < steps; n++) {
      const text = JSON.stringify({ ...record, state: { status: "running", checkpoint: { phase: "step", n } } });
      bytes = text.length;
      await db.transaction((tx) => tx.run("UPDATE raw SET record = ? WHERE id = 1", text));
    }
    return { ms: performance.now() - started, recordBytes: bytes };
  },

  /**
   * Decision 0061: `count` raw commits and then one task's `count` kernel steps, each with its VFS handle calls and
   * its statements counted (io-count.ts), and both timed as in `rawCommits` and `kernelSteps`.
   */
  async ioProfile(count: number, kernelFirst = false): Promise<{ raw: IoCounts & { ms: number }; kernel: IoCounts & { ms: number } }> {
    const db = await openRaw();
    const { harness, storage } = await openKernel();
    const runKernel = () => countIo(storage.database, () => steps(harness, count));
    const first = kernelFirst ? await runKernel() : undefined;
    const raw = await countIo(db, () => api.rawCommits(count));
    const kernel = first ?? (await runKernel());
    return { raw: { ...raw.counts, ms: raw.result.ms }, kernel: { ...kernel.counts, ms: kernel.result.ms } };
  },

  /** The journal settings actually in force on both databases, and versions. */
  async settings() {
    const db = await openRaw();
    const { storage } = await openKernel();
    const pragmas = async (database: SqliteDatabase) => ({
      journal_mode: String((await database.get("PRAGMA journal_mode"))?.journal_mode),
      synchronous: Number((await database.get("PRAGMA synchronous"))?.synchronous),
      locking_mode: String((await database.get("PRAGMA locking_mode"))?.locking_mode),
    });
    return {
      raw: await pragmas(db),
      kernel: await pragmas(storage.database),
      sqlite: await sqliteVersion(),
      userAgent: navigator.userAgent,
    };
  },
};

export type KernelWorkerApi = typeof api;

Comlink.expose(api);
