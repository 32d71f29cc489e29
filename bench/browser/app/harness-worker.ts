/// <reference lib="webworker" />
/**
 * The product path: `serveHarness` owns an OPFS database, recovers after a reload and resumes on its own.
 * The page reads the worker's timestamps through `client.call(...)`; every time is
 * `performance.timeOrigin + performance.now()` so the page can put it on its own navigation clock.
 */

import { serveHarness } from "../../../src/browser/worker.ts";
import type { HarnessStatus } from "../../../src/host/protocol.ts";
import { BACKGROUND_CONTEXT as ctx, type Harness } from "../../../src/index.ts";
import { loadSqlite } from "../../../src/storage/sqlite/wasm.ts";
import { benchExtension, effectCounts, firstCommittedStep, hot, idle, stall } from "./tasks.ts";

const now = () => performance.timeOrigin + performance.now();
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
    /** Worker-side timestamps of this life of the worker (absolute ms). */
    timings: () => ({ workerOrigin: performance.timeOrigin, scriptAt, statusAt, firstStep: firstCommittedStep() ?? null }),
    /** Creates `others` live tasks (sleeping or stalled running), waits until they settle, then starts the hot task. */
    seed: async (harness: Harness, others, variant) => seed(harness, Number(others), String(variant)),
    effects: (_harness: Harness, tag, steps) => effectCounts(String(tag), Number(steps)),
    /** The wasm heap SQLite uses (not part of the JS heap). */
    wasmBytes: async () => (await loadSqlite()).wasm.heap8u().byteLength,
    liveTasks: (harness: Harness) => harness.session.live.size,
  },
});

served.host.onStatus((status) => {
  statusAt[status.kind] ??= now();
});

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
  return { live: harness.session.live.size, ms: performance.now() - started };
}
