#!/usr/bin/env node
/**
 * Prints one closing line for the whole `npm test` run (unit, browser, and the example apps' Playwright
 * tests): "Tests: N passed, N failed".
 */
import { existsSync, readFileSync, rmSync } from "node:fs";

const FILES = [
  ".tmp/results-unit.json",
  ".tmp/results-wrangler.json",
  ".tmp/results-e2e.json",
  ".tmp/results-playwright.json",
  ".tmp/results-react-chat.json",
];
if (process.argv.includes("--reset")) {
  // At the start of `npm test`: results of an earlier run must not count in this one.
  for (const file of FILES) rmSync(file, { force: true });
  process.exit(0);
}

let passed = 0;
let failed = 0;
for (const file of FILES) {
  if (!existsSync(file)) continue;
  const results = JSON.parse(readFileSync(file, "utf8"));
  if (results.stats) {
    // @playwright/test's JSON reporter; a skipped or flaky test counts as failed, as a pending one does here.
    passed += results.stats.expected ?? 0;
    failed += (results.stats.unexpected ?? 0) + (results.stats.skipped ?? 0) + (results.stats.flaky ?? 0);
    continue;
  }
  passed += results.numPassedTests ?? 0;
  failed += (results.numFailedTests ?? 0) + (results.numPendingTests ?? 0) + (results.numTodoTests ?? 0);
}
console.log(`Tests: ${passed} passed, ${failed} failed`);
if (failed > 0 || passed === 0) process.exit(1);
