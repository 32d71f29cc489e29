import { readFileSync } from "node:fs";
import { fileURLToPath } from "node:url";
import { defineConfig } from "vite";
import { precache } from "./web/build/precache.ts";

// The demo app lives in web/; its worker in worker/. sqlite-wasm must not be pre-bundled (it resolves its
// .wasm file relative to its own module), and workers are ES modules so they can import the library.
// web/public holds the PWA's manifest, icon and service worker; the precache plugin fills in the service
// worker's list of built files (so the app loads offline after the first visit) and draws the PNG icons.
//
// The demo imports the library by its package name. In this repository that name means the source in src/,
// not the build in lib/ that package.json's `exports` name (tsconfig.json's `paths` say the same for tsc).
const manifest = JSON.parse(readFileSync(new URL("package.json", import.meta.url), "utf8")) as { exports: Record<string, string | { default: string }> };
const librarySource = Object.entries(manifest.exports).flatMap(([subpath, target]) => {
  if (typeof target === "string") return [];
  const source = target.default.replace("./lib/", "./src/").replace(/\.js$/, ".ts");
  return [{ find: new RegExp(`^pi-durable-web${subpath.slice(1)}$`), replacement: fileURLToPath(new URL(source, import.meta.url)) }];
});

export default defineConfig({
  root: "web",
  base: "./",
  publicDir: "public",
  build: { outDir: "../dist", emptyOutDir: true, target: "es2022" },
  server: { host: "127.0.0.1", port: 5173 },
  preview: { host: "127.0.0.1", port: 4173 },
  resolve: { alias: librarySource },
  optimizeDeps: { exclude: ["@sqlite.org/sqlite-wasm"] },
  worker: { format: "es" },
  plugins: [precache()],
});
