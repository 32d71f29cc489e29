#!/usr/bin/env node
/**
 * What a Workers developer runs, proven on every `npm test`: Node 22 and wrangler from the npm registry
 * (scripts/ensure-wrangler.mjs, cached), examples/worker-app copied into .tmp/worker-app with the packed
 * tarball installed (run scripts/test-package.mjs first), then
 *
 * 1. `wrangler types`, and the Worker type-checked under the Workers types it wrote with skipLibCheck off,
 *    so the package's .d.ts are checked too; a program that reaches Node's types (@types/node, through
 *    pi-ai's provider SDKs, as the package's .d.ts once did) fails, naming who imports them;
 * 2. `wrangler deploy --dry-run --outdir`: the bundle's size, raw and gzip -9, into .tmp/wrangler-size.json
 *    (the bench's size table reads it);
 * 3. `wrangler dev` on a free loopback port with `--persist-to` a temporary directory: a counter to 4 starts,
 *    wrangler and its workerd are killed with SIGKILL right after `tick 2`, wrangler starts again on the same
 *    directory, and — with no request — the counter's alarm resumes it: tick 3 and tick 4 follow, and no line
 *    is printed twice.
 *
 *   node scripts/test-wrangler.mjs               // all three; counts into .tmp/results-wrangler.json
 *   node scripts/test-wrangler.mjs --size-only   // only the dry run (packs the tarball afresh first): the bench
 */
import { spawn, spawnSync } from "node:child_process";
import { cpSync, existsSync, mkdirSync, mkdtempSync, readdirSync, readFileSync, rmSync, writeFileSync } from "node:fs";
import { createServer } from "node:net";
import { tmpdir } from "node:os";
import { join } from "node:path";
import { gzipSync } from "node:zlib";
import { ensureWranglerTools, NODE_VERSION, WRANGLER_VERSION } from "./ensure-wrangler.mjs";

const root = new URL("..", import.meta.url).pathname;
const source = join(root, "examples", "worker-app");
const app = join(root, ".tmp", "worker-app");
const packDir = join(root, ".tmp", "package");
export const SIZE_FILE = join(root, ".tmp", "wrangler-size.json");

function fail(message, output = "") {
  if (output) process.stdout.write(output.endsWith("\n") ? output : `${output}\n`);
  console.error(`test-wrangler: ${message}`);
  process.exit(1);
}

/** Runs a command in the app copy; exits when it fails. Returns what it printed. */
function run(command, args, env = {}) {
  const result = spawnSync(command, args, {
    cwd: app,
    encoding: "utf8",
    env: { ...process.env, ...env },
    stdio: ["ignore", "pipe", "pipe"],
  });
  const output = `${result.stdout ?? ""}${result.stderr ?? ""}`;
  if (result.status !== 0) fail(`${command} ${args.join(" ")} failed in ${app} (exit ${result.status ?? result.signal}).`, output);
  return output;
}

function freePort() {
  return new Promise((resolve, reject) => {
    const server = createServer().listen(0, "127.0.0.1", () => {
      const { port } = server.address();
      server.close(() => resolve(port));
    });
    server.on("error", reject);
  });
}

const pause = (ms) => new Promise((resolve) => setTimeout(resolve, ms));

/** Prepares .tmp/worker-app: the example's files, the packed tarball installed. Returns the tools. */
export function prepareWorkerApp() {
  const tarball = existsSync(packDir) ? readdirSync(packDir).find((name) => name.endsWith(".tgz")) : undefined;
  if (!tarball) fail(`No tarball in ${packDir}: run "node scripts/test-package.mjs" first.`);
  const tools = ensureWranglerTools();
  // A fresh copy of the app's files; node_modules stays between runs (installs are then quick and offline).
  mkdirSync(app, { recursive: true });
  for (const name of readdirSync(app)) if (name !== "node_modules") rmSync(join(app, name), { recursive: true, force: true });
  cpSync(source, app, { recursive: true, filter: (path) => !/[/](node_modules|dist|\.wrangler)([/]|$)/.test(path) });
  rmSync(join(app, "node_modules", "pi-durable-web"), { recursive: true, force: true });
  run("npm", ["install", "--no-audit", "--no-fund", "--prefer-offline", "--loglevel=error", join(packDir, tarball)]);
  return tools;
}

