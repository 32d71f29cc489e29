/**
 * `npm run bench`: every benchmark in one run, one Markdown table, and bench/results.json (machine facts,
 * versions, every figure as median with min and max and its runs, the ratios and whether each target is met).
 *
 *   kernel   Node, sqlite-wasm in memory: kernel step vs raw commit              (bench/kernel.ts)
 *   agent    Node: commits and cost per tool call, if bench/agent.ts is there    (bench/agent.ts)
 *   browser  Chromium, OPFS: kernel step vs raw commit; reload → first resumed step with 1/1,000/10,000 live tasks; worker heap
 *   stream   Chromium: token → screen latency vs pi-ai in the page, updates/s, update cost and open time at 10/1,000/10,000 entries
 *   tabs     Chromium, the demo app: a follower tab's call round trip vs the leader's; leader tab closed → a follower leads with the recovered view
 *   peer     Chromium: the same 1,000-step job and the same reload, ours vs @coji/durably
 *   sizes    gzip bytes of the demo app's page and worker bundles, sqlite-wasm's own, and the peer's
 *   edge     workerd (miniflare): kernel step vs raw commit on one Durable Object; crash → first resumed step (bench/edge.ts)
 *   handover workerd + a Node tab on the follow link: release → the object's first step; effect-free steps mirrored vs not; round trips before an effect (bench/handover.ts)
 *
 * No figure is asserted: targets are reported as met or not. `BENCH_QUICK=1` runs fewer repetitions.
 */
import { execFileSync } from "node:child_process";
import { existsSync, readFileSync, writeFileSync } from "node:fs";
import { cpus, freemem, loadavg, platform, release, totalmem } from "node:os";
import { join } from "node:path";
import { benchBrowser, type Row, rowCells } from "./browser/ours.ts";
import { benchPeer, ensurePeer } from "./browser/peer.ts";
import { benchSizes } from "./browser/sizes.ts";
import { benchStream } from "./browser/stream.ts";
import { chromiumPath, ROOT } from "./browser/support.ts";
import { benchTabs } from "./browser/tabs.ts";
import { importBundled } from "./bundled.ts";
import { fmt, type Summary, table } from "./stats.ts";

const started = Date.now();
const loadAtStart = loadavg().map((load) => Math.round(load * 100) / 100);
const peerVersions = ensurePeer();
const sections: Record<string, unknown> = {};
const rows: Row[] = [];
const failures: Record<string, string> = {};

async function section(name: string, run: () => Promise<{ result: unknown; rows: Row[] }>): Promise<void> {
  const at = Date.now();
  process.stderr.write(`bench ${name}…\n`);
  try {
    const out = await run();
    sections[name] = out.result;
    rows.push(...out.rows);
    process.stderr.write(`bench ${name}: ${fmt((Date.now() - at) / 1000, 0)} s\n`);
  } catch (error) {
    failures[name] = error instanceof Error ? (error.stack ?? error.message) : String(error);
    process.stderr.write(`bench ${name} FAILED: ${failures[name]}\n`);
  }
}

const µs = (summary: Summary) => `${fmt(summary.median)} µs`;
const signed = (value: number) => `${value < 0 ? "−" : "+"}${fmt(Math.abs(value), 2)}`;
const range = (summary: Summary, unit = "µs", digits = 1) => `${fmt(summary.min, digits)}–${fmt(summary.max, digits)} ${unit}`;

