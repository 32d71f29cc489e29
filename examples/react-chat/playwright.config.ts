import { defineConfig } from "@playwright/test";
import { CHROMIUM_ARGS, findChromium } from "../../scripts/find-chromium.mjs";

// System Chromium (Playwright's own download is blocked here); the built app is served on a free port by
// the global setup, which hands its address to the tests as REACT_CHAT_URL.
export default defineConfig({
  testDir: "tests",
  outputDir: "../../.tmp/react-chat-results",
  globalSetup: "./tests/global-setup.ts",
  timeout: 60_000,
  workers: 1,
  reporter: [["list"], ["json"]],
  use: { launchOptions: { executablePath: findChromium(), args: CHROMIUM_ARGS }, headless: true },
});
