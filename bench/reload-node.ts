/**
 * Reload → first resumed step in Node (sqlite-wasm in memory), the browser bench's shapes without the browser:
 * 10,000 `bench.stall` tasks running at the crash ("stalled", the default) or `bench.idle` ones asleep for a year
 * ("sleeping"), and the hot task (largest id) stepping.
 *
 *   npx tsx bench/reload-node.ts image <file> [live] [stalled|sleeping]   writes the crashed image
 *   npx tsx bench/reload-node.ts open <file>            one fresh-process open: prints JSON timings
 *   npx tsx bench/reload-node.ts again <file> <out>     opens <file>, waits for the first resumed step, writes the
 *                                                       crashed image to <out> (a second reload, as the browser
 *                                                       benches' later rounds: the stalled tasks' restarts grow)
 *
 * A fresh process per open is the reload's cold JIT. Timings are from the start of `Harness.open`; `cpuMs` is the
 * process's CPU time over the same span (decision 0054's A/B: old and new builds alternating).
 */
import { readFileSync, writeFileSync } from "node:fs";
import { performance } from "node:perf_hooks";
import { createRegistry, BACKGROUND_CONTEXT as ctx, Harness } from "../src/index.ts";
import { openSqliteStorage } from "../src/storage/sqlite/open-storage.ts";
import { benchExtension, firstCommittedStep, hot, idle, stall } from "./browser/app/tasks.ts";

const [mode, file, liveArg, variant = "stalled"] = process.argv.slice(2);
const registry = () => createRegistry().install(benchExtension);
const settings = { restartLimit: Infinity };

if (mode === "image") {
  const live = Number(liveArg ?? 10_000);
  const storage = await openSqliteStorage({ vfs: "memory" });
  const harness = await Harness.open(storage, { registry: registry(), settings, resume: true }, ctx);
  const root = await harness.root(ctx);
  for (let made = 0; made < live - 1; made += 1000)
    await root.commit((tx) => {
      for (let index = made; index < Math.min(live - 1, made + 1000); index++) tx.createTask(variant === "sleeping" ? idle : stall, {});
    }, ctx);
  for (;;) {
    const settled = variant === "sleeping" ? "sleeping" : "running";
    const [row] = await harness.query(`SELECT count(*) AS n FROM tasks WHERE status = '${settled}'`);
    if (Number(row?.n) >= live - 1) break;
    await new Promise((resolve) => setTimeout(resolve, 50));
  }
  await root.commit((tx) => tx.createTask(hot, {}), ctx);
  while (!firstCommittedStep()) await new Promise((resolve) => setTimeout(resolve, 10));
  await new Promise((resolve) => setTimeout(resolve, 50));
  writeFileSync(file!, await storage.exportImage()); // the crash: the harness is never closed
  process.exit(0);
} else if (mode === "again") {
  const storage = await openSqliteStorage({ vfs: "memory", image: new Uint8Array(readFileSync(file!)) });
  await Harness.open(storage, { registry: registry(), settings, resume: true }, ctx);
  while (!firstCommittedStep()) await new Promise((resolve) => setImmediate(resolve));
  await new Promise((resolve) => setTimeout(resolve, 300)); // the passes and the recount's slices after the step
  writeFileSync(liveArg!, await storage.exportImage()); // the crash: the harness is never closed
  process.exit(0);
} else {
  const image = new Uint8Array(readFileSync(file!));
  const storage = await openSqliteStorage({ vfs: "memory", image });
  const cpu = process.cpuUsage();
  const start = performance.now();
  await Harness.open(storage, { registry: registry(), settings, resume: true }, ctx);
  const opened = performance.now() - start;
  while (!firstCommittedStep()) await new Promise((resolve) => setImmediate(resolve));
  const used = process.cpuUsage(cpu);
  const first = firstCommittedStep()!;
  const step = first.at - performance.timeOrigin - start;
  // CPU time of the process (every thread, the collector's helpers too) up to the first step: less bent by the
  // machine's load than the wall clock.
  const cpuMs = Math.round((used.user + used.system) / 1000);
  console.log(
    JSON.stringify({ opened: Math.round(opened), firstStep: Math.round(step), cpuMs, kind: first.kind, stallsBefore: first.stallsBefore }),
  );
  process.exit(0);
}
