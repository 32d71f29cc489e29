/**
 * `npm run bench:browser`: the kernel in Chromium on OPFS (opfs-sahpool; locking_mode=EXCLUSIVE, WAL,
 * synchronous=NORMAL — the product's settings, applied by the adapter).
 *
 * (a) Kernel steps against raw commits: one task committing STEPS checkpoints, next to STEPS single-row
 *     UPDATE transactions of a JSON record as large as the task's, on the same VFS in the same worker.
 *     Median of RUNS alternating runs; the ratio is of the medians.
 *     Beside it (decision 0061), the same two measured in LONE_ROUNDS rounds with nothing else between them, raw
 *     first in one round and kernel first in the next (`interleavedLoneStep`); `npm run bench:lone-step` runs both
 *     alone, with what each commit writes and runs counted.
 * (b) Reload to first resumed step: a `serveHarness` worker with 1, 1,000 or 10,000 live tasks, one of
 *     them stepping as fast as it can. `page.reload()` is the crash; the figure is the time from the new
 *     document's navigation start to the commit of the hot task's first step in the new worker, both on the
 *     new page's clock. Two shapes of live work: "sleeping" (the others sleep; recovery loads them) and
 *     "stalled" (the others are running when the reload hits; recovery rewrites and restarts every one).
 *     Median of TRIALS reloads, the configurations taking turns in rounds (see `recoveries`).
 * (c) An effect-free step under a lease (issue 27, decision 0056): the same task's steps on a database of their own,
 *     every transaction fenced and logged under a lease from an arbiter in the worker (no link), taking turns with
 *     (a)'s runs; the ratio to (a)'s kernel step, of the medians and run by run. The product's storage: its task rows
 *     wait in memory, the log row is the step's only write (decision 0081). Beside it, the same with each step's
 *     task row written (deferring off, as before 0081), taking turns with the fenced run; decision 0076's deferred
 *     ablation (the bound, not crash-safe); and the WAL frames each kind of commit writes, counted.
 * Also: the worker's JS heap (CDP, after GC) with 1 and with 10,000 live tasks.
 */
import { writeFileSync } from "node:fs";
import { join } from "node:path";
import type { Page } from "playwright-core";
import { fmt, type Summary, summarize, table } from "../stats.ts";
import type { RecoveryTimeline } from "./app/main.ts";
import { buildPage, DIST, launchChromium, serveStatic, waitInPage, workerHeap } from "./support.ts";

const QUICK = process.env.BENCH_QUICK === "1";
/** `BENCH_KERNEL_ONLY=1`: section (a) and (c) alone (decision 0076), printed; no interleaved figure, no reloads, no file written. */
const KERNEL_ONLY = process.env.BENCH_KERNEL_ONLY === "1";
/** Decision 0076: steps per WAL-frame count (autocheckpoint off for them, outside the timed runs). */
const FRAME_STEPS = 1000;
const STEPS = 2000;
/** Group commit (decision 0026): this many tasks stepping at once, STEPS steps in all. */
const PARALLEL = 100;
const RUNS = QUICK ? 3 : 11;
/**
 * The interleaved lone-step figure (decision 0061): this many rounds of LONE_STEPS raw commits and LONE_STEPS kernel
 * steps, the order alternating round by round, so neither side always runs first (or right after the other runs).
 */
const LONE_ROUNDS = QUICK ? 6 : 24;
/**
 * 2,000 (as STEPS): a whole number of SQLite's automatic checkpoints (every 1,000 WAL frames, one frame a commit), so
 * a run does not take a checkpoint or not depending on where the last one left off. Runs of 500 did (range
 * 0.28–3.98× run by run on an idle machine).
 */
const LONE_STEPS = 2000;
/** Reloads per configuration: ROUNDS × PER_ROUND. */
const ROUNDS = QUICK ? 1 : 5;
const PER_ROUND = QUICK ? 3 : 2;
const TRIALS = ROUNDS * PER_ROUND;
const SIZES = [1, 1000, 10_000];
const VARIANTS = ["sleeping", "stalled"] as const;
type Variant = (typeof VARIANTS)[number] | "history";
/**
 * Decision 0027: one live task (the hot one) in a database with months of history — finished tasks and
 * entries the open must not read — at two sizes (about 1 MB and over 100 MB).
 */