await section("kernel", async () => {
  const { benchKernel } = await importBundled<typeof import("./kernel.ts")>("bench/kernel.ts");
  const { result } = await benchKernel();
  return {
    result,
    rows: [
      {
        bench: "kernel (Node, memory)",
        what: "raw single-row UPDATE commit",
        median: µs(result.rawCommitMicros),
        range: range(result.rawCommitMicros),
        ratio: "1.00×",
        target: "",
      },
      {
        bench: "kernel (Node, memory)",
        what: `kernel step (${result.steps.toLocaleString("en-US")} checkpoint commits)`,
        median: µs(result.kernelStepMicros),
        range: range(result.kernelStepMicros),
        ratio: `${fmt(result.ratio, 2)}× raw (run by run: median ${fmt(result.pairedRatios.median, 2)}×, ${fmt(result.pairedRatios.min, 2)}–${fmt(result.pairedRatios.max, 2)}×)`,
        target: `≤ 2.5× ${result.meetsTarget ? "✅" : "❌"}`,
      },
      {
        bench: "kernel (Node, memory)",
        what: `${result.parallel.tasks} parallel tasks stepping (group commit: ${fmt(result.parallel.stepsPerTransaction.median, 1)} steps per transaction)`,
        median: `${fmt(result.parallel.kernelStepsPerSecond.median, 0)} steps/s`,
        range: `${fmt(result.parallel.kernelStepsPerSecond.min, 0)}–${fmt(result.parallel.kernelStepsPerSecond.max, 0)} steps/s`,
        ratio: `${fmt(result.parallel.pairedRatios.median, 2)}× raw commits/s, round by round (${fmt(result.parallel.pairedRatios.min, 2)}–${fmt(result.parallel.pairedRatios.max, 2)}×; of the medians ${fmt(result.parallel.ratio, 2)}×)`,
        target: `≥ 1× ${result.parallel.meetsTarget ? "✅" : "❌"}`,
      },
    ],
  };
});

if (existsSync(join(ROOT, "bench/agent.ts"))) {
  await section("agent", async () => {
    const module = await importBundled<{ benchAgent?: () => Promise<{ result: Record<string, unknown>; printed: string }> }>(
      "bench/agent.ts",
    );
    if (typeof module.benchAgent !== "function") throw new Error("bench/agent.ts does not export benchAgent()");
    const { result, printed } = await module.benchAgent();
    return { result, rows: agentRows(result, printed) };
  });
}

await section("edge", async () => {
  const { benchEdge } = await import("./edge.ts");
  const result = await benchEdge();
  const bench = "edge (workerd, Durable Object)";
  const ms = (summary: Summary) => `${fmt(summary.median, 0)} ms`;
  return {
    result,
    rows: [
      {
        bench,
        what: "raw single-row UPDATE commit",
        median: µs(result.rawCommitMicros),
        range: range(result.rawCommitMicros),
        ratio: "1.00×",
        target: "",
      },
      {
        bench,
        what: "the same commit on the object's own API (transactionSync + sql.exec, no facade)",
        median: µs(result.directCommitMicros),
        range: range(result.directCommitMicros),
        ratio: `${fmt(result.directCommitMicros.median / result.rawCommitMicros.median, 2)}×`,
        target: "",
      },
      {
        bench,
        what: `kernel step (${result.steps.toLocaleString("en-US")} checkpoint commits)`,
        median: µs(result.kernelStepMicros),
        range: range(result.kernelStepMicros),
        ratio: `${fmt(result.ratio, 2)}× raw`,
        target: `≤ 2.5× ${result.meetsTarget ? "✅" : "❌"}`,
      },
      {
        bench,
        what: "ctx.abort() → first resumed step (next request starts the object)",
        median: ms(result.abortToFirstResumedStepMs),
        range: range(result.abortToFirstResumedStepMs, "ms", 0),
        ratio: "",
        target: "",
      },
      {
        bench,
        what: "eviction (workerd restarted) → first resumed step",
        median: ms(result.evictionToFirstResumedStepMs),
        range: range(result.evictionToFirstResumedStepMs, "ms", 0),
        ratio: "",
        target: "",
      },
    ],
  };
});

