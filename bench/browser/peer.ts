/**
 * Ours against the peer a user would pick instead, `@coji/durably` (issue 6), in the same Chromium:
 *
 * - Throughput: the same job — 1,000 sequential durable steps, each a small JSON result — as a
 *   pi-durable-web task (`serveHarness` worker, OPFS sahpool) and as a durably job (its documented browser
 *   setup: SQLocal on OPFS, llms.md lease settings). Time from starting the job on the page to its
 *   completion on the page; steps/s; ratio of medians.
 * - Recovery: the same job with a side effect in every step (ours: memo first, then the effect; durably: the
 *   effect inside `step.run`), hung in step 501 right after that step's side effect, then `page.reload()`.
 *   Time from the new document's navigation start to step 501 committed, on the new page's clock. Afterwards,
 *   how many steps' side effects ran twice.
 *
 * The peer's packages live in bench/node_modules (bench/package.json); `ensurePeer()` installs them.
 */
import { spawnSync } from "node:child_process";
import { existsSync, readFileSync } from "node:fs";
import { join } from "node:path";
import type { Page } from "playwright-core";
import { fmt, type Summary, summarize } from "../stats.ts";
import type { Row } from "./ours.ts";
import { buildPage, DIST, launchChromium, ROOT, serveStatic, waitInPage } from "./support.ts";

const QUICK = process.env.BENCH_QUICK === "1";
const STEPS = 1000;
const CUT = 501;
const OURS_RUNS = QUICK ? 2 : 5;
const OURS_TRIALS = QUICK ? 2 : 5;
const PEER_RUNS = QUICK ? 1 : 3;
const PEER_TRIALS = QUICK ? 1 : 3;

const BENCH_DIR = join(ROOT, "bench");

/** The peer's version, installing bench/ (without install scripts: better-sqlite3's native build is for Node only) when missing. */
export function ensurePeer(): { durably: string; sqlocal: string; sqliteWasm: string; kysely: string; zod: string } {
  const manifest = join(BENCH_DIR, "node_modules/@coji/durably/package.json");
  if (!existsSync(manifest) || !existsSync(join(BENCH_DIR, "node_modules/sqlocal/package.json"))) {
    console.error("Installing the peer for the benchmark into bench/node_modules (npm ci --ignore-scripts)…");
    const result = spawnSync("npm", ["ci", "--ignore-scripts", "--no-audit", "--no-fund"], { cwd: BENCH_DIR, stdio: "inherit" });
    if (result.status !== 0) throw new Error(`npm ci in bench/ failed (exit ${result.status ?? result.signal})`);
  }
  const version = (name: string) =>
    (JSON.parse(readFileSync(join(BENCH_DIR, "node_modules", name, "package.json"), "utf8")) as { version: string }).version;
  return {
    durably: version("@coji/durably"),
    sqlocal: version("sqlocal"),
    sqliteWasm: version("@sqlite.org/sqlite-wasm"),
    kysely: version("kysely"),
    zod: version("zod"),
  };
}

interface PeerWindow {
  bench: {
    ready: boolean;
    error?: string;
    crossOriginIsolated?: boolean;
    initDone?: number;
    leasedAt?: number;
    steps: Record<string, number>;
    cutReached?: number;
    run(steps: number): Promise<number>;
    startCut(steps: number, tag: string, cut: number): Promise<string>;
    effects(tag: string, steps: number): number[];
  };
}

interface Side {
  name: string;
  throughputMs: Summary;
  stepsPerSecond: Summary;
  recoveryMs: Summary;
  /** Other marks of the recovery (medians, ms since navigation start). */
  recoveryPhases: Record<string, number>;
  /** Per trial: how many steps' side effects ran more than once / never. */
  ranTwice: number[];
  lost: number[];
  /** Per trial: which steps ran more than once. */
  twiceSteps: number[][];
}

