#!/usr/bin/env node
/**
 * `npm start` and `npm test` call this first so they work on a fresh clone: it installs the npm
 * dependencies when any declared one is missing (npm ci when the lockfile is there). Quiet when all is there.
 */
import { spawnSync } from "node:child_process";
import { existsSync, readFileSync } from "node:fs";
import { join } from "node:path";

const root = new URL("..", import.meta.url).pathname;
const manifest = JSON.parse(readFileSync(join(root, "package.json"), "utf8"));
const declared = Object.keys({ ...manifest.dependencies, ...manifest.devDependencies });
const missing = declared.filter((name) => !existsSync(join(root, "node_modules", name, "package.json")));

if (missing.length > 0) {
  const command = existsSync(join(root, "package-lock.json")) ? "ci" : "install";
  console.error(
    `Installing npm dependencies (npm ${command}; missing: ${missing.slice(0, 5).join(", ")}${missing.length > 5 ? ", …" : ""})`,
  );
  const result = spawnSync("npm", [command, "--no-audit", "--no-fund"], { cwd: root, stdio: "inherit" });
  if (result.status !== 0) process.exit(result.status ?? 1);
}
