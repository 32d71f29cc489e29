#!/usr/bin/env node
/**
 * The package as users get it: builds lib/ once, packs the tarball into .tmp/package/, and lints it with
 * publint and @arethetypeswrong/cli (any message fails). Part of `npm test`.
 *
 *   node scripts/test-package.mjs    // prints the tarball's path and size
 */
import { spawnSync } from "node:child_process";
import { mkdirSync, readdirSync, rmSync, statSync } from "node:fs";
import { join } from "node:path";

const root = new URL("..", import.meta.url).pathname;
export const PACK_DIR = join(root, ".tmp", "package");

/** Runs a command in the repository; exits with its status when it fails. Returns its stdout. */
function run(command, args, { quiet = false } = {}) {
  const result = spawnSync(command, args, { cwd: root, encoding: "utf8", stdio: ["ignore", "pipe", "inherit"] });
  if (!quiet || result.status !== 0) process.stdout.write(result.stdout ?? "");
  if (result.status !== 0) {
    console.error(`${command} ${args.join(" ")} failed (exit ${result.status ?? result.signal}).`);
    process.exit(result.status ?? 1);
  }
  return result.stdout;
}

run("npm", ["run", "--silent", "build"]);
rmSync(PACK_DIR, { recursive: true, force: true });
mkdirSync(PACK_DIR, { recursive: true });
// The build is fresh: skip prepack's second build.
run("npm", ["pack", "--ignore-scripts", "--silent", "--pack-destination", PACK_DIR], { quiet: true });
const tarball = join(
  PACK_DIR,
  readdirSync(PACK_DIR).find((name) => name.endsWith(".tgz")),
);

// publint prints "All good!" when it has nothing to say; --strict turns warnings into a failing exit.
const lint = run("npx", ["--no-install", "publint", "run", tarball, "--strict"], { quiet: true });
if (!/All good!/.test(lint)) {
  process.stdout.write(lint);
  console.error("publint reported problems (above).");
  process.exit(1);
}
// ESM only, on purpose: CommonJS `require` and node10 resolution are out of scope (docs/decisions/0006).
run("npx", ["--no-install", "attw", tarball, "--profile", "esm-only", "--format", "table", "--no-emoji"], { quiet: true });

console.log(`package: ${tarball} (${(statSync(tarball).size / 1024).toFixed(1)} kB), publint and attw clean`);
