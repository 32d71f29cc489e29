/**
 * Streaming in Chromium (bench/browser/app/stream-page.ts + stream-worker.ts), with the default settings
 * (persistWithinMs 1000) and pi-ai's faux provider at 60 chunks a second:
 *
 * (a) token → screen: each chunk's time leaving the model stream in the worker to its text in the page's
 *     DOM, p50 and p95, next to the same faux stream rendered by pi-ai directly in the page (no harness).
 * (b) visible updates per second of the streamed answer.
 * (c) one streamed update's cost in a conversation of 10, 1,000 and 10,000 entries: the bytes of a live frame
 *     and of a commit's update sent to the page, the page's time to apply and render them; and a write's
 *     round trip (submit → its entry rendered: the commit, the worker's delta, the transfer, the page),
 *     measured in turns across one tab per size so that a busy moment of the machine falls on every size.
 * (d) opening the conversation in a reloaded tab: navigation start → the last page of entries rendered, the
 *     sizes' tabs reloaded in turns.
 */
import { join } from "node:path";
import type { Page } from "playwright-core";
import { fmt, type Summary, summarize } from "../stats.ts";
import type { StreamRun, UpdateCost } from "./app/stream-page.ts";
import type { Row } from "./ours.ts";
import { buildPage, DIST, launchChromium, serveStatic, waitInPage } from "./support.ts";

const QUICK = process.env.BENCH_QUICK === "1";
const RUNS = QUICK ? 2 : 5;
const OPENS = QUICK ? 3 : 7;
const WRITES = QUICK ? 15 : 60;
const SIZES = [10, 1000, 10_000];

const percentile = (values: number[], p: number) => {
  const sorted = [...values].sort((a, b) => a - b);
  return sorted[Math.min(sorted.length - 1, Math.floor((p / 100) * sorted.length))] ?? NaN;
};

interface Streamed {
  p50: number;
  p95: number;
  updatesPerSecond: number;
  runs: Array<{ p50: number; p95: number; updatesPerSecond: number }>;
}

function streamed(runs: StreamRun[]): Streamed {
  const all = runs.flatMap((run) => run.latencies);
  const perRun = runs.map((run) => ({
    p50: percentile(run.latencies, 50),
    p95: percentile(run.latencies, 95),
    updatesPerSecond: run.updates / (run.streamMs / 1000),
  }));
  return {
    p50: percentile(all, 50),
    p95: percentile(all, 95),
    updatesPerSecond: summarize(perRun.map((run) => run.updatesPerSecond)).median,
    runs: perRun,
  };
}

interface SizeFigures {
  entries: number;
  shownOnOpen: number;
  openMs: Summary;
  liveBytes: Summary;
  livePageMs: Summary;
  commitBytes: Summary;
  commitPageMs: Summary;
  writeToScreenMs: Summary;
  streamed: Streamed;
}

async function ready(page: Page) {
  await waitInPage(page, () => document.body.dataset.ready === "true");
}

/** Seeds a conversation of `entries` in its own pool (a tab of its own). */
async function seed(page: Page, baseUrl: string, entries: number): Promise<void> {
  await page.goto(`${baseUrl}?mode=stream&pool=pi-bench-stream-${entries}`);
  await ready(page);
  await page.evaluate((count) => window.streamBench!.seed(count), entries);
}

/** Reloads each size's tab in turns: navigation start → the last page of entries rendered. */
async function opensInTurn(pages: Page[]): Promise<Array<{ openMs: Summary; shownOnOpen: number }>> {
  const times: number[][] = pages.map(() => []);
  const shown: number[] = pages.map(() => 0);
  for (let trial = 0; trial < OPENS; trial++)
    for (const [index, page] of pages.entries()) {
      await page.reload();
      await ready(page);
      times[index]!.push((await waitInPage(page, () => window.streamBench!.openedMs)) as number);
      shown[index] = await page.evaluate(() => window.streamBench!.entriesShown());
    }
  return times.map((runs, index) => ({ openMs: summarize(runs), shownOnOpen: shown[index]! }));
}