await section("handover", async () => {
  const { benchHandover } = await import("./handover.ts");
  const result = await benchHandover();
  const bench = "hand-over (workerd + Node tab)";
  return {
    result,
    rows: [
      {
        bench,
        what: `clean hand-over: release → the object's first step (${result.handovers} runs, p95 ${fmt(result.releaseToFirstStepMs.p95, 0)} ms)`,
        median: `${fmt(result.releaseToFirstStepMs.median, 0)} ms`,
        range: range(result.releaseToFirstStepMs, "ms", 0),
        ratio: "",
        target: `p95 < 500 ms ${result.meetsTarget ? "✅" : "❌"}`,
      },
      {
        bench,
        what: `effect-free step while mirroring (${result.steps.toLocaleString("en-US")} checkpoint commits, ${result.stepProcesses} processes × ${result.stepRuns / result.stepProcesses} runs, the jobs' order ${result.stepOrder}; no lease ${µs(result.plainStepMicros)}, fenced log without a link ${µs(result.fencedStepMicros)})`,
        median: µs(result.followStepMicros),
        range: range(result.followStepMicros),
        ratio: `${fmt(result.addedLatencyProcessRatio.median, 2)}× no lease (the processes' medians ${fmt(result.addedLatencyProcessRatio.min, 2)}–${fmt(result.addedLatencyProcessRatio.max, 2)}×, run by run ${fmt(result.addedLatencyRunRatio.min, 2)}–${fmt(result.addedLatencyRunRatio.max, 2)}×); ${fmt(result.mirroredOverFencedProcessRatio.median, 2)}× the fenced log (${fmt(result.mirroredOverFencedProcessRatio.min, 2)}–${fmt(result.mirroredOverFencedProcessRatio.max, 2)}×, ${signed(result.mirroredMinusFencedProcessMicros.median)} µs); the tab's CPU per step ${fmt(result.addedCpuRunRatio.median, 2)}× no lease, ${fmt(result.addedCpuRunRatio.min, 2)}–${fmt(result.addedCpuRunRatio.max, 2)}×`,
        target: `zero added ${result.meetsZeroAdded ? "✅" : "❌"}`,
      },
      {
        bench,
        what: `round trips per step before an effect (${result.effectSteps} steps; a step ${fmt(result.effectStepMs.median, 2)} ms)`,
        median: fmt(result.roundTripsBeforeEffect.median, 0),
        range: `max ${result.roundTripsBeforeEffect.max}; ${JSON.stringify(result.roundTripsBeforeEffect.histogram)}`,
        ratio: "",
        target: `one ${result.roundTripsBeforeEffect.median === 1 ? "✅" : "❌"}`,
      },
    ],
  };
});

await section("browser", () => benchBrowser());
await section("stream", () => benchStream());
await section("tabs", () => benchTabs());
await section("peer", () => benchPeer());
await section("sizes", () => benchSizes());

const printed = table(["bench", "what", "median", "min–max", "ratio", "target"], rows.map(rowCells));
const machine = machineFacts();
const results = {
  date: new Date(started).toISOString(),
  durationSeconds: Math.round((Date.now() - started) / 1000),
  machine,
  versions: versions(),
  notes: [
    "Each figure is the median of repeated runs (min, max and every run beside it); each ratio compares two figures measured in the same run.",
    "Nothing is asserted: targets are reported as met or not. The machine may be shared; compare ratios rather than absolute times.",
  ],
  ...sections,
  ...(Object.keys(failures).length ? { failures } : {}),
  table: printed,
};
writeFileSync(join(ROOT, "bench/results.json"), `${JSON.stringify(results, null, 2)}\n`);

console.log(`\n${machine.summary}\n`);
console.log(printed);
if (Object.keys(failures).length) {
  console.log(`\nFailed: ${Object.keys(failures).join(", ")} (details in bench/results.json)`);
  process.exitCode = 1;
}
console.log(`\nbench/results.json written (${fmt(results.durationSeconds / 60, 1)} min).`);

// ---------------------------------------------------------------------------------------------------------

