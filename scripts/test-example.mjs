#!/usr/bin/env node
/**
 * The install path, proven on every `npm test`: copies examples/vite-app into .tmp/vite-app, installs the
 * packed tarball there (as a user would: no loaders, no path aliases), type-checks and builds the app, fails
 * on any "externalized for browser compatibility" warning, and runs its @playwright/test suite against the
 * build with the system Chromium. The Playwright counts go to .tmp/results-playwright.json for the closing
 * line of `npm test`. Run scripts/test-package.mjs first (it packs the tarball).
 *
 *   node scripts/test-example.mjs
 */
import { spawnSync } from "node:child_process";
import { cpSync, existsSync, mkdirSync, readdirSync, rmSync } from "node:fs";
import { createServer } from "node:net";
import { join } from "node:path";
import { findChromium } from "./find-chromium.mjs";

const root = new URL("..", import.meta.url).pathname;
const source = join(root, "examples", "vite-app");
const app = join(root, ".tmp", "vite-app");
const packDir = join(root, ".tmp", "package");
const results = join(root, ".tmp", "results-playwright.json");

const tarball = existsSync(packDir) ? readdirSync(packDir).find((name) => name.endsWith(".tgz")) : undefined;
if (!tarball) {
  console.error(`No tarball in ${packDir}: run "node scripts/test-package.mjs" first.`);
  process.exit(1);
}
const executablePath = findChromium();
if (!executablePath) {
  console.error('No Chromium found: run "node scripts/ensure-chromium.mjs" or set CHROMIUM_PATH.');
  process.exit(1);
}

/** Runs a command in the app copy; exits with its status when it fails. Returns what it printed. */
function run(command, args, env = {}) {
  const result = spawnSync(command, args, {
    cwd: app,
    encoding: "utf8",
    env: { ...process.env, ...env },
    stdio: ["ignore", "pipe", "pipe"],
  });
  const output = `${result.stdout ?? ""}${result.stderr ?? ""}`;
  if (result.status !== 0) {
    process.stdout.write(output);
    console.error(`${command} ${args.join(" ")} failed in ${app} (exit ${result.status ?? result.signal}).`);
    process.exit(result.status ?? 1);
  }
  return output;
}

// A fresh copy of the app's files; node_modules stays between runs (installs are then quick and offline).
mkdirSync(app, { recursive: true });
for (const name of readdirSync(app)) if (name !== "node_modules") rmSync(join(app, name), { recursive: true, force: true });
cpSync(source, app, { recursive: true, filter: (path) => !/[/](node_modules|dist|test-results|playwright-report)([/]|$)/.test(path) });
rmSync(join(app, "node_modules", "pi-durable-web"), { recursive: true, force: true });

run("npm", ["install", "--no-audit", "--no-fund", "--prefer-offline", "--loglevel=error", join(packDir, tarball)]);
const build = run("npm", ["run", "build"]);
if (/externalized for browser compatibility/.test(build)) {
  process.stdout.write(build);
  console.error("The app's build pulled a Node-only module into the browser bundle (above).");
  process.exit(1);
}

const port = await new Promise((resolve, reject) => {
  const server = createServer().listen(0, "127.0.0.1", () => {
    const { port: free } = server.address();
    server.close(() => resolve(free));
  });
  server.on("error", reject);
});
rmSync(results, { force: true });
const env = { PORT: String(port), CHROMIUM_PATH: executablePath, PLAYWRIGHT_JSON_OUTPUT_FILE: results };
const result = spawnSync("npx", ["--no-install", "playwright", "test", "--reporter=list,json"], {
  cwd: app,
  env: { ...process.env, ...env },
  stdio: "inherit",
});
process.exit(result.status ?? 1);