/** Streams answers in one size's tab. */
async function streamIn(page: Page): Promise<Pick<SizeFigures, "liveBytes" | "livePageMs" | "commitBytes" | "commitPageMs" | "streamed">> {
  await page.evaluate(() => window.streamBench!.run()); // warm-up
  const runs: StreamRun[] = [];
  const costs: UpdateCost[] = [];
  for (let run = 0; run < RUNS; run++) {
    runs.push(await page.evaluate(() => window.streamBench!.run()));
    costs.push(...(await page.evaluate(() => window.streamBench!.costs())));
  }
  const of = (type: string) => costs.filter((cost) => cost.type === type);
  // One figure per update: results.json keeps their median and range, not every one.
  const brief = (values: number[]): Summary => ({ ...summarize(values), runs: [] });
  return {
    liveBytes: brief(of("live").map((cost) => cost.bytes)),
    livePageMs: brief(of("live").map((cost) => cost.pageMs)),
    commitBytes: brief(of("commit").map((cost) => cost.bytes)),
    commitPageMs: brief(of("commit").map((cost) => cost.pageMs)),
    streamed: streamed(runs),
  };
}

/** A write's round trip in each size's tab, in turns (after a few warm-up writes in each). */
async function writesInTurn(pages: Page[]): Promise<Summary[]> {
  const times: number[][] = pages.map(() => []);
  for (let write = -3; write < WRITES; write++)
    for (const [index, page] of pages.entries()) {
      const ms = await page.evaluate(() => window.streamBench!.writeToScreen());
      if (write >= 0) times[index]!.push(ms);
    }
  return times.map(summarize);
}

export async function benchStream() {
  await buildPage(new URL("./vite.config.ts", import.meta.url).pathname);
  const server = await serveStatic(join(DIST, "app"));
  const browser = await launchChromium();
  try {
    const page = await browser.newPage();
    await page.goto(`${server.url}?mode=direct`);
    await ready(page);
    await page.evaluate(() => window.streamBench!.run()); // warm-up
    const directRuns: StreamRun[] = [];
    for (let run = 0; run < RUNS; run++) directRuns.push(await page.evaluate(() => window.streamBench!.run()));
    const direct = streamed(directRuns);
    await page.close();
    const pages: Page[] = [];
    for (const entries of SIZES) {
      const tab = await browser.newPage();
      pages.push(tab);
      await seed(tab, server.url, entries);
    }
    const opens = await opensInTurn(pages);
    process.stderr.write("  stream: opened\n");
    const streams: Array<Awaited<ReturnType<typeof streamIn>>> = [];
    for (const [index, tab] of pages.entries()) {
      streams.push(await streamIn(tab));
      process.stderr.write(`  stream: streamed at ${SIZES[index]!.toLocaleString("en-US")} entries\n`);
    }
    const writes = await writesInTurn(pages);
    const sizes: SizeFigures[] = SIZES.map((entries, index) => ({
      entries,
      ...opens[index]!,
      ...streams[index]!,
      writeToScreenMs: writes[index]!,
    }));
    for (const tab of pages) await tab.close();
    return report(direct, sizes);
  } catch (error) {
    if (browser.logs.length) console.error(`browser log:\n  ${browser.logs.slice(-30).join("\n  ")}`);
    throw error;
  } finally {
    await browser.close();
    await server.close();
  }
}