const HISTORIES = QUICK
  ? [
      { finished: 2_000, entries: 500 },
      { finished: 20_000, entries: 5_000 },
    ]
  : [
      { finished: 2_000, entries: 500 },
      { finished: 230_000, entries: 60_000 },
    ];

export interface Row {
  bench: string;
  what: string;
  median: string;
  range: string;
  ratio: string;
  target: string;
}

export interface RecoveryFigures {
  live: number;
  variant: Variant;
  history?: { finished: number; entries: number; bytes: number };
  trials: number;
  /** Navigation start of the new document → the resumed step committed (ms, page clock). */
  firstStepMs: Summary;
  /** The worker's own span, reload by reload: its status `opening` (it took the database lock) → the resumed step
   *  committed (decision 0116: the page's and the worker's start, which do not grow with the database, are outside it). */
  workerSpanMs: Summary;
  /** Medians of the timeline's marks (ms since navigation start). */
  phases: Record<string, number>;
  /** Smallest and largest gap from the worker's commit stamp to the page hearing of it; a negative one would mean the clocks disagree. */
  clockCheckMs: { min: number; max: number };
  heapBytes?: Summary;
  wasmBytes?: number;
}

export async function benchBrowser() {
  return onBenchPage(async (page, baseUrl, version) => {
    const kernel = await kernelVsRaw(page, baseUrl);
    const lone = await interleavedLoneStep(page);
    // One live task is the hot one alone: the same for both shapes.
    const configs = VARIANTS.flatMap((variant) =>
      SIZES.filter((live) => variant === "sleeping" || live > 1).map((live): RecoveryConfig => ({ variant, live })),
    );
    for (const history of HISTORIES) configs.push({ variant: "history", live: 1, history });
    const recovery = await recoveries(page, baseUrl, configs);
    return report(version, { ...kernel, interleaved: lone }, recovery);
  });
}

/** `BENCH_KERNEL_ONLY=1`: sections (a) and (c) alone, their rows printed (decision 0076). */
async function benchKernelOnly(): Promise<string> {
  return onBenchPage(async (page, baseUrl) =>
    table(["bench", "what", "median", "min–max", "ratio", "target"], kernelRows(await kernelVsRaw(page, baseUrl)).map(rowCells)),
  );
}

/** Builds and serves the bench page, runs `body` on a page of a new Chromium (its last log lines printed if it throws), closes both. */
async function onBenchPage<T>(body: (page: Page, baseUrl: string, version: string) => Promise<T>): Promise<T> {
  await buildPage(new URL("./vite.config.ts", import.meta.url).pathname);
  const server = await serveStatic(join(DIST, "app"));
  const browser = await launchChromium();
  try {
    const page = await browser.newPage();
    const result = await body(page, server.url, browser.version);
    await page.close();
    return result;
  } catch (error) {
    if (browser.logs.length) console.error(`browser log:\n  ${browser.logs.slice(-30).join("\n  ")}`);
    throw error;
  } finally {
    await browser.close();
    await server.close();
  }
}

