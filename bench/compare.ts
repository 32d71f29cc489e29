/**
 * `npm run bench:compare -- <ref> [--rounds N] [--browser]`: this working tree against an earlier commit, on the
 * same machine in the same minutes. A regression question ("is the kernel slower since <ref>?") cannot be
 * answered by two runs of `npm run bench` on different days: the shared test machine's speed moves more than
 * the code does (its OPFS commits were 2.5× slower on one day than on the day before, with the same code).
 *
 * The earlier commit is checked out in a worktree under .tmp/compare/ (sharing this tree's node_modules); the
 * two trees then take turns, round after round, in alternating order (A B, B A, …), running the same
 * benchmark scripts each tree has. Printed: each figure's median over the rounds on both sides and the ratio
 * current ÷ baseline. This tree's bench/results-*.json are left as they were.
 */
import { spawnSync } from "node:child_process";
import { existsSync, mkdirSync, readFileSync, rmSync, symlinkSync, writeFileSync } from "node:fs";
import { join } from "node:path";
import { fmt, summarize, table } from "./stats.ts";

const ROOT = new URL("..", import.meta.url).pathname;

interface Figure {
  bench: string;
  what: string;
  /** Reads the figure from the bench's JSON result. */
  read: (result: any) => number;
  unit: string;
}

interface Bench {
  name: string;
  /** The command, run in a tree's root. */
  args: string[];
  /** The JSON the command writes, relative to the tree's root. */
  output: string;
  figures: Figure[];
}

const kernel: Bench = {
  name: "kernel",
  args: ["tsx", "bench/bundled.ts", "kernel"],
  output: "bench/results-kernel.json",
  figures: [
    { bench: "kernel (Node)", what: "kernel step ÷ raw commit", read: (r) => r.ratio, unit: "×" },
    { bench: "kernel (Node)", what: "kernel step", read: (r) => r.kernelStepMicros.median, unit: " µs" },
    { bench: "kernel (Node)", what: "raw commit", read: (r) => r.rawCommitMicros.median, unit: " µs" },
    // Group commit (decision 0026); NaN for a baseline from before it.
    {
      bench: "kernel (Node)",
      what: "100 parallel tasks: steps/s ÷ raw commits/s",
      read: (r) => r.parallel?.ratio ?? Number.NaN,
      unit: "×",
    },
  ],
};

const agent: Bench = {
  name: "agent",
  args: ["tsx", "bench/bundled.ts", "agent"],
  output: "bench/results-agent.json",
  figures: [
    { bench: "agent (Node)", what: "per-call commit ÷ raw commit", read: (r) => median(r.perCallCommitRatio), unit: "×" },
    { bench: "agent (Node)", what: "commits per tool call", read: (r) => median(r.commitsPerToolCall), unit: "" },
  ],
};

const browser: Bench = {
  name: "browser",
  args: ["tsx", "bench/browser/ours.ts"],
  output: "bench/results-browser.json",
  figures: [
    { bench: "browser OPFS", what: "kernel step ÷ raw commit", read: (r) => r.kernel.ratio, unit: "×" },
    {
      bench: "browser OPFS",
      what: "kernel step ÷ raw commit, interleaved",
      read: (r) => r.kernel.interleaved?.ratio ?? Number.NaN,
      unit: "×",
    },
    {
      bench: "browser OPFS",
      what: "100 parallel tasks: steps/s ÷ raw commits/s",
      read: (r) => r.kernel.parallel?.ratio ?? Number.NaN,
      unit: "×",
    },
    {
      bench: "browser recovery",
      what: "over 100 MB of history ÷ 1 MB: the first resumed step",
      read: (r) => r.recovery.history?.ratio ?? Number.NaN,
      unit: "×",
    },
    {
      bench: "browser recovery",
      what: "10,000 sleeping: added to the first resumed step",
      read: (r) => r.recovery.addedBy10kOver1Ms.sleeping,
      unit: " ms",
    },
    {
      bench: "browser recovery",
      what: "10,000 running: added to the first resumed step",
      read: (r) => r.recovery.addedBy10kOver1Ms.stalled,
      unit: " ms",
    },
  ],
};

/** A figure the bench wrote either as a number or as a summary of runs. */
function median(value: number | { median: number }): number {
  return typeof value === "number" ? value : value.median;
}