export async function benchPeer() {
  const versions = ensurePeer();
  await buildPage(new URL("./vite.config.ts", import.meta.url).pathname);
  await buildPage(new URL("./vite.peer.config.mjs", import.meta.url).pathname);
  const oursServer = await serveStatic(join(DIST, "app"));
  const peerServer = await serveStatic(join(DIST, "peer"), { isolated: true });
  const browser = await launchChromium();
  try {
    const ours = await runOurs(await browser.newPage(), oursServer.url);
    process.stderr.write(`  ours: ${fmt(ours.stepsPerSecond.median, 0)} steps/s, recovery ${fmt(ours.recoveryMs.median, 0)} ms\n`);
    const peer = await runPeer(await browser.newPage(), peerServer.url);
    process.stderr.write(`  durably: ${fmt(peer.stepsPerSecond.median, 1)} steps/s, recovery ${fmt(peer.recoveryMs.median, 0)} ms\n`);
    return report(browser.version, versions, ours, peer);
  } catch (error) {
    if (browser.logs.length) console.error(`browser log:\n  ${browser.logs.slice(-30).join("\n  ")}`);
    throw error;
  } finally {
    await browser.close();
    await oursServer.close();
    await peerServer.close();
  }
}

async function runOurs(page: Page, baseUrl: string): Promise<Side> {
  await page.goto(`${baseUrl}?${new URLSearchParams({ mode: "harness", path: "/job.sqlite3", pool: "pi-bench-job" })}`);
  await waitInPage(page, () => window.bench?.status === "ready");
  const job = (steps: number) =>
    page.evaluate(async (n) => {
      const client = window.bench.client!;
      const started = performance.now();
      const id = await client.createTask("bench.job", { steps: n });
      const done = await client.waitForTask(id);
      if (done.state.status !== "terminal" || done.state.outcome.status !== "completed")
        throw new Error(`job ended ${JSON.stringify(done.state)}`);
      return performance.now() - started;
    }, steps);
  await job(STEPS); // warm-up
  const throughput: number[] = [];
  for (let run = 0; run < OURS_RUNS; run++) throughput.push(await job(STEPS));

  const recovery: number[] = [];
  const phases: Array<Record<string, number>> = [];
  const effects: number[][] = [];
  for (let trial = 0; trial < OURS_TRIALS; trial++) {
    const tag = `ours-${Date.now()}-${trial}`;
    await page.evaluate(
      async ([tag, steps, cut]) => {
        const client = window.bench.client!;
        window.bench.cut = client.armCrashPoint(`bench:after-effect-${cut}`).then((hit) => hit.taskId);
        await client.createTask("bench.job", { steps, effects: tag });
      },
      [tag, STEPS, CUT] as const,
    );
    const taskId = await page.evaluate(() => window.bench.cut!);
    await page.reload();
    await waitInPage(page, () => window.bench?.firstStepSeen !== undefined, 60_000);
    const timeline = await page.evaluate(() => window.bench.timeline!());
    const first = timeline.firstStep!;
    if (first.taskId !== taskId || first.step !== CUT)
      throw new Error(`expected step ${CUT} of task ${taskId} first, got ${JSON.stringify(first)}`);
    recovery.push(first.committed);
    phases.push({
      workerScript: timeline.workerScript,
      opening: timeline.opening ?? NaN,
      recovering: timeline.recovering ?? NaN,
      ready: timeline.ready ?? NaN,
    });
    await page.evaluate((id) => window.bench.client!.waitForTask(id), taskId);
    effects.push(await page.evaluate(([tag, steps]) => window.bench.client!.call<number[]>("effects", tag, steps), [tag, STEPS] as const));
  }
  await page.close();
  return side("pi-durable-web", throughput, recovery, phases, effects);
}