export async function kernelVsRaw(page: Page, baseUrl: string) {
  await page.goto(`${baseUrl}?mode=kernel`);
  await waitInPage(page, () => window.bench?.kernel !== undefined);
  const settings = await page.evaluate(() => window.bench.kernel!.settings());
  // Warm-up: wasm, JIT, OPFS files and WAL sized, outside the measured runs.
  await page.evaluate((steps) => window.bench.kernel!.rawCommits(steps), STEPS);
  await page.evaluate((steps) => window.bench.kernel!.kernelSteps(steps), STEPS);
  await page.evaluate((steps) => window.bench.kernel!.fencedSteps(steps), STEPS);
  await page.evaluate((steps) => window.bench.kernel!.fencedWrittenSteps(steps), STEPS);
  await page.evaluate((steps) => window.bench.kernel!.fencedDeferredSteps(steps), STEPS);
  await page.evaluate(([tasks, steps]) => window.bench.kernel!.parallelSteps(tasks, steps), [PARALLEL, STEPS] as const);
  const raw: number[] = [];
  const steps: number[] = [];
  const parallel: Array<{ ms: number; transactions: number }> = [];
  const fenced: number[] = [];
  const fencedWritten: number[] = [];
  const fencedDeferred: number[] = [];
  let bytes = { raw: 0, kernel: 0 };
  for (let run = 0; run < RUNS; run++) {
    const r = await page.evaluate((n) => window.bench.kernel!.rawCommits(n), STEPS);
    const k = await page.evaluate((n) => window.bench.kernel!.kernelSteps(n), STEPS);
    const p = await page.evaluate(([tasks, n]) => window.bench.kernel!.parallelSteps(tasks, n), [PARALLEL, STEPS] as const);
    // The fenced step and the same with each task row written take turns first (decisions 0076, 0081).
    const fencedRun = () => page.evaluate((n) => window.bench.kernel!.fencedSteps(n), STEPS);
    const writtenRun = () => page.evaluate((n) => window.bench.kernel!.fencedWrittenSteps(n), STEPS);
    let f: { ms: number };
    let s: { ms: number };
    if (run % 2 === 0) {
      f = await fencedRun();
      s = await writtenRun();
    } else {
      s = await writtenRun();
      f = await fencedRun();
    }
    const d = await page.evaluate((n) => window.bench.kernel!.fencedDeferredSteps(n), STEPS);
    fenced.push((f.ms * 1000) / STEPS);
    fencedWritten.push((s.ms * 1000) / STEPS);
    fencedDeferred.push((d.ms * 1000) / STEPS);
    raw.push((r.ms * 1000) / STEPS);
    steps.push((k.ms * 1000) / STEPS);
    parallel.push(p);
    bytes = { raw: r.recordBytes, kernel: k.recordBytes };
  }
  const rawCommitMicros = summarize(raw);
  const kernelStepMicros = summarize(steps);
  const ratio = kernelStepMicros.median / rawCommitMicros.median;
  // Each kernel run next to the raw run just before it: robust against load that drifts during the runs.
  const pairedRatios = summarize(steps.map((micros, run) => micros / raw[run]!));
  // Rates: PARALLEL tasks' steps per second over single raw commits per second, run by run and of the medians.
  const rawPerSecond = summarize(raw.map((micros) => 1e6 / micros));
  const parallelPerSecond = summarize(parallel.map((run) => (STEPS * 1000) / run.ms));
  const parallelRatio = parallelPerSecond.median / rawPerSecond.median;
  const parallelPaired = summarize(parallel.map((run, index) => (STEPS * 1000) / run.ms / (1e6 / raw[index]!)));
  const stepsPerTransaction = summarize(parallel.map((run) => STEPS / run.transactions));
  const fencedStepMicros = summarize(fenced);
  const fencedWrittenStepMicros = summarize(fencedWritten);
  const fencedDeferredStepMicros = summarize(fencedDeferred);
  // After the timed runs: the frame count turns the automatic checkpoint off while it counts.
  const walFrames = await page.evaluate((n) => window.bench.kernel!.walFramesPerCommit(n), FRAME_STEPS);
  return {
    steps: STEPS,
    runs: RUNS,
    settings,
    recordBytes: bytes,
    rawCommitMicros,
    kernelStepMicros,
    ratio,
    pairedRatios,
    target: "kernel step ≤ 1.2× raw commit",
    meetsTarget: ratio <= 1.2,
    parallel: {
      tasks: PARALLEL,
      rawCommitsPerSecond: rawPerSecond,
      kernelStepsPerSecond: parallelPerSecond,
      ratio: parallelRatio,
      pairedRatios: parallelPaired,
      stepsPerTransaction,
      target: `${PARALLEL} parallel tasks: kernel steps/s ≥ 2× raw single commits/s`,
      meetsTarget: parallelRatio >= 2,
    },
    fenced: {
      stepMicros: fencedStepMicros,
      ratio: fencedStepMicros.median / kernelStepMicros.median,
      pairedRatios: summarize(fenced.map((micros, run) => micros / steps[run]!)),
      target: "an effect-free step under a lease: zero added latency over a step with no lease (issue 27)",
    },
    fencedWritten: {
      stepMicros: fencedWrittenStepMicros,
      ratio: fencedWrittenStepMicros.median / kernelStepMicros.median,
      pairedRatios: summarize(fencedWritten.map((micros, run) => micros / steps[run]!)),
      toFenced: summarize(fencedWritten.map((micros, run) => micros / fenced[run]!)),
      note: "decision 0081's A/B: the fenced step with each step's task row written (deferTaskRows: false, the product before 0081)",
    },
    fencedDeferred: {
      stepMicros: fencedDeferredStepMicros,
      ratio: fencedDeferredStepMicros.median / kernelStepMicros.median,
      pairedRatios: summarize(fencedDeferred.map((micros, run) => micros / steps[run]!)),
      toFenced: summarize(fencedDeferred.map((micros, run) => micros / fenced[run]!)),
      note: "decision 0076's second ablation (bench worker only, not crash-safe): task-row writes skipped and run, with a metadata write, every 32nd commit",
    },
    walFrames: { steps: FRAME_STEPS, perCommit: walFrames },
  };
}