function machineFacts() {
  const cpu = cpus();
  const facts = {
    platform: `${platform()} ${release()}`,
    cpu: cpu[0]?.model ?? "unknown",
    cores: cpu.length,
    memoryGiB: Math.round((totalmem() / 2 ** 30) * 10) / 10,
    freeMemoryGiBAtEnd: Math.round((freemem() / 2 ** 30) * 10) / 10,
    loadAverageAtStart: loadAtStart,
    loadAverageAtEnd: loadavg().map((load) => Math.round(load * 100) / 100),
  };
  const chromium = (sections.browser as { chromium?: string } | undefined)?.chromium ?? "unknown";
  return {
    ...facts,
    summary: `${facts.cpu}, ${facts.cores} cores, ${facts.memoryGiB} GiB, ${facts.platform}; Node ${process.version}; Chromium ${chromium}`,
  };
}

function versions() {
  const version = (name: string) => {
    try {
      return (JSON.parse(readFileSync(join(ROOT, "node_modules", name, "package.json"), "utf8")) as { version: string }).version;
    } catch {
      return "missing";
    }
  };
  const git = (args: string[]) => {
    try {
      return execFileSync("git", args, { cwd: ROOT, encoding: "utf8", stdio: ["ignore", "pipe", "ignore"] }).trim();
    } catch {
      return "unknown";
    }
  };
  const browser = sections.browser as { chromium?: string; settings?: { kernel?: unknown; sqlite?: string } } | undefined;
  return {
    node: process.version,
    chromium: browser?.chromium ?? "unknown",
    chromiumPath: chromiumPath(),
    sqlite: browser?.settings?.sqlite ?? "unknown",
    opfsJournal: browser?.settings?.kernel ?? "unknown",
    "@sqlite.org/sqlite-wasm": version("@sqlite.org/sqlite-wasm"),
    comlink: version("comlink"),
    vite: version("vite"),
    "playwright-core": version("playwright-core"),
    peer: peerVersions,
    commit: git(["rev-parse", "HEAD"]),
    uncommittedChanges: git(["status", "--porcelain"]).split("\n").filter(Boolean).length,
  };
}

/** Rows for bench/agent.ts's result; falls back to its own printed table if its fields change. */
function agentRows(result: Record<string, unknown>, printed: string): Row[] {
  const summary = (value: unknown): Summary | undefined =>
    value && typeof value === "object" && typeof (value as Summary).median === "number" ? (value as Summary) : undefined;
  const raw = summary(result.rawCommitMicros);
  const commits = summary(result.commitsPerToolCall);
  const perCall = summary((result.perCallCommitMicros as { median?: unknown } | undefined)?.median);
  const ratio = typeof result.perCallCommitRatio === "number" ? result.perCallCommitRatio : undefined;
  const calls = typeof result.toolCalls === "number" ? result.toolCalls : undefined;
  if (raw && commits && perCall && ratio !== undefined) {
    const bench = "agent (Node, memory)";
    return [
      { bench, what: "raw single-row UPDATE commit", median: µs(raw), range: range(raw), ratio: "1.00×", target: "" },
      {
        bench,
        what: `commits per tool call (${calls ?? "?"} parallel calls)`,
        median: fmt(commits.median, 2),
        range: range(commits, "", 2),
        ratio: "",
        target: `< 1 (fewer commits than calls) ${commits.median < 1 ? "✅" : "❌"}`,
      },
      {
        bench,
        what: "per-call commit (its share of a grouped transaction)",
        median: µs(perCall),
        range: range(perCall),
        ratio: `${fmt(ratio, 2)}× raw`,
        target: `≤ 3× ${ratio <= 3 ? "✅" : "❌"}`,
      },
    ];
  }
  // Unknown shape: carry its own table's rows over as they are.
  return printed
    .split("\n")
    .slice(2)
    .filter((line) => line.startsWith("|"))
    .map((line) =>
      line
        .split("|")
        .slice(1, -1)
        .map((cell) => cell.trim()),
    )
    .map((cells) => ({
      bench: "agent (Node, memory)",
      what: cells[0] ?? "",
      median: cells[1] ?? "",
      range: "",
      ratio: cells.slice(2).join("; "),
      target: "",
    }));
}
