#!/usr/bin/env node
/**
 * Finds a Chromium for the e2e tests. Playwright's own browser download is blocked on our machines, so we
 * drive a system Chromium through playwright-core. Order: $CHROMIUM_PATH, then a browser already in the
 * Playwright cache, then Debian's /usr/bin/chromium.
 *
 *   import { findChromium } from "./scripts/find-chromium.mjs";   // → "/usr/bin/chromium" | undefined
 *   node scripts/find-chromium.mjs                                 // prints the path, exit 1 if none
 */
import { accessSync, constants, readdirSync } from "node:fs";
import { homedir } from "node:os";
import { join } from "node:path";
import { fileURLToPath } from "node:url";

/**
 * Flags that keep a headless system Chromium quiet and deterministic here: without the background-networking
 * ones, a closed network turns into a stream of refused connections.
 */
export const CHROMIUM_ARGS = [
  "--no-sandbox",
  "--disable-gpu",
  "--disable-quic",
  "--no-first-run",
  "--disable-background-networking",
  "--disable-component-update",
  "--disable-sync",
];

/** @returns {string | undefined} the path of a runnable Chromium, or undefined when there is none. */
export function findChromium() {
  const candidates = [];
  if (process.env.CHROMIUM_PATH) candidates.push(process.env.CHROMIUM_PATH);
  const cache = process.env.PLAYWRIGHT_BROWSERS_PATH || join(homedir(), ".cache", "ms-playwright");
  try {
    const builds = readdirSync(cache)
      .filter((name) => /^chromium-\d+$/.test(name))
      .sort((a, b) => Number(b.slice(9)) - Number(a.slice(9))); // newest first
    for (const build of builds) {
      candidates.push(join(cache, build, "chrome-linux", "chrome"), join(cache, build, "chrome-linux64", "chrome"));
    }
  } catch {
    // no Playwright cache
  }
  candidates.push("/usr/bin/chromium");
  return candidates.find(isExecutable);
}

function isExecutable(path) {
  try {
    accessSync(path, constants.X_OK);
    return true;
  } catch {
    return false;
  }
}

if (process.argv[1] && fileURLToPath(import.meta.url) === process.argv[1]) {
  const path = findChromium();
  if (path) console.log(path);
  else {
    console.error(
      "No Chromium found (checked $CHROMIUM_PATH, the Playwright cache, /usr/bin/chromium). Run: node scripts/ensure-chromium.mjs",
    );
    process.exitCode = 1;
  }
}
