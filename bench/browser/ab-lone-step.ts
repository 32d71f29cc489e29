/**
 * The lone step, two builds side by side (decision 0091): `npx tsx bench/browser/ab-lone-step.ts <baseline checkout>
 * [rounds] [steps]`. Builds the bench page from the baseline checkout (A: a worktree of an older commit, its
 * node_modules linked) and from this tree (B), serves each on an origin of its own (each its own OPFS), opens both in
 * one Chromium, warms both up, then runs `rounds` rounds: each runs `steps` raw commits and `steps` kernel steps on A
 * and on B, the four runs' order rotating round by round, one run at a time. Prints each side's medians, its
 * kernel ÷ raw (of the medians and round by round), B's kernel ÷ A's kernel round by round, and what does not depend
 * on load: per commit the statements, the VFS writes (whole pages) and flushes (io-count.ts) and the WAL frames. A
 * diagnostic, not part of `npm run bench`; the load average is printed with every figure.
 */
import { loadavg } from "node:os";
import type { Page } from "playwright-core";
import { fmt, summarize } from "../stats.ts";
import { buildPage, launchChromium, ROOT, serveStatic, waitInPage } from "./support.ts";

const baseDir = process.argv[2]!;
const rounds = Number(process.argv[3] ?? 12);
const STEPS = Number(process.argv[4] ?? 2000);
/**
 * `AB_SEQUENCE=1`: each round runs on each side (A then B, B then A the next round) what one run of `kernelVsRaw` runs
 * in `npm run bench` (raw, kernel, 100 parallel, fenced and written taking turns, the deferred ablation), and only the
 * raw and kernel runs are kept: the whole bench's "OPFS lone step" figure in its own surroundings.
 */
const SEQUENCE = process.env.AB_SEQUENCE === "1";
const OUT = `${ROOT}/.tmp/bench-ab-lone`;
const load = () => fmt(loadavg()[0]!, 2);

