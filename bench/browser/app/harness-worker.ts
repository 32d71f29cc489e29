/// <reference lib="webworker" />
/**
 * The product path: `serveHarness` owns an OPFS database, recovers after a reload and resumes on its own.
 * The page reads the worker's timestamps through `client.call(...)`; every time is
 * `performance.timeOrigin + performance.now()` so the page can put it on its own navigation clock.
 */

import { serveHarness } from "../../../src/browser/worker.ts";
import type { HarnessStatus } from "../../../src/host/protocol.ts";
import { BACKGROUND_CONTEXT as ctx, type Harness } from "../../../src/index.ts";
import type { SqliteStorage } from "../../../src/storage/sqlite/storage.ts";
import { loadSqlite } from "../../../src/storage/sqlite/wasm.ts";
import { benchExtension, effectCounts, firstCommittedStep, hot, idle, stall } from "./tasks.ts";

const now = () => performance.timeOrigin + performance.now();
performance.mark("worker:script");
const scriptAt = now();

export interface HarnessWorkerConfig {
  path: string;
  pool: string;
  /** The "stalled" variant's live tasks are cut at every reload; they must not hit the restart limit. */
  noRestartLimit?: boolean;
}

const config = JSON.parse(self.name) as HarnessWorkerConfig;
const statusAt: Partial<Record<HarnessStatus["kind"], number>> = {};

const served = serveHarness({
  extensions: [benchExtension],
  path: config.path,
  poolDirectory: config.pool,
  settings: config.noRestartLimit ? { restartLimit: Infinity } : undefined,
  methods: {
    /** This worker's performance marks, `[name, ms since the worker's timeOrigin]` (bench/browser/reload-phases.ts). */
    marks: () => performance.getEntriesByType("mark").map((m) => [m.name, m.startTime] as const),
    /** Worker-side timestamps of this life of the worker (absolute ms). */
    timings: () => ({ workerOrigin: performance.timeOrigin, scriptAt, statusAt, firstStep: firstCommittedStep() ?? null }),
    /** Creates `others` live tasks (sleeping or stalled running), waits until they settle, then starts the hot task. */
    seed: async (harness: Harness, others, variant) => seed(harness, Number(others), String(variant)),
    effects: (_harness: Harness, tag, steps) => effectCounts(String(tag), Number(steps)),
    /** The wasm heap SQLite uses (not part of the JS heap). */
    wasmBytes: async () => (await loadSqlite()).wasm.heap8u().byteLength,
    liveTasks: async (harness: Harness) => (await harness.inspect(ctx)).tasks.length,
    /** Adds `finished` terminal tasks and `entries` entries as months of use leave them (decision 0027). */
    history: async (harness: Harness, finished, entries) => history(harness, Number(finished), Number(entries)),
    /** The database file's size in bytes. */
    fileBytes: async (harness: Harness) => {
      const rows = await harness.storage.query("SELECT page_count * page_size AS bytes FROM pragma_page_count, pragma_page_size");
      return Number(rows[0]?.bytes);
    },
  },
});

served.service.onStatus((status) => {
  statusAt[status.kind] ??= now();
  performance.mark(`status:${status.kind}`);
});

/**
 * History written straight into the tables (the records are what the kernel writes; going through tasks
 * would take minutes for 200,000 of them): finished tasks of a year of use and the entries of their
 * conversations, in one transaction, with ids past every live one.
 */
async function history(harness: Harness, finished: number, entries: number): Promise<{ bytes: number }> {
  const storage = harness.storage as SqliteStorage;
  const root = await harness.root(ctx);
  const conversationId = root.id;
  // Past every id stored so far, with room for what this harness mints before the reload.
  const [top] = await harness.query(
    "SELECT max(m) AS m FROM (SELECT max(id) AS m FROM tasks UNION ALL SELECT max(id) FROM entries UNION ALL SELECT max(id) FROM conversations UNION ALL SELECT max(id) FROM submissions)",
  );
  const first = Number(top?.m ?? 0) + 1000;
  const text = "a line of a conversation that a user and the model wrote a while ago, ".repeat(5);
  await storage.database.transaction((tx) => {
    for (let index = 0; index < finished; index += 1) {
      const id = first + index;
      const record = {
        id,
        conversationId,
        kind: "pi.tool",
        version: 1,
        input: { callId: `call_${id}`, entryId: id - 1 },
        background: false,
        abortRequested: false,
        startedAt: 1_700_000_000_000 + index,
        endedAt: 1_700_000_000_100 + index,
        state: { status: "terminal", outcome: { status: "completed", result: { text: `result ${id}` } } },
      };
      tx.run(
        "INSERT INTO tasks (id, conversation_id, kind, status, record) VALUES (?, ?, ?, 'terminal', ?)",
        id,
        conversationId,
        record.kind,
        JSON.stringify(record),
      );
    }
    for (let index = 0; index < entries; index += 1) {
      const id = first + finished + index;
      const record = { id, conversationId, kind: "pi.user", payload: { text }, at: 1_700_000_000_000 + index };
      tx.run(
        "INSERT INTO entries (id, conversation_id, kind, record) VALUES (?, ?, ?, ?)",
        id,
        conversationId,
        record.kind,
        JSON.stringify(record),
      );
    }
  });
  const rows = await storage.database.all("SELECT page_count * page_size AS bytes FROM pragma_page_count, pragma_page_size");
  return { bytes: Number(rows[0]?.bytes) };
}

async function seed(harness: Harness, others: number, variant: string): Promise<{ live: number; ms: number }> {
  const started = performance.now();
  const root = await harness.root(ctx);
  const definition = variant === "stalled" ? stall : idle;
  for (let made = 0; made < others; ) {
    const batch = Math.min(1000, others - made);
    await root.commit((tx) => {
      for (let index = 0; index < batch; index += 1) tx.createTask(definition, {});
    }, ctx);
    made += batch;
  }
  const settledStatus = variant === "stalled" ? "running" : "sleeping";
  for (;;) {
    const rows = await harness.storage.query("SELECT count(*) AS n FROM tasks WHERE status = ?", settledStatus);
    if (Number(rows[0]?.n) >= others) break;
    await new Promise((resolve) => setTimeout(resolve, 50));
  }
  await root.commit((tx) => tx.createTask(hot, {}), ctx);
  const ms = performance.now() - started;
  return { live: (await harness.inspect(ctx)).tasks.length, ms };
}
