#!/usr/bin/env node
/**
 * examples/react-chat as a user builds it: the packed tarball (scripts/test-package.mjs makes it) installed
 * into the example's node_modules, a Vite build, then its @playwright/test reload tests in system Chromium.
 * The example's other dependencies (react, ai, …) resolve from the repository's node_modules. Part of `npm test`.
 *
 *   node scripts/test-react-chat.mjs               // results in .tmp/results-react-chat.json
 *   node scripts/test-react-chat.mjs readme.spec   // arguments go to playwright test (here: one file)
 */
import { spawnSync } from "node:child_process";
import { existsSync, mkdirSync, readdirSync, renameSync, rmSync } from "node:fs";
import { join } from "node:path";

const root = new URL("..", import.meta.url).pathname;
const example = join(root, "examples", "react-chat");
const packDir = join(root, ".tmp", "package");

function run(command, args, options = {}) {
  const result = spawnSync(command, args, { cwd: root, stdio: "inherit", ...options });
  if (result.status !== 0) {
    console.error(`${command} ${args.join(" ")} failed (exit ${result.status ?? result.signal}).`);
    process.exit(result.status ?? 1);
  }
}

const tarballs = () => (existsSync(packDir) ? readdirSync(packDir).filter((name) => name.endsWith(".tgz")) : []);
if (tarballs().length === 0) run("node", ["scripts/test-package.mjs"]);
const tarball = join(packDir, tarballs()[0]);

// Installed as npm installs a tarball: its package/ directory becomes node_modules/pi-durable-web.
const modules = join(example, "node_modules");
const unpack = join(root, ".tmp", "react-chat-unpack");
rmSync(join(modules, "pi-durable-web"), { recursive: true, force: true });
rmSync(unpack, { recursive: true, force: true });
mkdirSync(unpack, { recursive: true });
mkdirSync(modules, { recursive: true });
run("tar", ["-xzf", tarball, "-C", unpack]);
renameSync(join(unpack, "package"), join(modules, "pi-durable-web"));

run("npx", ["--no-install", "vite", "build", "--config", join(example, "vite.config.ts"), "--logLevel", "warn"]);
run("npx", ["--no-install", "playwright", "test", "--config", join(example, "playwright.config.ts"), ...process.argv.slice(2)], {
  env: { ...process.env, PLAYWRIGHT_JSON_OUTPUT_NAME: join(root, ".tmp", "results-react-chat.json") },
});
