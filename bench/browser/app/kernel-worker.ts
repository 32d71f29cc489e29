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
import type { SqliteDatabase } from "../../../src/storage/sqlite/database.ts";
import { openSqliteStorage } from "../../../src/storage/sqlite/open-storage.ts";
import type { SqliteStorage } from "../../../src/storage/sqlite/storage.ts";
import { openSqliteDatabase, sqliteVersion } from "../../../src/storage/sqlite/wasm.ts";
import { countIo, type IoCounts } from "./io-count.ts";
import { stepper } from "./tasks.ts";

const POOL = "pi-bench-kernel";

let kernel: Promise<{ storage: SqliteStorage; harness: Harness }> | undefined;
let fenced: Promise<{ storage: SqliteStorage; harness: Harness }> | undefined;
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
 * Durable Object's lease, without the link. The lease never lapses during the bench (ten minutes, renewed).
 */
function openFenced() {
  fenced ??= (async () => {
    const storage = await openSqliteStorage({ vfs: "opfs-sahpool", path: "/fenced.sqlite3", poolDirectory: POOL });
    const registry = createRegistry().install(defineExtension({ name: "bench", tasks: [stepper] }));
    const lease = { place: "bench", arbiter: memoryArbiter({ clock: systemClock, ttlMs: 600_000 }) };
    const harness = await Harness.open(storage, { registry, lease }, ctx);
    if (harness.readOnly) throw new Error("the fenced bench harness did not get its lease");
    return { storage, harness };
  })();
  return fenced;
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