async function runPeer(page: Page, baseUrl: string): Promise<Side> {
  const ready = async () => {
    const state = await waitInPage(page, () => {
      const bench = (window as unknown as PeerWindow).bench;
      return bench?.ready || bench?.error ? { error: bench.error, isolated: bench.crossOriginIsolated } : undefined;
    });
    if (!state || state.error) throw new Error(`the durably page failed: ${state?.error}`);
    if (!state.isolated) throw new Error("the durably page is not cross-origin isolated; sqlocal's OPFS needs COOP/COEP");
  };
  await page.goto(`${baseUrl}?db=throughput.sqlite3`);
  await ready();
  await page.evaluate(() => (window as unknown as PeerWindow).bench.run(20)); // warm-up
  const throughput: number[] = [];
  for (let run = 0; run < PEER_RUNS; run++) {
    throughput.push(await page.evaluate((steps) => (window as unknown as PeerWindow).bench.run(steps), STEPS));
    process.stderr.write(`  durably run ${run + 1}/${PEER_RUNS}: ${fmt(throughput.at(-1)! / 1000)} s\n`);
  }

  const recovery: number[] = [];
  const phases: Array<Record<string, number>> = [];
  const effects: number[][] = [];
  for (let trial = 0; trial < PEER_TRIALS; trial++) {
    const tag = `durably-${Date.now()}-${trial}`;
    // A fresh database per trial: an unfinished run of an earlier trial would be resumed first.
    await page.goto(`${baseUrl}?db=recovery-${tag}.sqlite3`);
    await ready();
    await page.evaluate(([tag, steps, cut]) => (window as unknown as PeerWindow).bench.startCut(steps, tag, cut), [
      tag,
      STEPS,
      CUT,
    ] as const);
    await waitInPage(page, () => (window as unknown as PeerWindow).bench.cutReached !== undefined, 300_000, 50);
    await page.reload();
    await waitInPage(page, (name) => (window as unknown as PeerWindow).bench?.steps?.[name] !== undefined, 120_000, 20, `s${CUT}`);
    const marks = await page.evaluate((name) => {
      const bench = (window as unknown as PeerWindow).bench;
      return { step: bench.steps[name]!, initDone: bench.initDone ?? NaN, leased: bench.leasedAt ?? NaN };
    }, `s${CUT}`);
    recovery.push(marks.step);
    phases.push({ initDone: marks.initDone, leased: marks.leased });
    // Steps 1..CUT: those the reload cut at or before (later ones may still be running).
    effects.push(await page.evaluate(([tag, steps]) => (window as unknown as PeerWindow).bench.effects(tag, steps), [tag, CUT] as const));
    process.stderr.write(`  durably recovery ${trial + 1}/${PEER_TRIALS}: ${fmt(marks.step, 0)} ms\n`);
  }
  await page.goto("about:blank");
  await page.close();
  return side("@coji/durably", throughput, recovery, phases, effects);
}

function side(name: string, throughput: number[], recovery: number[], phases: Array<Record<string, number>>, counts: number[][]): Side {
  const keys = Object.keys(phases[0] ?? {});
  return {
    name,
    throughputMs: summarize(throughput),
    stepsPerSecond: summarize(throughput.map((ms) => (STEPS * 1000) / ms)),
    recoveryMs: summarize(recovery),
    recoveryPhases: Object.fromEntries(keys.map((key) => [key, summarize(phases.map((p) => p[key]!)).median])),
    ranTwice: counts.map((perStep) => perStep.slice(1).filter((count) => count > 1).length),
    lost: counts.map((perStep) => perStep.slice(1).filter((count) => count === 0).length),
    twiceSteps: counts.map((perStep) => perStep.flatMap((count, step) => (step > 0 && count > 1 ? [step] : []))),
  };
}

