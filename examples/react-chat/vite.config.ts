import { defineConfig } from "vite";

// A consumer app: pi-durable-web is the packed tarball installed into node_modules (scripts/test-react-chat.mjs),
// not the repository's source. sqlite-wasm finds its .wasm file next to its own module, so it is not pre-bundled.
export default defineConfig({
  root: import.meta.dirname,
  base: "./",
  // index.html: the example app; readme.html: the README's React example as pasted (src/readme/).
  build: {
    outDir: "dist",
    emptyOutDir: true,
    target: "es2022",
    rollupOptions: { input: { main: `${import.meta.dirname}/index.html`, readme: `${import.meta.dirname}/readme.html` } },
  },
  optimizeDeps: { exclude: ["@sqlite.org/sqlite-wasm"] },
  worker: { format: "es" },
  oxc: { jsx: { runtime: "automatic" } },
});