function git(...args: string[]): string {
  const run = spawnSync("git", args, { cwd: ROOT, encoding: "utf8" });
  if (run.status !== 0) throw new Error(`git ${args.join(" ")}: ${run.stderr.trim()}`);
  return run.stdout.trim();
}

/** A worktree of `sha` under .tmp/compare/, made once and reused; it borrows this tree's installed packages. */
function worktree(sha: string): string {
  const dir = join(ROOT, ".tmp", "compare", sha.slice(0, 12));
  if (!existsSync(join(dir, "package.json"))) {
    rmSync(dir, { recursive: true, force: true });
    mkdirSync(join(ROOT, ".tmp", "compare"), { recursive: true });
    git("worktree", "add", "--detach", dir, sha);
  }
  for (const modules of ["node_modules", "bench/node_modules"]) {
    if (existsSync(join(ROOT, modules)) && !existsSync(join(dir, modules))) symlinkSync(join(ROOT, modules), join(dir, modules));
  }
  return dir;
}

function runIn(tree: string, bench: Bench): any {
  const run = spawnSync("npx", bench.args, { cwd: tree, encoding: "utf8", stdio: ["ignore", "pipe", "pipe"] });
  if (run.status !== 0) throw new Error(`${bench.name} in ${tree} failed:\n${run.stderr.slice(-2000)}`);
  return JSON.parse(readFileSync(join(tree, bench.output), "utf8"));
}

const argv = process.argv.slice(2);
const ref = argv.find((arg) => !arg.startsWith("--"));
if (!ref) {
  console.error("usage: npm run bench:compare -- <git ref> [--rounds N] [--browser]");
  process.exit(2);
}
const roundsAt = argv.indexOf("--rounds");
const rounds = roundsAt >= 0 ? Number(argv[roundsAt + 1]) : 5;
if (!Number.isInteger(rounds) || rounds < 1) {
  console.error(`--rounds takes a whole number ≥ 1, got ${argv[roundsAt + 1]}`);
  process.exit(2);
}
const benches = argv.includes("--browser") ? [kernel, agent, browser] : [kernel, agent];
const sha = git("rev-parse", "--verify", `${ref}^{commit}`);
const baselineTree = worktree(sha);
const trees = { baseline: baselineTree, current: ROOT };
const saved = new Map(
  benches.map((bench) => [bench.output, existsSync(join(ROOT, bench.output)) ? readFileSync(join(ROOT, bench.output)) : undefined]),
);

const values = new Map<string, { baseline: number[]; current: number[] }>();
try {
  for (let round = 0; round < rounds; round++) {
    const order = round % 2 === 0 ? (["baseline", "current"] as const) : (["current", "baseline"] as const);
    for (const bench of benches) {
      for (const side of order) {
        const result = runIn(trees[side], bench);
        for (const figure of bench.figures) {
          const key = `${figure.bench}\u0000${figure.what}`;
          const slot = values.get(key) ?? { baseline: [], current: [] };
          slot[side].push(figure.read(result));
          values.set(key, slot);
        }
      }
      process.stderr.write(`  round ${round + 1}/${rounds}: ${bench.name}\n`);
    }
  }
} finally {
  for (const [output, bytes] of saved) {
    if (bytes) writeFileSync(join(ROOT, output), bytes);
    else rmSync(join(ROOT, output), { force: true });
  }
}

const rows = benches.flatMap((bench) =>
  bench.figures.map((figure) => {
    const slot = values.get(`${figure.bench}\u0000${figure.what}`)!;
    const baseline = summarize(slot.baseline);
    const current = summarize(slot.current);
    const digits = figure.unit === "×" ? 2 : 1;
    const cell = (s: ReturnType<typeof summarize>) =>
      `${fmt(s.median, digits)}${figure.unit} (${fmt(s.min, digits)}–${fmt(s.max, digits)})`;
    return [figure.bench, figure.what, cell(baseline), cell(current), `${fmt(current.median / baseline.median, 2)}×`];
  }),
);
const head = git("rev-parse", "--short", "HEAD");
const dirty = git("status", "--porcelain", "--untracked-files=no") ? " + changes" : "";
console.log(
  table(["bench", "figure", `baseline ${sha.slice(0, 7)} (median, min–max)`, `current ${head}${dirty}`, "current ÷ baseline"], rows),
);
console.log(`\n${rounds} rounds, the two trees taking turns in alternating order; the same scripts on both sides.`);
