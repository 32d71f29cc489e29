import { defineConfig } from "vitest/config";

// End-to-end tests in real Chromium (playwright-core driving a system Chromium) against the production
// build of e2e/app. Run with `npm run test:e2e`, which builds the page first.
export default defineConfig({
  test: {
    include: ["e2e/**/*.e2e.ts"],
    globalSetup: ["e2e/support/global-setup.ts"],
    // One browser at a time: the machine has two cores, and timing-sensitive recovery paths (handle
    // release after a reload) should not compete with another Chromium.
    fileParallelism: false,
    testTimeout: 90_000,
    hookTimeout: 60_000,
  },
});