/**
 * A lone task's step against a raw commit, interleaved (decision 0061): LONE_ROUNDS rounds of LONE_STEPS each, raw
 * first in even rounds and kernel first in odd ones; the ratio of the medians and the median of each round's own
 * ratio. The same two measurements as `kernelVsRaw`'s first two (that figure stays as it was, beside this one).
 */
export async function interleavedLoneStep(page: Page) {
  const raw: number[] = [];
  const kernel: number[] = [];
  for (let round = 0; round < LONE_ROUNDS; round++) {
    const rawRun = () => page.evaluate((n) => window.bench.kernel!.rawCommits(n), LONE_STEPS);
    const kernelRun = () => page.evaluate((n) => window.bench.kernel!.kernelSteps(n), LONE_STEPS);
    let r: { ms: number };
    let k: { ms: number };
    if (round % 2 === 0) {
      r = await rawRun();
      k = await kernelRun();
    } else {
      k = await kernelRun();
      r = await rawRun();
    }
    raw.push((r.ms * 1000) / LONE_STEPS);
    kernel.push((k.ms * 1000) / LONE_STEPS);
  }
  const rawCommitMicros = summarize(raw);
  const kernelStepMicros = summarize(kernel);
  return {
    rounds: LONE_ROUNDS,
    steps: LONE_STEPS,
    rawCommitMicros,
    kernelStepMicros,
    ratio: kernelStepMicros.median / rawCommitMicros.median,
    pairedRatios: summarize(kernel.map((micros, round) => micros / raw[round]!)),
  };
}

interface RecoveryConfig {
  variant: Variant;
  live: number;
  history?: { finished: number; entries: number; bytes?: number };
}

function configUrl(baseUrl: string, { variant, live, history }: RecoveryConfig): string {
  const pool = `pi-bench-recovery-${variant}-${live}${history ? `-${history.finished}` : ""}`;
  const query = new URLSearchParams({ mode: "harness", path: "/recovery.sqlite3", pool });
  if (variant === "stalled") query.set("noRestartLimit", "1");
  return `${baseUrl}?${query}`;
}

/** Opens a configuration's database (each has a pool of its own), fills it, and leaves its hot task stepping. */
async function seed(page: Page, baseUrl: string, config: RecoveryConfig): Promise<void> {
  await page.goto(configUrl(baseUrl, config));
  await waitForHarness(page);
  if (config.history) {
    // Before the hot task: the rows take ids past the live ones (this worker's next id does not know of them,
    // and mints only the hot task's; the reload reads the largest id).
    const { finished, entries } = config.history;
    const { bytes } = await page.evaluate(([f, e]) => window.bench.client!.call<{ bytes: number }>("history", f, e), [
      finished,
      entries,
    ] as const);
    config.history.bytes = bytes;
  }
  const kind = config.variant === "history" ? "sleeping" : config.variant;
  await page.evaluate(([others, k]) => window.bench.client!.call("seed", others, k), [config.live - 1, kind] as const);
  await waitInPage(page, () => window.bench.firstStepSeen !== undefined);
}

