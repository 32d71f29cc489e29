import { defineConfig } from "vite";

// Production build of the e2e test page (e2e/app) into .tmp/e2e-dist; e2e tests run against it, so they
// exercise the same bundling of sqlite-wasm (its .wasm asset and module worker) that users ship. Relative
// asset URLs: the page is served under /e2e/, on the same origin as the demo app (e2e/support/global-setup.ts).
export default defineConfig({
  root: "e2e/app",
  base: "./",
  publicDir: false,
  logLevel: "warn",
  build: { outDir: "../../.tmp/e2e-dist", emptyOutDir: true, target: "es2022" },
  optimizeDeps: { exclude: ["@sqlite.org/sqlite-wasm"] },
  worker: { format: "es" },
});
