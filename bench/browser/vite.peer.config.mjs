// The peer's bench page (bench/browser/peer), built the way the peer documents it: sqlocal's own Vite
// plugin (module workers, sqlite-wasm not pre-bundled). Production build into .tmp/bench-dist/peer; the
// server adds COOP/COEP, which sqlocal's OPFS VFS needs. JavaScript, not TypeScript: sqlocal lives in
// bench/node_modules, outside the main install and the main typecheck.
import { fileURLToPath } from "node:url";
import sqlocal from "sqlocal/vite";
import { defineConfig } from "vite";

export default defineConfig({
  root: fileURLToPath(new URL("./peer", import.meta.url)),
  publicDir: false,
  logLevel: "warn",
  plugins: [sqlocal()],
  build: { outDir: fileURLToPath(new URL("../../.tmp/bench-dist/peer", import.meta.url)), emptyOutDir: true, target: "es2022" },
});