/**
 * The configurations take turns, ROUNDS times: a round opens each one's page (unmeasured: it recovers
 * from the navigation away) and then reloads it PER_ROUND times, measured. Interleaving keeps a change in
 * the machine's load from landing on one configuration only.
 */
async function recoveries(page: Page, baseUrl: string, configs: RecoveryConfig[]): Promise<RecoveryFigures[]> {
  for (const config of configs) await seed(page, baseUrl, config);
  const timelines = configs.map(() => [] as RecoveryTimeline[]);
  const heaps = configs.map(() => [] as number[]);
  const wasm = configs.map(() => undefined as number | undefined);
  for (let round = 0; round < ROUNDS; round++) {
    for (const [index, config] of configs.entries()) {
      await page.goto(configUrl(baseUrl, config));
      await firstResumedStep(page, config);
      for (let trial = 0; trial < PER_ROUND; trial++) {
        await page.waitForTimeout(200); // the hot task is mid-stride when the reload hits
        await page.reload();
        timelines[index]!.push(await firstResumedStep(page, config));
        if (config.variant === "sleeping" && (config.live === 1 || config.live === 10_000)) {
          heaps[index]!.push((await workerHeap(page)).usedBytes);
          wasm[index] = await page.evaluate(() => window.bench.client!.call<number>("wasmBytes"));
        }
      }
    }
    process.stderr.write(`  recovery round ${round + 1}/${ROUNDS}\n`);
  }
  return configs.map((config, index) => ({
    ...figures(config, timelines[index]!, heaps[index]!, wasm[index]),
    ...(config.history ? { history: { ...config.history, bytes: config.history.bytes ?? NaN } } : {}),
  }));
}

async function firstResumedStep(page: Page, { variant, live }: RecoveryConfig): Promise<RecoveryTimeline> {
  await waitInPage(page, () => window.bench?.firstStepSeen !== undefined || window.bench?.status === "failed", 120_000);
  if ((await page.evaluate(() => window.bench.status)) === "failed")
    throw new Error(`the harness failed to open after a reload (${variant}, ${live})`);
  const timeline = await page.evaluate(() => window.bench.timeline!());
  if (timeline.firstStep?.kind !== "bench.hot")
    throw new Error(`the first resumed step was not the hot task's: ${JSON.stringify(timeline.firstStep)}`);
  const count = await page.evaluate(() => window.bench.client!.call<number>("liveTasks"));
  if (count !== live) throw new Error(`expected ${live} live tasks after recovery, found ${count}`);
  return timeline;
}

function figures(
  { variant, live }: RecoveryConfig,
  timelines: RecoveryTimeline[],
  heaps: number[],
  wasmBytes: number | undefined,
): RecoveryFigures {
  const median = (pick: (t: RecoveryTimeline) => number | null | undefined) => summarize(timelines.map((t) => pick(t) ?? NaN)).median;
  const gaps = timelines.map((t) => (t.firstStep!.seenByPage ?? NaN) - t.firstStep!.committed);
  return {
    live,
    variant,
    trials: timelines.length,
    firstStepMs: summarize(timelines.map((t) => t.firstStep!.committed)),
    workerSpanMs: summarize(timelines.map((t) => t.firstStep!.committed - (t.opening ?? NaN))),
    phases: {
      responseEnd: median((t) => t.responseEnd),
      scriptStart: median((t) => t.scriptStart),
      workerScript: median((t) => t.workerScript),
      opening: median((t) => t.opening),
      recovering: median((t) => t.recovering),
      ready: median((t) => t.ready),
      firstStep: median((t) => t.firstStep?.committed),
    },
    clockCheckMs: { min: Math.min(...gaps), max: Math.max(...gaps) },
    ...(heaps.length ? { heapBytes: summarize(heaps), wasmBytes } : {}),
  };
}

