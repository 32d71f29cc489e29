/**
 * What a leaving page's busy worker still sends (docs/decisions/0100): `npx tsx scripts/probe-pagehide-busy.ts [runs]`.
 * As scripts/probe-pagehide.ts, closing the tab only, but the worker is kept busy as a harness that steps is: a
 * synchronous stretch of `busy` ms (wasm SQLite, a step's code), then `gap` ms idle. At `pagehide` the page posts "leave" to
 * its worker and writes on a WebSocket of its own; the worker writes "worker at once" on its socket in the first task
 * after the page's message. Counts, for each busy length, in how many closes of `runs` each word arrived. Measures a
 * browser's behaviour under this machine's load (say the load with the counts); it is no test.
 */

import { mkdtemp, rm } from "node:fs/promises";
import { createServer } from "node:http";
import type { AddressInfo } from "node:net";
import { loadavg, tmpdir } from "node:os";
import { join } from "node:path";
import { chromium } from "playwright-core";
import { WebSocketServer } from "ws";
import { CHROMIUM_ARGS, findChromium } from "./find-chromium.mjs";

const PAGE = `<!doctype html><title>probe</title><body><script>
const params = new URLSearchParams(location.search);
const run = params.get("run");
const worker = new Worker("/worker.js?run=" + run + "&busy=" + params.get("busy") + "&gap=" + params.get("gap"));
const own = new WebSocket("ws://" + location.host + "/?from=page&run=" + run);
worker.onmessage = () => (document.body.dataset.ready = "1");
addEventListener("pagehide", () => {
  worker.postMessage("leave");
  if (own.readyState === 1) own.send("page");
});
</script>`;

const WORKER = `
const params = new URL(location.href).searchParams;
const run = params.get("run");
const busy = Number(params.get("busy"));
const gap = Number(params.get("gap"));
const socket = new WebSocket("ws://" + location.host + "/?from=worker&run=" + run);
socket.onopen = () => postMessage("ready");
const spin = () => {
  const until = performance.now() + busy;
  while (performance.now() < until);
  setTimeout(spin, gap);
};
if (busy > 0) setTimeout(spin, gap);
onmessage = () => { if (socket.readyState === 1) socket.send("worker"); };`;

const heard = new Map<string, Set<string>>();
const server = createServer((request, response) => {
  const url = new URL(request.url ?? "/", "http://probe");
  if (url.pathname === "/") return void response.writeHead(200, { "content-type": "text/html" }).end(PAGE);
  if (url.pathname === "/worker.js") return void response.writeHead(200, { "content-type": "text/javascript" }).end(WORKER);
  response.writeHead(404).end();
});
const sockets = new WebSocketServer({ server });
sockets.on("connection", (socket, request) => {
  const run = new URL(request.url ?? "/", "http://probe").searchParams.get("run") ?? "?";
  socket.on("message", (data) => {
    const words = heard.get(run) ?? new Set<string>();
    words.add(String(data));
    heard.set(run, words);
  });
});
await new Promise<void>((done) => server.listen(0, "127.0.0.1", done));
const origin = `http://127.0.0.1:${(server.address() as AddressInfo).port}`;

const runs = Number(process.argv[2] ?? 10);
const executablePath = findChromium();
if (!executablePath) throw new Error('No Chromium found: run "node scripts/ensure-chromium.mjs" or set CHROMIUM_PATH.');
const profile = await mkdtemp(join(tmpdir(), "probe-pagehide-busy-"));
const context = await chromium.launchPersistentContext(profile, { executablePath, headless: true, args: CHROMIUM_ARGS });
/** [busy ms, ms between]: idle; short stretches; 0035's starvation bound (50 ms) at the same share; long stretches. */
const shapes: Array<[number, number]> = [
  [0, 5],
  [4, 1],
  [50, 12],
  [100, 5],
];
const counts = new Map<string, { page: number; worker: number }>();
for (let at = 0; at < runs; at++)
  for (const [busy, gap] of shapes) {
    const shape = `worker busy ${busy} ms every ${busy + gap} ms`;
    const run = `${busy}-${gap}-${at}`;
    const page = await context.newPage();
    await page.goto(`${origin}/?run=${run}&busy=${busy}&gap=${gap}`);
    await page.waitForSelector("body[data-ready]", { state: "attached" });
    await new Promise((resolve) => setTimeout(resolve, 100 + Math.random() * 100));
    await page.close();
    await new Promise((resolve) => setTimeout(resolve, 500));
    const words = heard.get(run) ?? new Set<string>();
    const count = counts.get(shape) ?? { page: 0, worker: 0 };
    if (words.has("page")) count.page++;
    if (words.has("worker")) count.worker++;
    counts.set(shape, count);
  }
await context.close().catch(() => {});
await rm(profile, { recursive: true, force: true });
console.log(
  `load average ${loadavg()
    .map((n) => n.toFixed(2))
    .join(" ")}; ${runs} closes each`,
);
for (const [shape, { page, worker }] of counts)
  console.log(`  ${shape}: page's socket ${page}/${runs}, worker's first task ${worker}/${runs}`);
sockets.close();
server.close();
