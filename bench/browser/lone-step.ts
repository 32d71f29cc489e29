/**
 * `npm run bench:lone-step`: only the browser's lone-step figures (issue 25 item 2, decision 0061), in a minute
 * rather than the whole `bench:browser`.
 *
 * - What a commit pays on OPFS, counted: the VFS's handle calls (writes, whole-page writes, flushes, reads, size
 *   reads), the statements and the bytes they bind, per raw commit and per kernel step (io-count.ts).
 * - The old figure, as `npm run bench:browser` measures it (`kernelVsRaw`: RUNS runs of 2,000, raw then kernel).
 * - The interleaved figure (`interleavedLoneStep`): many short rounds, the order of raw and kernel alternating.
 */
import { writeFileSync } from "node:fs";
import { loadavg } from "node:os";
import { join } from "node:path";
import { fmt, summarize } from "../stats.ts";
import { interleavedLoneStep, kernelVsRaw } from "./ours.ts";
import { buildPage, DIST, launchChromium, serveStatic } from "./support.ts";

const PROFILED = 2000;
/**
 * Counted rounds, raw and kernel taking turns first: the worker time outside the handle calls (the part of a commit
 * that is not the VFS's I/O) is the median over them, less at the mercy of the disk than the whole commit's time.
 */
const PROFILE_ROUNDS = 8;

export async function benchLoneStep() {
  await buildPage(new URL("./vite.config.ts", import.meta.url).pathname);
  const server = await serveStatic(join(DIST, "app"));
  const browser = await launchChromium();
  const load = [loadavg()[0]!];
  try {
    const page = await browser.newPage();
    const old = await kernelVsRaw(page, server.url);
    load.push(loadavg()[0]!);
    const interleaved = await interleavedLoneStep(page);
    load.push(loadavg()[0]!);
    const profiles = [];
    for (let round = 0; round < PROFILE_ROUNDS; round++)
      profiles.push(
        await page.evaluate(([n, kernelFirst]) => window.bench.kernel!.ioProfile(n, kernelFirst), [PROFILED, round % 2 === 1] as const),
      );
    const profile = profiles[0]!;
    const outside = (counts: typeof profile.raw) => ((counts.ms - counts.handleMs) * 1000) / PROFILED;
    const beyondIo = {
      rounds: PROFILE_ROUNDS,
      rawMicros: summarize(profiles.map((p) => outside(p.raw))),
      kernelMicros: summarize(profiles.map((p) => outside(p.kernel))),
      differenceMicros: summarize(profiles.map((p) => outside(p.kernel) - outside(p.raw))),
      handleMicros: {
        raw: summarize(profiles.map((p) => (p.raw.handleMs * 1000) / PROFILED)),
        kernel: summarize(profiles.map((p) => (p.kernel.handleMs * 1000) / PROFILED)),
      },
    };
    await page.close();
    const per = (counts: typeof profile.raw) => ({
      writes: counts.writes / PROFILED,
      pageWrites: counts.pageWrites / PROFILED,
      writeBytes: counts.writeBytes / PROFILED,
      writeSizes: counts.writeSizes,
      flushes: counts.flushes / PROFILED,
      reads: counts.reads / PROFILED,
      getSizes: counts.getSizes / PROFILED,
      truncates: counts.truncates / PROFILED,
      transactions: counts.transactions / PROFILED,
      portMessages: counts.portMessages / PROFILED,
      timers: counts.timers / PROFILED,
      statements: counts.statements / PROFILED,
      statementsOutside: counts.statementsOutside / PROFILED,
      boundBytes: counts.boundBytes / PROFILED,
      handleMicros: (counts.handleMs * 1000) / PROFILED,
      writeMicros: (counts.writeMs * 1000) / PROFILED,
      flushMicros: (counts.flushMs * 1000) / PROFILED,
      transactionMicros: (counts.transactionMs * 1000) / PROFILED,
      micros: (counts.ms * 1000) / PROFILED,
      sql: counts.sql,
    });
    return { load, old, interleaved, beyondIo, perCommit: { commits: PROFILED, raw: per(profile.raw), kernel: per(profile.kernel) } };
  } catch (error) {
    if (browser.logs.length) console.error(`browser log:\n  ${browser.logs.slice(-30).join("\n  ")}`);
    throw error;
  } finally {
    await browser.close();
    await server.close();
  }
}