async function waitForHarness(page: Page): Promise<void> {
  const status = await waitInPage(
    page,
    () => (window.bench?.status === "ready" || window.bench?.status === "failed" ? window.bench.status : undefined),
    60_000,
  );
  if (status === "failed") throw new Error("the bench harness failed to open");
}

function report(
  chromium: string,
  kernel: Awaited<ReturnType<typeof kernelVsRaw>> & { interleaved: Awaited<ReturnType<typeof interleavedLoneStep>> },
  recovery: RecoveryFigures[],
) {
  const baseline = recovery.find((r) => r.live === 1)!;
  const [smallHistory, largeHistory] = recovery.filter((r) => r.variant === "history");
  const historyRatio = largeHistory!.firstStepMs.median / smallHistory!.firstStepMs.median;
  const added = Object.fromEntries(
    VARIANTS.map((variant) => {
      const big = recovery.find((r) => r.variant === variant && r.live === 10_000)!;
      return [variant, big.firstStepMs.median - baseline.firstStepMs.median];
    }),
  ) as Record<Variant, number>;
  const heapSmall = baseline.heapBytes!;
  const heapBig = recovery.find((r) => r.variant === "sleeping" && r.live === 10_000)!.heapBytes!;
  const memory = {
    live: 10_000,
    workerHeapBytes: heapBig,
    workerHeapBytesOneTask: heapSmall,
    perLiveTaskBytes: (heapBig.median - heapSmall.median) / (10_000 - 1),
    sqliteWasmHeapBytes: recovery.find((r) => r.variant === "sleeping" && r.live === 10_000)!.wasmBytes,
  };
  const result = {
    name: "browser",
    chromium,
    settings: kernel.settings,
    kernel,
    recovery: {
      trials: TRIALS,
      figures: recovery,
      addedBy10kOver1Ms: added,
      target: "10,000 live tasks add ≤ 150 ms to reload → first resumed step",
      meetsTarget: { sleeping: added.sleeping <= 150, stalled: added.stalled <= 150 },
      history: {
        small: smallHistory!.history,
        large: largeHistory!.history,
        ratio: historyRatio,
        target: "reload → first resumed step in a ≥ 100 MB database within 1.2× of a 1 MB one",
        meetsTarget: historyRatio <= 1.2,
      },
    },
    memory,
  };

  const mb = (bytes: number) => `${fmt(bytes / 1048576, 1)} MB`;
  const rows = kernelRows(kernel);
  for (const figure of recovery) {
    if (figure.history) {
      const large = figure === largeHistory;
      rows.push({
        bench: "browser recovery",
        what: `reload → first resumed step, 1 live task, ${figure.history.finished.toLocaleString("en-US")} finished tasks and ${figure.history.entries.toLocaleString("en-US")} entries (${mb(figure.history.bytes)})`,
        median: `${fmt(figure.firstStepMs.median, 0)} ms`,
        range: `${fmt(figure.firstStepMs.min, 0)}–${fmt(figure.firstStepMs.max, 0)} ms`,
        ratio: large ? `${fmt(historyRatio, 2)}× the ${mb(smallHistory!.history!.bytes)} one` : "baseline",
        target: large ? `≤ 1.2× ${historyRatio <= 1.2 ? "✅" : "❌"}` : "",
      });
      continue;
    }
    const isBig = figure.live === 10_000;
    const variantLabel = figure.live === 1 ? "" : figure.variant === "sleeping" ? ", others sleeping" : ", all running at the reload";
    rows.push({
      bench: "browser recovery",
      what: `reload → first resumed step, ${figure.live.toLocaleString("en-US")} live task${figure.live === 1 ? "" : "s"}${variantLabel}`,
      median: `${fmt(figure.firstStepMs.median, 0)} ms`,
      range: `${fmt(figure.firstStepMs.min, 0)}–${fmt(figure.firstStepMs.max, 0)} ms`,
      ratio: figure.live === 1 ? "baseline" : signedMs(figure.firstStepMs.median - baseline.firstStepMs.median),
      target: isBig ? `≤ +150 ms ${figure.firstStepMs.median - baseline.firstStepMs.median <= 150 ? "✅" : "❌"}` : "",
    });
    if (isBig)
      rows.push({
        bench: "browser recovery",
        what: `  of it, the worker's own span (opening → first step), ${figure.live.toLocaleString("en-US")}${variantLabel} (1 task ${fmt(baseline.workerSpanMs.median, 0)} ms)`,
        median: `${fmt(figure.workerSpanMs.median, 0)} ms`,
        range: `${fmt(figure.workerSpanMs.min, 0)}–${fmt(figure.workerSpanMs.max, 0)} ms`,
        ratio: signedMs(figure.workerSpanMs.median - baseline.workerSpanMs.median),
        target: "",
      });
  }
  rows.push({
    bench: "browser memory",
    what: "worker JS heap after GC, 10,000 live tasks (1 live task)",
    median: `${mb(heapBig.median)} (${mb(heapSmall.median)})`,
    range: `${mb(heapBig.min)}–${mb(heapBig.max)}`,
    ratio: `≈ ${fmt(memory.perLiveTaskBytes / 1024, 2)} KB per live task`,
    target: "",
  });
  return { result, rows, printed: table(["bench", "what", "median", "min–max", "ratio", "target"], rows.map(rowCells)) };
}

