import { fileURLToPath } from "node:url";
import { defineConfig } from "vite";

// The bench page (bench/browser/app): production build into .tmp/bench-dist/app, bundled the way the demo
// app is (sqlite-wasm not pre-bundled, module workers).
export default defineConfig({
  root: fileURLToPath(new URL("./app", import.meta.url)),
  publicDir: false,
  logLevel: "warn",
  build: { outDir: fileURLToPath(new URL("../../.tmp/bench-dist/app", import.meta.url)), emptyOutDir: true, target: "es2022" },
  optimizeDeps: { exclude: ["@sqlite.org/sqlite-wasm"] },
  worker: { format: "es" },
});
