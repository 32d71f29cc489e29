/**
 * What Chromium lets a leaving page do (docs/decisions/0035): `npx tsx scripts/probe-pagehide.ts`. A page with a
 * dedicated worker that holds a WebSocket to this process; at `pagehide` the page posts "leave" to its worker,
 * sends a `navigator.sendBeacon` and a `keepalive` fetch, and writes on a WebSocket of its own; the worker then
 * writes on its socket at growing delays (now, after a microtask, 0, 10, 50, 200, 1000 ms) and sends a
 * `keepalive` fetch of its own. Each way of leaving (tab closed, navigated away, reloaded, browser closed,
 * renderer crashed) prints what reached this process and how long after the page's first word. Measures a
 * browser's behaviour; it is no test (Chromium decides, and may change).
 */

import { mkdtemp, rm } from "node:fs/promises";
import { createServer } from "node:http";
import type { AddressInfo } from "node:net";
import { tmpdir } from "node:os";
import { join } from "node:path";
import { chromium, type Page } from "playwright-core";
import { WebSocketServer } from "ws";
import { CHROMIUM_ARGS, findChromium } from "./find-chromium.mjs";

const PAGE = `<!doctype html><title>probe</title><body><script>
const run = new URLSearchParams(location.search).get("run");
const worker = new Worker("/worker.js?run=" + run);
const own = new WebSocket("ws://" + location.host + "/?from=page&run=" + run);
worker.onmessage = () => (document.body.dataset.ready = "1");
addEventListener("pagehide", () => {
  worker.postMessage("leave");
  navigator.sendBeacon("/beacon?run=" + run, "page beacon");
  fetch("/keepalive?run=" + run, { method: "POST", body: "page keepalive", keepalive: true });
  if (own.readyState === 1) own.send("page socket at pagehide");
});
</script>`;

const WORKER = `
const run = new URL(location.href).searchParams.get("run");
const socket = new WebSocket("ws://" + location.host + "/?from=worker&run=" + run);
socket.onopen = () => postMessage("ready");
const say = (what) => { if (socket.readyState === 1) socket.send(what); };
onmessage = async () => {
  say("worker at once");
  await Promise.resolve();
  say("worker after a microtask");
  fetch("/worker-keepalive?run=" + run, { method: "POST", body: "worker keepalive", keepalive: true }).catch(() => {});
  for (const ms of [0, 10, 50, 200, 1000]) {
    await new Promise((resolve) => setTimeout(resolve, ms));
    say("worker after " + ms + " ms more");
  }
};`;

interface Heard {
  run: string;
  what: string;
  at: number;
}
const heard: Heard[] = [];
const hear = (run: string, what: string) => heard.push({ run, what, at: performance.now() });

const server = createServer((request, response) => {
  const url = new URL(request.url ?? "/", "http://probe");
  const run = url.searchParams.get("run") ?? "?";
  if (url.pathname === "/") return void response.writeHead(200, { "content-type": "text/html" }).end(PAGE);
  if (url.pathname === "/other") return void response.writeHead(200, { "content-type": "text/html" }).end("<p>elsewhere</p>");
  if (url.pathname === "/worker.js") return void response.writeHead(200, { "content-type": "text/javascript" }).end(WORKER);
  let body = "";
  request.on("data", (chunk: Buffer) => (body += chunk.toString()));
  request.on("end", () => {
    hear(run, `${url.pathname.slice(1)}: ${body}`);
    response.writeHead(204).end();
  });
});
const sockets = new WebSocketServer({ server });
sockets.on("connection", (socket, request) => {
  const url = new URL(request.url ?? "/", "http://probe");
  const run = url.searchParams.get("run") ?? "?";
  socket.on("message", (data) => hear(run, `socket: ${String(data)}`));
  socket.on("close", () => hear(run, `socket closed (${url.searchParams.get("from")})`));
});
await new Promise<void>((done) => server.listen(0, "127.0.0.1", done));
const origin = `http://127.0.0.1:${(server.address() as AddressInfo).port}`;

const ways: Record<string, (page: Page) => Promise<unknown>> = {
  "tab closed (page.close)": (page) => page.close(),
  "tab closed, beforeunload run": (page) => page.close({ runBeforeUnload: true }),
  "navigated away": (page) => page.goto(`${origin}/other`),
  reloaded: (page) => page.reload(),
  "browser closed (context.close)": (page) => page.context().close(),
  "renderer crashed (CDP Page.crash)": async (page) => (await page.context().newCDPSession(page)).send("Page.crash").catch(() => {}),
};

const executablePath = findChromium();
if (!executablePath) throw new Error('No Chromium found: run "node scripts/ensure-chromium.mjs" or set CHROMIUM_PATH.');
for (const [way, leave] of Object.entries(ways)) {
  const profile = await mkdtemp(join(tmpdir(), "probe-pagehide-"));
  const context = await chromium.launchPersistentContext(profile, { executablePath, headless: true, args: CHROMIUM_ARGS });
  const page = await context.newPage();
  await page.goto(`${origin}/?run=${encodeURIComponent(way)}`);
  await page.waitForSelector("body[data-ready]", { state: "attached" });
  await new Promise((resolve) => setTimeout(resolve, 200));
  const left = performance.now();
  await leave(page);
  await new Promise((resolve) => setTimeout(resolve, 2500));
  await context.close().catch(() => {});
  await rm(profile, { recursive: true, force: true });
  const lines = heard.filter((one) => one.run === way);
  console.log(`\n${way}:`);
  for (const one of lines) console.log(`  +${Math.round(one.at - left)} ms  ${one.what}`);
  if (lines.length === 0) console.log("  (nothing)");
}
sockets.close();
server.close();