/** Sections (a) and (c)'s rows (the interleaved one when it was run), in the table's order. */
function kernelRows(
  kernel: Awaited<ReturnType<typeof kernelVsRaw>> & { interleaved?: Awaited<ReturnType<typeof interleavedLoneStep>> },
): Row[] {
  const lone = kernel.interleaved;
  const frames = kernel.walFrames.perCommit;
  return [
    {
      bench: "browser OPFS",
      what: `raw single-row UPDATE commit (${kernel.recordBytes.raw} B JSON)`,
      median: `${fmt(kernel.rawCommitMicros.median)} µs (${fmt(1e6 / kernel.rawCommitMicros.median, 0)}/s)`,
      range: `${fmt(kernel.rawCommitMicros.min)}–${fmt(kernel.rawCommitMicros.max)} µs`,
      ratio: "1.00×",
      target: "",
    },
    {
      bench: "browser OPFS",
      what: `kernel step (checkpoint commit, ${kernel.recordBytes.kernel} B record)`,
      median: `${fmt(kernel.kernelStepMicros.median)} µs (${fmt(1e6 / kernel.kernelStepMicros.median, 0)}/s)`,
      range: `${fmt(kernel.kernelStepMicros.min)}–${fmt(kernel.kernelStepMicros.max)} µs`,
      ratio: `${fmt(kernel.ratio, 2)}× raw (run by run: median ${fmt(kernel.pairedRatios.median, 2)}×, ${fmt(kernel.pairedRatios.min, 2)}–${fmt(kernel.pairedRatios.max, 2)}×)`,
      target: `≤ 1.2× ${kernel.meetsTarget ? "✅" : "❌"}`,
    },
    ...(lone
      ? [
          {
            bench: "browser OPFS",
            what: `kernel step, interleaved: ${lone.rounds} rounds of ${lone.steps.toLocaleString("en-US")}, raw and kernel taking turns first (raw ${fmt(lone.rawCommitMicros.median)} µs)`,
            median: `${fmt(lone.kernelStepMicros.median)} µs (${fmt(1e6 / lone.kernelStepMicros.median, 0)}/s)`,
            range: `${fmt(lone.kernelStepMicros.min)}–${fmt(lone.kernelStepMicros.max)} µs`,
            ratio: `${fmt(lone.ratio, 2)}× raw (run by run: median ${fmt(lone.pairedRatios.median, 2)}×, ${fmt(lone.pairedRatios.min, 2)}–${fmt(lone.pairedRatios.max, 2)}×)`,
            target: `≤ 1.2× ${lone.ratio <= 1.2 ? "✅" : "❌"}`,
          },
        ]
      : []),
    {
      bench: "browser OPFS",
      what: `${PARALLEL} parallel tasks stepping (group commit: ${fmt(kernel.parallel.stepsPerTransaction.median, 1)} steps per transaction)`,
      median: `${fmt(kernel.parallel.kernelStepsPerSecond.median, 0)} steps/s`,
      range: `${fmt(kernel.parallel.kernelStepsPerSecond.min, 0)}–${fmt(kernel.parallel.kernelStepsPerSecond.max, 0)} steps/s`,
      ratio: `${fmt(kernel.parallel.ratio, 2)}× raw commits/s (run by run: median ${fmt(kernel.parallel.pairedRatios.median, 2)}×, ${fmt(kernel.parallel.pairedRatios.min, 2)}–${fmt(kernel.parallel.pairedRatios.max, 2)}×)`,
      target: `≥ 2× ${kernel.parallel.meetsTarget ? "✅" : "❌"}`,
    },
    {
      bench: "browser OPFS",
      what: "kernel step under a lease (fenced and logged, no link; effect-free; its task row waits, decision 0081)",
      median: `${fmt(kernel.fenced.stepMicros.median)} µs`,
      range: `${fmt(kernel.fenced.stepMicros.min)}–${fmt(kernel.fenced.stepMicros.max)} µs`,
      ratio: `${fmt(kernel.fenced.ratio, 2)}× the step with no lease (run by run: median ${fmt(kernel.fenced.pairedRatios.median, 2)}×, ${fmt(kernel.fenced.pairedRatios.min, 2)}–${fmt(kernel.fenced.pairedRatios.max, 2)}×)`,
      target: "zero added latency",
    },
    ablationRow(
      "the same with each step's task row written (deferTaskRows: false: the product before decision 0081)",
      kernel.fencedWritten,
    ),
    ablationRow(
      "the same, task-row writes skipped and run with a metadata write every 32nd commit (decision 0076's ablation: the bound; not crash-safe, not a product path)",
      kernel.fencedDeferred,
    ),
    {
      bench: "browser OPFS",
      what: `WAL frames per commit, counted over ${kernel.walFrames.steps.toLocaleString("en-US")} (raw / step / fenced / fenced, task rows written / 0076's ablation)`,
      median: `${fmt(frames.raw, 2)} / ${fmt(frames.kernel, 2)} / ${fmt(frames.fenced, 2)} / ${fmt(frames.fencedWritten, 2)} / ${fmt(frames.fencedDeferred, 2)}`,
      range: "",
      ratio: `fenced ${fmt(frames.fenced / frames.kernel, 2)}× the step's frames`,
      target: "",
    },
  ];
}