function report(direct: Streamed, sizes: SizeFigures[]): { result: unknown; rows: Row[] } {
  const ours = sizes[0]!.streamed;
  const last = sizes.at(-1)!;
  const first = sizes[0]!;
  const ms = (value: number) => `${fmt(value, 1)} ms`;
  const latencyMet = ours.p95 <= direct.p95 + 16;
  const updatesMet = ours.updatesPerSecond >= 30;
  const costRatio = last.writeToScreenMs.median / first.writeToScreenMs.median;
  const bytesRatio = last.commitBytes.median / first.commitBytes.median;
  const openRatio = last.openMs.median / first.openMs.median;
  const bench = "browser streaming";
  const n = (entries: number) => entries.toLocaleString("en-US");
  const rows: Row[] = [
    {
      bench,
      what: "token → screen, pi-ai rendered directly in the page (no harness), p50 / p95",
      median: `${ms(direct.p50)} / ${ms(direct.p95)}`,
      range: "",
      ratio: "baseline",
      target: "",
    },
    {
      bench,
      what: "token → screen through the worker, persistWithinMs 1000, p50 / p95",
      median: `${ms(ours.p50)} / ${ms(ours.p95)}`,
      range: "",
      ratio: `p95 +${fmt(ours.p95 - direct.p95, 1)} ms`,
      target: `p95 ≤ baseline + 16 ms ${latencyMet ? "✅" : "❌"}`,
    },
    {
      bench,
      what: "visible updates per second of a streamed answer (60 chunks/s, defaults)",
      median: fmt(ours.updatesPerSecond, 1),
      range: "",
      ratio: "",
      target: `≥ 30 ${updatesMet ? "✅" : "❌"}`,
    },
    ...sizes.map((size) => ({
      bench,
      what: `one live frame, ${n(size.entries)} entries: bytes to the page; page apply + render`,
      median: `${fmt(size.liveBytes.median, 0)} B; ${ms(size.livePageMs.median)}`,
      range: `${fmt(size.liveBytes.min, 0)}–${fmt(size.liveBytes.max, 0)} B`,
      ratio: size === first ? "1.00×" : `${fmt(size.liveBytes.median / first.liveBytes.median, 2)}× bytes`,
      target: "",
    })),
    ...sizes.map((size) => ({
      bench,
      what: `one streamed commit's update, ${n(size.entries)} entries: bytes to the page; page apply + render`,
      median: `${fmt(size.commitBytes.median, 0)} B; ${ms(size.commitPageMs.median)}`,
      range: `${fmt(size.commitBytes.min, 0)}–${fmt(size.commitBytes.max, 0)} B`,
      ratio: size === first ? "1.00×" : `${fmt(size.commitBytes.median / first.commitBytes.median, 2)}× bytes`,
      target: size === last ? `≤ 1.5× ${bytesRatio <= 1.5 ? "✅" : "❌"}` : "",
    })),
    ...sizes.map((size) => ({
      bench,
      what: `a write → its entry on screen (commit, delta, page), ${n(size.entries)} entries, in turns`,
      median: ms(size.writeToScreenMs.median),
      range: `${fmt(size.writeToScreenMs.min, 1)}–${fmt(size.writeToScreenMs.max, 1)} ms`,
      ratio: size === first ? "1.00×" : `${fmt(size.writeToScreenMs.median / first.writeToScreenMs.median, 2)}×`,
      target: size === last ? `≤ 1.5× ${costRatio <= 1.5 ? "✅" : "❌"}` : "",
    })),
    ...sizes.slice(1).map((size) => ({
      bench,
      what: `token → screen at ${n(size.entries)} entries, p50 / p95`,
      median: `${ms(size.streamed.p50)} / ${ms(size.streamed.p95)}`,
      range: "",
      ratio: `p95 +${fmt(size.streamed.p95 - direct.p95, 1)} ms`,
      target: "",
    })),
    ...sizes.map((size) => ({
      bench,
      what: `reloaded tab → last page rendered (${n(size.shownOnOpen)} of ${n(size.entries)} entries)`,
      median: ms(size.openMs.median),
      range: `${fmt(size.openMs.min, 0)}–${fmt(size.openMs.max, 0)} ms`,
      ratio: size === first ? "1.00×" : `${fmt(size.openMs.median / first.openMs.median, 2)}×`,
      target: size === last ? `≤ 2× ${openRatio <= 2 ? "✅" : "❌"}` : "",
    })),
  ];
  return {
    result: {
      chunksPerSecond: 60,
      persistWithinMs: 1000,
      direct,
      sizes,
      targets: {
        latencyP95WithinBaselinePlus16: latencyMet,
        updatesPerSecondAtLeast30: updatesMet,
        writeCostRatio: costRatio,
        commitBytesRatio: bytesRatio,
        openRatio,
      },
    },
    rows,
  };
}

/** `npm run bench:stream`: this section alone; prints its table and writes bench/results-stream.json. */
if (import.meta.url === `file://${process.argv[1]}`) {
  const { writeFileSync } = await import("node:fs");
  const { rowCells } = await import("./ours.ts");
  const { table } = await import("../stats.ts");
  const { result, rows } = await benchStream();
  console.log(table(["bench", "what", "median", "min–max", "ratio", "target"], rows.map(rowCells)));
  writeFileSync(new URL("../results-stream.json", import.meta.url), `${JSON.stringify(result, null, 2)}\n`);
}
