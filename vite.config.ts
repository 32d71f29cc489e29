import { defineConfig } from "vite";

// The demo app lives in web/; its worker in worker/. sqlite-wasm must not be pre-bundled (it resolves its
// .wasm file relative to its own module), and workers are ES modules so they can import the library.
export default defineConfig({
  root: "web",
  publicDir: false,
  build: { outDir: "../dist", emptyOutDir: true, target: "es2022" },
  server: { host: "127.0.0.1", port: 5173 },
  preview: { host: "127.0.0.1", port: 4173 },
  optimizeDeps: { exclude: ["@sqlite.org/sqlite-wasm"] },
  worker: { format: "es" },
});
