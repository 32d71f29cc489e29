/**
 * Kernel step cost vs a raw SQLite commit (issue: "Speed"): `npm run bench:kernel`.
 * Node, sqlite-wasm in memory. One task commits STEPS checkpoints back to back; the baseline is STEPS
 * single-row UPDATE transactions through the same database facade, on the same kind of database, in the
 * same run. Each figure is the median of RUNS runs (min and max beside it), raw and kernel runs taking turns;
 * the ratio is of the medians (the target's), and run by run (each kernel run over the raw run just before it)
 * beside it: on a shared machine whose speed drifts during a run, the run-by-run median moves less.
 */
import { writeFileSync } from "node:fs";
import { GCProfiler } from "node:v8";
import { createRegistry, BACKGROUND_CONTEXT as ctx, defineExtension, Harness } from "../src/index.ts";
import { openSqliteStorage } from "../src/storage/sqlite/open-storage.ts";
import type { SqliteStorage } from "../src/storage/sqlite/storage.ts";
import { openSqliteDatabase, sqliteVersion } from "../src/storage/sqlite/wasm.ts";
import { fmt, summarize, table } from "./stats.ts";
import { stepper } from "./stepper.ts";

const STEPS = 5000;
const QUICK = process.env.BENCH_QUICK === "1";
const RUNS = QUICK ? 3 : 15;
/** Group commit (decision 0026): PARALLEL tasks stepping at once, STEPS steps in all. */
const PARALLEL = 100;
/** Rounds of one raw run and one parallel run each, the order alternating (raw first, then parallel first). */
const PARALLEL_RUNS = QUICK ? 4 : 16;
/**
 * Parallel jobs run before the rounds, outside them (decision 0108): the single-task rounds before warm most of the
 * kernel but not the grouped path, whose first six jobs ran at 1.5–5× its later CPU a step (one warm-up job left the
 * first five rounds cold, against a raw commit warm since the first section).
 */
const PARALLEL_WARM = 8;

/**
 * The floor: what an app pays to commit the same bytes itself — one single-row UPDATE transaction per step,
 * on a plain table in the same kind of database, writing a JSON record as large as the task's.
 */
async function rawCommits(): Promise<number> {
  return (await rawCommitsMeasured(false)).ms;
}

/**
 * What a job costs beside its time, counts that do not follow the machine's load (decision 0108): the process's
 * minor page faults a step (memory the job grows into that no job before it touched, decision 0106) and the bytes
 * the collector freed a step while it ran (its garbage, less what was still uncollected at its end).
 */
interface JobCounts {
  ms: number;
  /** The process's CPU time (ms) over the same span: less bent than the wall clock by other processes' load. */
  cpuMs: number;
  faultsPerStep: number;
  freedBytesPerStep: number;
}

/** Starts counting a job; `collector`: with the collector's profile too (the parallel rounds', both sides). */
function countJob(collector = true): () => JobCounts {
  const profiler = collector ? new GCProfiler() : undefined;
  profiler?.start();
  const faults = process.resourceUsage().minorPageFault;
  const cpu = process.cpuUsage();
  const start = performance.now();
  return () => {
    const ms = performance.now() - start;
    const used = process.cpuUsage(cpu);
    const cpuMs = (used.user + used.system) / 1000;
    const faultsPerStep = (process.resourceUsage().minorPageFault - faults) / STEPS;
    let freed = 0;
    for (const gc of profiler?.stop()?.statistics ?? [])
      freed += gc.beforeGC.heapStatistics.usedHeapSize - gc.afterGC.heapStatistics.usedHeapSize;
    return { ms, cpuMs, faultsPerStep, freedBytesPerStep: freed / STEPS };
  };
}

