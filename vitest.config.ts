import { defineConfig } from "vitest/config";

export default defineConfig({
  // The Workers runtime's module, for Node-side tests that import a Durable Object's module (never run there).
  resolve: { alias: { "cloudflare:workers": new URL("./test/edge/cloudflare-workers.ts", import.meta.url).pathname } },
  test: { include: ["test/**/*.test.ts", "test/**/*.test.tsx"], testTimeout: 20000 },
});
