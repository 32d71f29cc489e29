#!/usr/bin/env node
/**
 * Makes sure the e2e tests have a Chromium. `npx playwright install` cannot download here, but Debian's
 * `chromium` package works with playwright-core, so as root we install that (about 2 minutes).
 *
 *   node scripts/ensure-chromium.mjs   // prints the Chromium path; exit 1 with instructions if there is none
 */
import { spawnSync } from "node:child_process";
import { existsSync } from "node:fs";
import { findChromium } from "./find-chromium.mjs";

let path = findChromium();
if (!path) {
  const root = process.getuid?.() === 0;
  if (root && existsSync("/usr/bin/apt-get")) {
    console.error("No Chromium found; installing Debian's chromium package (apt-get, about 2 minutes)…");
    const env = { ...process.env, DEBIAN_FRONTEND: "noninteractive" };
    for (const args of [["update"], ["install", "-y", "chromium"]]) {
      const result = spawnSync("apt-get", args, { stdio: "inherit", env });
      if (result.status !== 0) {
        console.error(`apt-get ${args.join(" ")} failed (exit ${result.status ?? result.signal}).`);
        process.exit(1);
      }
    }
    path = findChromium();
  }
  if (!path) {
    console.error(
      [
        "No Chromium found for the e2e tests. Either:",
        "  - set CHROMIUM_PATH to a Chromium or Chrome binary, or",
        "  - install Debian's package as root: apt-get update && apt-get install -y chromium",
        root ? "" : "(not running as root, so this script did not try to install it)",
      ]
        .filter(Boolean)
        .join("\n"),
    );
    process.exit(1);
  }
}
console.log(path);
