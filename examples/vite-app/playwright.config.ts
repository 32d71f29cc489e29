import { defineConfig, devices } from "@playwright/test";

// `npm test` builds the app first; the web server serves that production build (vite preview).
const port = Number(process.env.PORT ?? 4173);
// A browser of your own (for example a system Chromium) instead of Playwright's download.
const executablePath = process.env.CHROMIUM_PATH;

export default defineConfig({
  testDir: "tests",
  // Two workers: the crash sweep's shards (tests/sweep.spec.ts) run side by side.
  workers: 2,
  use: {
    baseURL: `http://127.0.0.1:${port}/`,
    ...(executablePath ? { launchOptions: { executablePath } } : {}),
  },
  projects: [{ name: "chromium", use: { ...devices["Desktop Chrome"] } }],
  webServer: {
    command: `npx vite preview --host 127.0.0.1 --port ${port} --strictPort`,
    url: `http://127.0.0.1:${port}/`,
    reuseExistingServer: false,
  },
});