await buildPage(`${baseDir}/bench/browser/vite.config.ts`, { build: { outDir: `${OUT}/a`, emptyOutDir: true } });
await buildPage(`${ROOT}/bench/browser/vite.config.ts`, { build: { outDir: `${OUT}/b`, emptyOutDir: true } });
const servers = { A: await serveStatic(`${OUT}/a`), B: await serveStatic(`${OUT}/b`) };
const browser = await launchChromium();
try {
  const pages = {} as Record<"A" | "B", Page>;
  for (const side of ["A", "B"] as const) {
    const page = await browser.newPage();
    await page.goto(`${servers[side].url}?mode=kernel`);
    await waitInPage(page, () => window.bench?.kernel !== undefined);
    await page.evaluate((n) => window.bench.kernel!.rawCommits(n), STEPS);
    await page.evaluate((n) => window.bench.kernel!.kernelSteps(n), STEPS);
    pages[side] = page;
  }
  // Counted, not timed: per commit, both sides.
  for (const side of ["A", "B"] as const) {
    const page = pages[side];
    const frames = await page.evaluate((n) => window.bench.kernel!.walFramesPerCommit(n), 1000);
    const io = await page.evaluate((n) => window.bench.kernel!.ioProfile(n), STEPS);
    const per = (c: (typeof io)["raw"]) =>
      `${fmt(c.statements / STEPS, 3)} statements (+ BEGIN, COMMIT), ${fmt(c.writes / STEPS, 3)} writes (${fmt(c.pageWrites / STEPS, 3)} whole pages, ${fmt(c.writeBytes / STEPS, 0)} B), ${fmt(c.flushes / STEPS, 3)} flushes, ${fmt(c.reads / STEPS, 3)} reads, ${fmt(c.boundBytes / STEPS, 0)} B bound`;
    console.log(`${side} raw commit: ${per(io.raw)}; WAL frames ${fmt(frames.raw, 3)} (load ${load()})`);
    console.log(`${side} kernel step: ${per(io.kernel)}; WAL frames ${fmt(frames.kernel, 3)}; fenced ${fmt(frames.fenced, 3)}`);
    console.log(`${side} kernel statements: ${JSON.stringify(io.kernel.sql)}`);
  }
  const times: Record<string, number[]> = { "A raw": [], "A kernel": [], "B raw": [], "B kernel": [] };
  const runs = Object.keys(times);
  const outsideTimes: Record<string, number[]> = { "A raw": [], "A kernel": [], "B raw": [], "B kernel": [] };
  const loads: number[] = [];
  for (let round = 0; round < rounds && SEQUENCE; round++) {
    for (const side of (round % 2 ? ["B", "A"] : ["A", "B"]) as ("A" | "B")[]) {
      const r = await pages[side].evaluate((n) => window.bench.kernel!.rawCommits(n), STEPS);
      const s = await pages[side].evaluate((n) => window.bench.kernel!.kernelSteps(n), STEPS);
      await pages[side].evaluate((n) => window.bench.kernel!.parallelSteps(100, n), STEPS);
      await pages[side].evaluate(
        async ([n, fencedFirst]) => {
          const api = window.bench.kernel!;
          if (fencedFirst) {
            await api.fencedSteps(n);
            await api.fencedWrittenSteps(n);
          } else {
            await api.fencedWrittenSteps(n);
            await api.fencedSteps(n);
          }
          await api.fencedDeferredSteps(n);
        },
        [STEPS, round % 2 === 0] as const,
      );
      times[`${side} raw`]!.push((r.ms * 1000) / STEPS);
      times[`${side} kernel`]!.push((s.ms * 1000) / STEPS);
    }
    loads.push(loadavg()[0]!);
    process.stderr.write(`round ${round + 1} load ${load()}\n`);
  }
  for (let round = 0; round < rounds && !SEQUENCE; round++) {
    for (let k = 0; k < runs.length; k++) {
      const name = runs[(k + round) % runs.length]!;
      const [side, what] = name.split(" ") as ["A" | "B", "raw" | "kernel"];
      const { ms } = await pages[side].evaluate(
        ([w, n]) => (w === "raw" ? window.bench.kernel!.rawCommits(n) : window.bench.kernel!.kernelSteps(n)),
        [what, STEPS] as const,
      );
      times[name]!.push((ms * 1000) / STEPS);
    }
    // The worker time outside the VFS's handle calls (the commit's CPU beyond its I/O), counted runs, A and B in turns.
    for (const side of (round % 2 ? ["B", "A"] : ["A", "B"]) as ("A" | "B")[]) {
      const p = await pages[side].evaluate(([n, kf]) => window.bench.kernel!.ioProfile(n, kf), [STEPS, round % 2 === 1] as const);
      const outside = (c: (typeof p)["raw"]) => ((c.ms - c.handleMs) * 1000) / STEPS;
      outsideTimes[`${side} raw`]!.push(outside(p.raw));
      outsideTimes[`${side} kernel`]!.push(outside(p.kernel));
    }
    loads.push(loadavg()[0]!);
    process.stderr.write(`round ${round + 1} load ${load()}\n`);
  }
  const med = (name: string) => summarize(times[name]!).median;
  for (const name of runs) {
    const s = summarize(times[name]!);
    console.log(`${name.padEnd(9)} median ${fmt(s.median)} µs (${fmt(s.min)}–${fmt(s.max)})`);
  }
  const ratio = (a: string, b: string) => summarize(times[a]!.map((x, i) => x / times[b]![i]!));
  for (const side of ["A", "B"]) {
    const r = ratio(`${side} kernel`, `${side} raw`);
    console.log(
      `${side} kernel ÷ raw: ${fmt(med(`${side} kernel`) / med(`${side} raw`), 3)}× of the medians, round by round ${fmt(r.median, 3)}× (${fmt(r.min, 2)}–${fmt(r.max, 2)})`,
    );
  }
  for (const side of SEQUENCE ? [] : ["A", "B"]) {
    const d = summarize(outsideTimes[`${side} kernel`]!.map((x, i) => x - outsideTimes[`${side} raw`]![i]!));
    console.log(
      `${side} outside the handle calls: raw ${fmt(summarize(outsideTimes[`${side} raw`]!).median)} µs, kernel ${fmt(summarize(outsideTimes[`${side} kernel`]!).median)} µs, kernel − raw ${fmt(d.median)} µs (${fmt(d.min)}–${fmt(d.max)})`,
    );
  }
  const ok = summarize(outsideTimes["B kernel"]!.map((x, i) => x - (outsideTimes["A kernel"]![i] ?? Number.NaN)));
  if (!SEQUENCE)
    console.log(`outside the handle calls, B kernel − A kernel round by round ${fmt(ok.median)} µs (${fmt(ok.min)}–${fmt(ok.max)})`);
  const bk = ratio("B kernel", "A kernel");
  const br = ratio("B raw", "A raw");
  console.log(
    `B kernel ÷ A kernel round by round ${fmt(bk.median, 3)}× (${fmt(bk.min, 2)}–${fmt(bk.max, 2)}); B raw ÷ A raw ${fmt(br.median, 3)}×`,
  );
  console.log(`load average (1 min) over the rounds: ${fmt(Math.min(...loads), 2)}–${fmt(Math.max(...loads), 2)}`);
} finally {
  await browser.close();
  await servers.A.close();
  await servers.B.close();
}