if (import.meta.url === `file://${process.argv[1]}`) {
  const result = await benchLoneStep();
  const { old, interleaved, perCommit, load, beyondIo } = result;
  const line = (name: string, c: (typeof perCommit)["raw"]) =>
    `${name}: ${fmt(c.micros)} µs, ${fmt(c.transactionMicros)} µs from transaction() to its commit, ${fmt(c.handleMicros)} µs in handle calls (writes ${fmt(c.writeMicros)}, flushes ${fmt(c.flushMicros)}); per commit ${fmt(c.writes, 2)} writes (${fmt(c.pageWrites, 2)} whole pages, ${fmt(c.writeBytes, 0)} B), ${fmt(c.flushes, 3)} flushes, ${fmt(c.reads, 3)} reads, ${fmt(c.getSizes, 3)} size reads, ${fmt(c.truncates, 3)} truncates, ${fmt(c.portMessages, 3)} port messages, ${fmt(c.timers, 3)} timers; ${fmt(c.transactions, 3)} transactions, ${fmt(c.statements, 2)} statements in them (+ BEGIN, COMMIT), ${fmt(c.statementsOutside, 3)} outside, ${fmt(c.boundBytes, 0)} B bound`;
  console.log(line("raw commit", perCommit.raw));
  console.log(line("kernel step", perCommit.kernel));
  console.log(
    `  write sizes (bytes: count), raw ${JSON.stringify(perCommit.raw.writeSizes)}, kernel ${JSON.stringify(perCommit.kernel.writeSizes)}`,
  );
  console.log(`  raw statements: ${JSON.stringify(perCommit.raw.sql)}`);
  console.log(`  kernel statements: ${JSON.stringify(perCommit.kernel.sql)}`);
  console.log(
    `old figure (${old.runs} runs of ${old.steps}): raw ${fmt(old.rawCommitMicros.median)} µs, kernel ${fmt(old.kernelStepMicros.median)} µs: ${fmt(old.ratio, 2)}× by the medians, run by run ${fmt(old.pairedRatios.median, 2)}× (${fmt(old.pairedRatios.min, 2)}–${fmt(old.pairedRatios.max, 2)}×)`,
  );
  console.log(
    `interleaved (${interleaved.rounds} rounds of ${interleaved.steps}, order alternating): raw ${fmt(interleaved.rawCommitMicros.median)} µs, kernel ${fmt(interleaved.kernelStepMicros.median)} µs: ${fmt(interleaved.ratio, 2)}× by the medians, run by run ${fmt(interleaved.pairedRatios.median, 2)}× (${fmt(interleaved.pairedRatios.min, 2)}–${fmt(interleaved.pairedRatios.max, 2)}×)`,
  );
  console.log(
    `worker time outside the handle calls per commit (${beyondIo.rounds} counted rounds, order alternating; medians): raw ${fmt(beyondIo.rawMicros.median)} µs, kernel ${fmt(beyondIo.kernelMicros.median)} µs, kernel − raw ${fmt(beyondIo.differenceMicros.median)} µs (${fmt(beyondIo.differenceMicros.min)}–${fmt(beyondIo.differenceMicros.max)}); in the handle calls raw ${fmt(beyondIo.handleMicros.raw.median)} µs, kernel ${fmt(beyondIo.handleMicros.kernel.median)} µs`,
  );
  console.log(`load average (1 min) at start, after the old figure, after the interleaved one: ${load.map((l) => fmt(l, 2)).join(", ")}`);
  writeFileSync(new URL("../results-lone-step.json", import.meta.url), `${JSON.stringify(result, null, 2)}\n`);
}