/** A row beside the fenced step (its A/B, decision 0076's ablation): its time, to the step with no lease and to the fenced step. */
function ablationRow(what: string, figure: { stepMicros: Summary; ratio: number; pairedRatios: Summary; toFenced: Summary }): Row {
  return {
    bench: "browser OPFS",
    what,
    median: `${fmt(figure.stepMicros.median)} µs`,
    range: `${fmt(figure.stepMicros.min)}–${fmt(figure.stepMicros.max)} µs`,
    ratio: `${fmt(figure.ratio, 2)}× the step with no lease (run by run: median ${fmt(figure.pairedRatios.median, 2)}×; ${fmt(figure.toFenced.median, 2)}× the fenced step)`,
    target: "",
  };
}

function signedMs(ms: number): string {
  return `${ms < 0 ? "−" : "+"}${fmt(Math.abs(ms), 0)} ms`;
}

export function rowCells(row: Row): string[] {
  return [row.bench, row.what, row.median, row.range, row.ratio, row.target];
}

if (import.meta.url === `file://${process.argv[1]}` && KERNEL_ONLY) console.log(await benchKernelOnly());
else if (import.meta.url === `file://${process.argv[1]}`) {
  const { result, printed } = await benchBrowser();
  console.log(printed);
  writeFileSync(new URL("./results-browser.json", new URL("..", import.meta.url)), `${JSON.stringify(result, null, 2)}\n`);
}
