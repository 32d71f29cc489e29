import { defineConfig } from "vite";

// Optional, for `vite dev` only: the worker's imports are found by the dependency scan up front, so a cold
// dependency cache does not make the first load reload the page. `vite build` needs no config at all.
export default defineConfig({ optimizeDeps: { entries: ["index.html", "src/worker.ts"] } });
