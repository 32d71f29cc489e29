/**
 * Bytes over the wire (issue 6, "Memory and size"): gzip -9 of what a first visit fetches, from the
 * production builds. Ours: the demo app (`vite build` with the root vite.config.ts, built into
 * .tmp/bench-dist/demo instead of dist/), split into page JS, worker JS and sqlite-wasm's own files; the
 * worker is built a second time with sqlite-wasm's JS in a chunk of its own to tell our code from its glue.
 * The peer: its bench page (durably + Kysely + zod + sqlocal). "Fetched" is what Chromium requested while the
 * page opened its database (service workers blocked, so a precache does not count).
 */
import { spawnSync } from "node:child_process";
import { readdirSync, readFileSync } from "node:fs";
import { basename, join } from "node:path";
import { gzipSync } from "node:zlib";
import type { InlineConfig } from "vite";
import { fmt } from "../stats.ts";
import type { Row } from "./ours.ts";
import { buildPage, DIST, launchChromium, ROOT, serveStatic, waitInPage } from "./support.ts";

export interface FileSize {
  file: string;
  bytes: number;
  gzip: number;
}

/** sqlite-wasm's JS in a chunk of its own (the split builds only). */
const SPLIT_SQLITE: InlineConfig["worker"] = {
  rolldownOptions: { output: { codeSplitting: { groups: [{ name: "sqlite-wasm", test: /[\\/]@sqlite\.org[\\/]sqlite-wasm[\\/]/ }] } } },
};

export async function benchSizes() {
  const demoDir = join(DIST, "demo");
  const splitDir = join(DIST, "demo-split");
  const rootConfig = join(ROOT, "vite.config.ts");
  await buildPage(rootConfig, { build: { outDir: demoDir, emptyOutDir: true } });
  await buildPage(rootConfig, { build: { outDir: splitDir, emptyOutDir: true }, worker: SPLIT_SQLITE });
  const peerDir = join(DIST, "peer"); // built by the peer benchmark

  const demoFetched = await fetchedBy(demoDir, false, async (page) => {
    await page.waitForResponse((response) => /sqlite3-[^/]*\.wasm$/.test(response.url()), { timeout: 30_000 });
  });
  const peerFetched = await fetchedBy(peerDir, true, async (page) => {
    await waitInPage(page, () => (window as unknown as { bench?: { ready?: boolean } }).bench?.ready === true, 30_000);
  });

  const isWasm = (f: FileSize) => f.file.endsWith(".wasm");
  const isWorker = (f: FileSize) => /^harness-worker-/.test(f.file);
  const isPage = (f: FileSize) => /^index-.*\.(js|css)$/.test(f.file);
  const split = assets(splitDir);
  const splitWorker = split.filter((f) => /^harness-worker-.*\.js$/.test(f.file));
  const splitSqlite = split.filter((f) => /^sqlite-wasm-.*\.js$/.test(f.file));
  const demo = {
    page: total(demoFetched.filter(isPage)),
    worker: total(demoFetched.filter((f) => isWorker(f) || (!isPage(f) && !isWasm(f) && f.file.endsWith(".js")))),
    workerOwnCode: total(splitWorker),
    sqliteWasmJs: total(splitSqlite),
    sqliteWasm: total(demoFetched.filter(isWasm)),
    fetched: demoFetched,
    emittedNotFetched: assets(demoDir).filter((f) => /\.(js|wasm)$/.test(f.file) && !demoFetched.some((g) => g.file === f.file)),
  };
  const peer = {
    js: total(peerFetched.filter((f) => f.file.endsWith(".js"))),
    page: total(peerFetched.filter(isPage)),
    sqliteWasm: total(peerFetched.filter(isWasm)),
    fetched: peerFetched,
  };
  const worker = workerBundle();
  const result = { name: "sizes", gzipLevel: 9, demo, peer, worker };
  const kb = (bytes: number) => `${fmt(bytes / 1024, 1)} kB`;
  const rows: Row[] = [
    {
      bench: "size (gzip)",
      what: "demo page JS + CSS (web/)",
      median: kb(demo.page.gzip),
      range: `${kb(demo.page.bytes)} raw`,
      ratio: "",
      target: "",
    },
    {
      bench: "size (gzip)",
      what: "demo worker JS as fetched (library + demo tasks + tools; includes sqlite-wasm's JS)",
      median: kb(demo.worker.gzip),
      range: `${kb(demo.worker.bytes)} raw`,
      ratio: `our code ${kb(demo.workerOwnCode.gzip)} + sqlite-wasm JS ${kb(demo.sqliteWasmJs.gzip)}`,
      target: "",
    },
    {
      bench: "size (gzip)",
      what: "sqlite3.wasm (sqlite-wasm's own)",
      median: kb(demo.sqliteWasm.gzip),
      range: `${kb(demo.sqliteWasm.bytes)} raw`,
      ratio: `JS fetched ÷ wasm: ${fmt((demo.page.gzip + demo.worker.gzip) / demo.sqliteWasm.gzip, 2)}`,
      target: "",
    },
    {
      bench: "size (gzip)",
      what: "durably page, all JS fetched (durably + Kysely + zod + sqlocal + its sqlite-wasm JS)",
      median: kb(peer.js.gzip),
      range: `${kb(peer.js.bytes)} raw; wasm ${kb(peer.sqliteWasm.gzip)}`,
      ratio: `ours ${kb(demo.page.gzip + demo.worker.gzip)}`,
      target: "",
    },
    {
      bench: "size (gzip)",
      what: `Worker bundle: examples/worker-app on the packed package (wrangler ${worker.wrangler} deploy --dry-run, no nodejs_compat)`,
      median: kb(worker.gzip),
      range: `${kb(worker.bytes)} raw`,
      ratio: "",
      target: "≤ 3 MiB (Workers free plan) ✅".replace("✅", worker.gzip <= 3 * 1024 * 1024 ? "✅" : "❌"),
    },
  ];
  return { result, rows };
}

