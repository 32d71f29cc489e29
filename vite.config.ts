import { defineConfig } from "vite";
import { precache } from "./web/build/precache.ts";

// The demo app lives in web/; its worker in worker/. sqlite-wasm must not be pre-bundled (it resolves its
// .wasm file relative to its own module), and workers are ES modules so they can import the library.
// web/public holds the PWA's manifest, icon and service worker; the precache plugin fills in the service
// worker's list of built files (so the app loads offline after the first visit) and draws the PNG icons.
export default defineConfig({
  root: "web",
  base: "./",
  publicDir: "public",
  build: { outDir: "../dist", emptyOutDir: true, target: "es2022" },
  server: { host: "127.0.0.1", port: 5173 },
  preview: { host: "127.0.0.1", port: 4173 },
  optimizeDeps: { exclude: ["@sqlite.org/sqlite-wasm"] },
  worker: { format: "es" },
  plugins: [precache()],
});