function report(chromium: string, versions: ReturnType<typeof ensurePeer>, ours: Side, peer: Side) {
  const throughputRatio = ours.stepsPerSecond.median / peer.stepsPerSecond.median;
  const recoveryRatio = ours.recoveryMs.median / peer.recoveryMs.median;
  const twice = (s: Side) => s.ranTwice.filter((n) => n > 0).length;
  const result = {
    name: "peer",
    chromium,
    peer: {
      ...versions,
      setup:
        "SQLocalKysely on OPFS (sqlocal's own VFS choice), createDurably({ pollingIntervalMs: 100, leaseRenewIntervalMs: 500, leaseMs: 3000 }) as in its docs/llms.md 'Browser Usage'; page served with COOP/COEP",
    },
    job: { steps: STEPS, result: "{ i }", cutInStep: CUT },
    ours,
    durably: peer,
    throughputRatio,
    recoveryRatio,
    targets: {
      throughput: { target: "≥ 100× the peer's steps/s", met: throughputRatio >= 100 },
      recovery: { target: "≤ 0.1× the peer's reload → step 501 time", met: recoveryRatio <= 0.1 },
      noStepTwice: {
        target: "no step's side effect runs twice (ours)",
        met: ours.ranTwice.every((n) => n === 0) && ours.lost.every((n) => n === 0),
      },
    },
  };
  const rows: Row[] = [
    {
      bench: "vs durably",
      what: `${STEPS.toLocaleString("en-US")} sequential steps, durably ${versions.durably} (SQLocal, OPFS)`,
      median: `${fmt(peer.stepsPerSecond.median, 1)} steps/s`,
      range: `${fmt(peer.stepsPerSecond.min, 1)}–${fmt(peer.stepsPerSecond.max, 1)}`,
      ratio: "1×",
      target: "",
    },
    {
      bench: "vs durably",
      what: `${STEPS.toLocaleString("en-US")} sequential steps, pi-durable-web (serveHarness, OPFS)`,
      median: `${fmt(ours.stepsPerSecond.median, 0)} steps/s`,
      range: `${fmt(ours.stepsPerSecond.min, 0)}–${fmt(ours.stepsPerSecond.max, 0)}`,
      ratio: `${fmt(throughputRatio, 0)}× durably`,
      target: `≥ 100× ${throughputRatio >= 100 ? "✅" : "❌"}`,
    },
    {
      bench: "vs durably",
      what: `reload in step ${CUT} → step ${CUT} committed, durably`,
      median: `${fmt(peer.recoveryMs.median, 0)} ms`,
      range: `${fmt(peer.recoveryMs.min, 0)}–${fmt(peer.recoveryMs.max, 0)} ms`,
      ratio: "1×",
      target: "",
    },
    {
      bench: "vs durably",
      what: `reload in step ${CUT} → step ${CUT} committed, pi-durable-web`,
      median: `${fmt(ours.recoveryMs.median, 0)} ms`,
      range: `${fmt(ours.recoveryMs.min, 0)}–${fmt(ours.recoveryMs.max, 0)} ms`,
      ratio: `${fmt(recoveryRatio, 3)}× durably`,
      target: `≤ 0.1× ${recoveryRatio <= 0.1 ? "✅" : "❌"}`,
    },
    {
      bench: "vs durably",
      what: `a step's side effect ran twice after the reload (trials with a double / trials)`,
      median: `ours ${twice(ours)}/${ours.ranTwice.length}, durably ${twice(peer)}/${peer.ranTwice.length}${doubled(peer)}`,
      range: `lost: ours ${sum(ours.lost)}, durably ${sum(peer.lost)}`,
      ratio: "",
      target: `ours never ${result.targets.noStepTwice.met ? "✅" : "❌"}`,
    },
  ];
  return { result, rows };
}

/** " (step 501)" when the doubled steps were always the same ones. */
function doubled(s: Side): string {
  const steps = [...new Set(s.twiceSteps.flat())];
  return steps.length === 0 ? "" : ` (step${steps.length > 1 ? "s" : ""} ${steps.join(", ")})`;
}

function sum(values: number[]): number {
  return values.reduce((total, value) => total + value, 0);
}
