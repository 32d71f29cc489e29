import { readFileSync } from "node:fs";
import { fileURLToPath } from "node:url";
import { defineConfig } from "vite";
import { VitePWA } from "vite-plugin-pwa";

// The demo app lives in web/; its worker in worker/. sqlite-wasm must not be pre-bundled (it resolves its
// .wasm file relative to its own module), and workers are ES modules so they can import the library.
// The PWA (vite-plugin-pwa, workbox): the manifest, icons generated from web/public/icon.svg, and the
// service worker web/sw.ts with this build's precache list injected (injectManifest: the worker is ours,
// because its navigation route is limited to the app's own page; see docs/decisions/0015-pwa-workbox.md).
//
// The demo imports the library by its package name. In this repository that name means the source in src/,
// not the build in lib/ that package.json's `exports` name (tsconfig.json's `paths` say the same for tsc).
const manifest = JSON.parse(readFileSync(new URL("package.json", import.meta.url), "utf8")) as {
  exports: Record<string, string | { default: string }>;
};
const librarySource = Object.entries(manifest.exports).flatMap(([subpath, target]) => {
  if (typeof target === "string") return [];
  const source = target.default.replace("./lib/", "./src/").replace(/\.js$/, ".ts");
  return [{ find: new RegExp(`^pi-durable-web${subpath.slice(1)}$`), replacement: fileURLToPath(new URL(source, import.meta.url)) }];
});
const BRAND = "#1e1b4b";

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
  plugins: [
    VitePWA({
      strategies: "injectManifest",
      srcDir: ".",
      filename: "sw.ts",
      registerType: "prompt",
      injectRegister: false, // web/src/offline.ts registers it and shows the update prompt
      manifest: {
        name: "pi-durable-web: an agent that survives a reload",
        short_name: "pi-durable",
        description:
          "A durable agent runtime in a browser tab: tasks, tool calls and model turns committed to SQLite on OPFS, recovered after a reload.",
        id: "./",
        start_url: "./",
        scope: "./",
        display: "standalone",
        background_color: "#f5f6f8",
        theme_color: BRAND,
      },
      pwaAssets: {
        image: "public/icon.svg",
        preset: {
          transparent: { sizes: [64, 192, 512], favicons: [[48, "favicon.ico"]] },
          maskable: { sizes: [512], padding: 0.3, resizeOptions: { background: BRAND } },
          apple: { sizes: [180], padding: 0.15, resizeOptions: { background: BRAND } },
        },
      },
      injectManifest: {
        globPatterns: ["**/*.{html,js,css,wasm,svg,png,ico}"], // the plugin adds the manifest itself
        // sqlite3.wasm is about 860 kB; the worker bundle about 440 kB.
        maximumFileSizeToCacheInBytes: 4 * 1024 * 1024,
      },
    }),
  ],
});