/** Environment for wrangler: Node 22 first on PATH, no telemetry, no prompts. */
function wranglerEnv(tools) {
  return { PATH: `${join(tools.dir, "node", "bin")}:${process.env.PATH}`, WRANGLER_SEND_METRICS: "false", CI: "1", NO_COLOR: "1" };
}

/** `wrangler deploy --dry-run` into .tmp/worker-app/dist; returns the bundle's sizes (and writes SIZE_FILE). */
export function dryRunSize(tools) {
  const outdir = join(app, "dist");
  rmSync(outdir, { recursive: true, force: true });
  run(tools.node, [tools.wrangler, "deploy", "--dry-run", "--outdir", outdir], wranglerEnv(tools));
  const bundle = readFileSync(join(outdir, "index.js"));
  const size = {
    what: "examples/worker-app on the packed package (wrangler deploy --dry-run, no nodejs_compat)",
    wrangler: WRANGLER_VERSION,
    node: NODE_VERSION,
    bytes: bundle.byteLength,
    gzip: gzipSync(bundle, { level: 9 }).byteLength,
  };
  writeFileSync(SIZE_FILE, `${JSON.stringify(size, null, 2)}\n`);
  return size;
}

/** One `wrangler dev`, its output collected; `kill()` ends it and its workerd at once (SIGKILL to its group). */
async function startDev(tools, persist) {
  const port = await freePort();
  const child = spawn(
    tools.node,
    [
      tools.wrangler,
      "dev",
      "--ip",
      "127.0.0.1",
      "--port",
      String(port),
      "--persist-to",
      persist,
      "--var",
      "TICK_MS:1000",
      "--show-interactive-dev-session=false",
    ],
    { cwd: app, env: { ...process.env, ...wranglerEnv(tools) }, stdio: ["ignore", "pipe", "pipe"], detached: true },
  );
  let output = "";
  const collect = (chunk) => void (output += chunk.toString());
  child.stdout.on("data", collect);
  child.stderr.on("data", collect);
  let exited = false;
  child.on("exit", () => void (exited = true));
  const dev = {
    url: `http://127.0.0.1:${port}`,
    output: () => output,
    ticks: () => [...output.matchAll(/\btick (\d+)\b/g)].map((match) => Number(match[1])),
    async until(done, what, ms = 90_000) {
      for (let waited = 0; waited < ms && !done(); waited += 100) {
        if (exited) fail(`wrangler dev exited while waiting for ${what}.`, output);
        await pause(100);
      }
      if (!done()) fail(`wrangler dev never showed ${what} within ${ms / 1000} s.`, output);
    },
    async kill() {
      try {
        process.kill(-child.pid, "SIGKILL");
      } catch {
        // already gone
      }
      for (let i = 0; i < 100 && !exited; i++) await pause(50);
    },
  };
  await dev.until(() => /Ready on http/.test(output), "Ready on …");
  return dev;
}