async function rawCommitsMeasured(collector = true): Promise<JobCounts> {
  const db = await openSqliteDatabase({ vfs: "memory" });
  await db.exec("CREATE TABLE raw (id INTEGER PRIMARY KEY, record TEXT NOT NULL); INSERT INTO raw VALUES (1, '{}')");
  const record = {
    id: 2,
    conversationId: 1,
    kind: stepper.name,
    version: 1,
    input: { steps: STEPS },
    background: false,
    abortRequested: false,
    state: { status: "running", checkpoint: { phase: "step", n: 0 } },
    startedAt: Date.now(),
  };
  const counted = countJob(collector);
  for (let n = 0; n < STEPS; n++) {
    const text = JSON.stringify({ ...record, state: { status: "running", checkpoint: { phase: "step", n } } });
    await db.transaction((tx) => tx.run("UPDATE raw SET record = ? WHERE id = 1", text));
  }
  const job = counted();
  await db.close();
  return job;
}

async function kernelSteps(): Promise<number> {
  const storage: SqliteStorage = await openSqliteStorage({ vfs: "memory" });
  const registry = createRegistry().install(defineExtension({ name: "bench", tasks: [stepper] }));
  const harness = await Harness.open(storage, { registry }, ctx);
  const root = await harness.root(ctx);
  const id = await root.commit((tx) => tx.createTask(stepper, { steps: STEPS }), ctx);
  const start = performance.now();
  const done = await harness.waitForTask(id, ctx);
  const ms = performance.now() - start;
  if (done.state.status !== "terminal" || done.state.outcome.status !== "completed" || done.state.outcome.result !== STEPS) {
    throw new Error(`bench task did not complete: ${JSON.stringify(done.state)}`);
  }
  await harness.close(ctx);
  await storage.close();
  return ms;
}

/**
 * PARALLEL tasks of STEPS / PARALLEL steps each, created in one commit and stepping at once, through the public
 * API: ms from the create to the last terminal record, and the storage transactions that took.
 */
async function parallelSteps(): Promise<JobCounts & { transactions: number }> {
  const storage: SqliteStorage = await openSqliteStorage({ vfs: "memory" });
  const registry = createRegistry().install(defineExtension({ name: "bench", tasks: [stepper] }));
  const harness = await Harness.open(storage, { registry }, ctx);
  const root = await harness.root(ctx);
  let transactions = 0;
  const apply = storage.apply.bind(storage);
  storage.apply = (batch) => {
    transactions++;
    return apply(batch);
  };
  const steps = STEPS / PARALLEL;
  const counted = countJob();
  const ids = await root.commit((tx) => Array.from({ length: PARALLEL }, () => tx.createTask(stepper, { steps })), ctx);
  const done = await Promise.all(ids.map((id) => harness.waitForTask(id, ctx)));
  const job = counted();
  if (done.some((task) => task.state.status !== "terminal" || task.state.outcome.status !== "completed"))
    throw new Error("a parallel bench task did not complete");
  storage.apply = apply;
  await harness.close(ctx);
  await storage.close();
  return { ...job, transactions };
}