/** `wrangler deploy --dry-run` of the example Worker (scripts/test-wrangler.mjs: Node 22 and wrangler from the registry). */
function workerBundle(): { bytes: number; gzip: number; wrangler: string } {
  const run = spawnSync("node", [join(ROOT, "scripts", "test-wrangler.mjs"), "--size-only"], { cwd: ROOT, encoding: "utf8" });
  if (run.status !== 0) throw new Error(`wrangler deploy --dry-run failed: ${run.stdout}${run.stderr}`);
  return JSON.parse(run.stdout.trim().split("\n").at(-1)!);
}

/** The JS, CSS and wasm files Chromium fetched while opening `dir`'s page, with their sizes on disk. */
async function fetchedBy(
  dir: string,
  isolated: boolean,
  opened: (page: import("playwright-core").Page) => Promise<void>,
): Promise<FileSize[]> {
  const server = await serveStatic(dir, { isolated });
  const browser = await launchChromium({ blockServiceWorkers: true });
  try {
    const files = new Set<string>();
    browser.context.on("response", (response) => {
      const path = new URL(response.url()).pathname;
      if (/\.(js|css|wasm)$/.test(path) && response.ok()) files.add(decodeURIComponent(path));
    });
    const page = await browser.newPage();
    await page.goto(server.url);
    await opened(page);
    await page.waitForLoadState("networkidle");
    return [...files].sort().map((path) => size(join(dir, path)));
  } finally {
    await browser.close();
    await server.close();
  }
}

function assets(dir: string): FileSize[] {
  return readdirSync(join(dir, "assets")).map((file) => size(join(dir, "assets", file)));
}

function size(path: string): FileSize {
  const bytes = readFileSync(path);
  return { file: basename(path), bytes: bytes.byteLength, gzip: gzipSync(bytes, { level: 9 }).byteLength };
}

function total(files: FileSize[]): { bytes: number; gzip: number; files: string[] } {
  return {
    bytes: files.reduce((sum, f) => sum + f.bytes, 0),
    gzip: files.reduce((sum, f) => sum + f.gzip, 0),
    files: files.map((f) => f.file),
  };
}