/** The hard kill mid-task and the restart on the same persist directory. */
export async function devSmoke(tools) {
  const persist = mkdtempSync(join(tmpdir(), "pi-durable-wrangler-"));
  let first;
  let second;
  try {
    first = await startDev(tools, persist);
    const started = await fetch(`${first.url}/smoke/start?to=4`);
    if (!started.ok) fail(`POST /smoke/start answered ${started.status}: ${await started.text()}`, first.output());
    const { id } = await started.json();
    await first.until(() => first.ticks().includes(2), "tick 2");
    await first.kill(); // mid-task: the counter sleeps towards tick 3, its alarm set
    const before = first.ticks();

    second = await startDev(tools, persist);
    // No request: only the object's alarm can bring the counter on.
    await second.until(() => second.ticks().includes(4), "tick 4 after the restart (resumed by the alarm, no request)");
    const after = second.ticks();
    const task = await (await fetch(`${second.url}/smoke/task?id=${id}`)).json();
    const all = [...before, ...after];
    const twice = all.filter((n, i) => all.indexOf(n) !== i);
    if (twice.length > 0) fail(`printed twice: tick ${twice.join(", ")} (before the kill ${before}, after ${after})`);
    if (all.sort().join() !== "1,2,3,4") fail(`expected tick 1..4 once each, got before the kill ${before}, after ${after}`);
    if (after.length === 0) fail("nothing resumed after the restart");
    if (task.task?.state?.outcome?.status !== "completed") fail(`the task did not complete: ${JSON.stringify(task)}`);
    return { before, after, restarts: task.task.restarts ?? 0 };
  } finally {
    await first?.kill();
    await second?.kill();
    rmSync(persist, { recursive: true, force: true });
  }
}

if (import.meta.url === `file://${process.argv[1]}` && process.argv.includes("--size-only")) {
  // Always packs afresh: a tarball left in .tmp/package by an earlier run is the code of that run (the bench's size
  // row read the same stale 706,830 bytes over seven commits before this).
  const packed = spawnSync("node", [join(root, "scripts", "test-package.mjs")], { cwd: root, stdio: ["ignore", "ignore", "inherit"] });
  if (packed.status !== 0) process.exit(packed.status ?? 1);
  console.log(JSON.stringify(dryRunSize(prepareWorkerApp())));
} else if (import.meta.url === `file://${process.argv[1]}`) {
  const tools = prepareWorkerApp();
  const env = wranglerEnv(tools);
  run(tools.node, [tools.wrangler, "types"], env);
  const generated = readFileSync(join(app, "worker-configuration.d.ts"), "utf8");
  if (!/COUNTER: DurableObjectNamespace<import\("\.\/src\/index"\)\.CounterObject>/.test(generated)) {
    fail("wrangler types did not type COUNTER as the CounterObject namespace.");
  }
  // Node's globals clash with the Workers types: none of the package's .d.ts may bring them in.
  const tsc = join(app, "node_modules", ".bin", "tsc");
  if (/node_modules\/@types\/node\//.test(run(tsc, ["-p", "tsconfig.json", "--listFilesOnly"]))) {
    const why = spawnSync(tsc, ["-p", "tsconfig.json", "--explainFiles", "--noEmit"], { cwd: app, encoding: "utf8" }).stdout ?? "";
    const lines = why.split("\n");
    const at = lines.findIndex((line) => /node_modules\/@types\/node\//.test(line));
    fail(`the Worker's program reaches @types/node (Node's globals clash with the Workers types):\n${lines.slice(at, at + 6).join("\n")}`);
  }
  run(tsc, ["-p", "tsconfig.json"]);
  const size = dryRunSize(tools);
  const smoke = await devSmoke(tools);
  // Three checks (types + strict typecheck, the dry run, the dev smoke) for the closing line of `npm test`.
  writeFileSync(join(root, ".tmp", "results-wrangler.json"), `${JSON.stringify({ numPassedTests: 3, numFailedTests: 0 })}\n`);
  console.log(
    `wrangler ${WRANGLER_VERSION} on Node ${NODE_VERSION}: types + typecheck (strict, skipLibCheck off, no @types/node in the program) clean; deploy --dry-run ${(size.bytes / 1024).toFixed(1)} KiB, ` +
      `${(size.gzip / 1024).toFixed(1)} KiB gzip; dev smoke: SIGKILL after tick ${smoke.before.join(", ")}, restarted, the alarm printed ` +
      `tick ${smoke.after.join(", ")} with no request (each line once)`,
  );
}