export async function benchKernel() {
  // Warm up the wasm module and the JIT once, outside the measured runs.
  await rawCommits();
  await kernelSteps();
  const raw: number[] = [];
  const kernel: number[] = [];
  for (let run = 0; run < RUNS; run++) {
    raw.push(await rawCommits());
    kernel.push(await kernelSteps());
  }
  for (let warm = 0; warm < PARALLEL_WARM; warm++) await parallelSteps();
  const parallel: Array<JobCounts & { transactions: number }> = [];
  const parallelRawJobs: JobCounts[] = [];
  for (let run = 0; run < PARALLEL_RUNS; run++) {
    // Raw first in even rounds, parallel first in odd ones: load that drifts during a round falls on both alike.
    if (run % 2 === 0) {
      parallelRawJobs.push(await rawCommitsMeasured());
      parallel.push(await parallelSteps());
    } else {
      parallel.push(await parallelSteps());
      parallelRawJobs.push(await rawCommitsMeasured());
    }
  }
  const parallelRaw = parallelRawJobs.map((job) => job.ms);
  const parallelRawRate = summarize(parallelRaw.map((ms) => (STEPS * 1000) / ms));
  const parallelRate = summarize(parallel.map((run) => (STEPS * 1000) / run.ms));
  const parallelRatio = parallelRate.median / parallelRawRate.median;
  const parallelPaired = summarize(parallel.map((run, index) => parallelRaw[index]! / run.ms));
  const parallelCpuPaired = summarize(parallel.map((run, index) => parallelRawJobs[index]!.cpuMs / run.cpuMs));
  const faults = summarize(parallel.map((job) => job.faultsPerStep));
  const rawFaults = summarize(parallelRawJobs.map((job) => job.faultsPerStep));
  const stepsPerTransaction = summarize(parallel.map((run) => STEPS / run.transactions));
  const rawSummary = summarize(raw.map((ms) => (ms * 1000) / STEPS));
  const kernelSummary = summarize(kernel.map((ms) => (ms * 1000) / STEPS));
  const ratio = kernelSummary.median / rawSummary.median;
  const paired = summarize(kernel.map((ms, run) => ms / raw[run]!));
  const result = {
    name: "kernel",
    environment: { node: process.version, sqlite: await sqliteVersion(), platform: `${process.platform}-${process.arch}` },
    steps: STEPS,
    runs: RUNS,
    rawCommitMicros: rawSummary,
    kernelStepMicros: kernelSummary,
    ratio,
    pairedRatios: paired,
    target: "kernel step ≤ 2.5× raw commit",
    meetsTarget: ratio <= 2.5,
    parallel: {
      tasks: PARALLEL,
      steps: STEPS,
      runs: PARALLEL_RUNS,
      rawCommitsPerSecond: parallelRawRate,
      kernelStepsPerSecond: parallelRate,
      ratio: parallelRatio,
      pairedRatios: parallelPaired,
      stepsPerTransaction,
      cpuPairedRatios: parallelCpuPaired,
      rawFaultsPerStep: rawFaults,
      faultsPerStep: faults,
      rawFreedBytesPerStep: summarize(parallelRawJobs.map((job) => job.freedBytesPerStep)),
      freedBytesPerStep: summarize(parallel.map((job) => job.freedBytesPerStep)),
      target: `${PARALLEL} parallel tasks: kernel steps/s ≥ 1× raw single commits/s (median of the rounds' ratios)`,
      meetsTarget: parallelPaired.median >= 1,
    },
  };
  const rows = [
    [
      "raw single-row UPDATE commit (same JSON size)",
      fmt(rawSummary.median),
      `${fmt(rawSummary.min)}–${fmt(rawSummary.max)}`,
      fmt(1e6 / rawSummary.median, 0),
      "1.00×",
    ],
    [
      "kernel step (checkpoint commit)",
      fmt(kernelSummary.median),
      `${fmt(kernelSummary.min)}–${fmt(kernelSummary.max)}`,
      fmt(1e6 / kernelSummary.median, 0),
      `${fmt(ratio, 2)}× (run by run: median ${fmt(paired.median, 2)}×, ${fmt(paired.min, 2)}–${fmt(paired.max, 2)}×)`,
    ],
    [
      `${PARALLEL} parallel tasks, steps/s (${fmt(stepsPerTransaction.median, 1)} steps per transaction)`,
      fmt(1e6 / parallelRate.median),
      `${fmt(1e6 / parallelRate.max)}–${fmt(1e6 / parallelRate.min)}`,
      fmt(parallelRate.median, 0),
      `${fmt(parallelPaired.median, 2)}× raw commits/s, round by round (${fmt(parallelPaired.min, 2)}–${fmt(parallelPaired.max, 2)}×; of the medians ${fmt(parallelRatio, 2)}×; CPU time ${fmt(parallelCpuPaired.median, 2)}×; minor faults a step ${fmt(faults.median, 3)}, raw ${fmt(rawFaults.median, 3)})`,
    ],
  ];
  const printed = table([`Node, sqlite-wasm memory, ${STEPS} steps`, "µs/op (median)", "min–max", "ops/s", "ratio"], rows);
  return { result, printed };
}

if (import.meta.url === `file://${process.argv[1]}`) {
  const { result, printed } = await benchKernel();
  console.log(printed);
  console.log(`\ntarget ≤ 2.5×: ${result.meetsTarget ? "met" : "NOT met"} (${fmt(result.ratio, 2)}×)`);
  writeFileSync(new URL("./results-kernel.json", import.meta.url), `${JSON.stringify(result, null, 2)}\n`);
}
