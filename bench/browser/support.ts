/**
 * What the browser benchmarks share: a production build of a bench page, a static server on 127.0.0.1, a
 * system Chromium on a fresh on-disk profile (so OPFS is real files), and the worker heap read over CDP.
 */
import { createReadStream } from "node:fs";
import { mkdtemp, rm, stat } from "node:fs/promises";
import { createServer } from "node:http";
import type { AddressInfo } from "node:net";
import { tmpdir } from "node:os";
import { extname, join, normalize, resolve } from "node:path";
import { type BrowserContext, type CDPSession, chromium, type Page } from "playwright-core";
import { build, type InlineConfig } from "vite";
import { CHROMIUM_ARGS, findChromium } from "../../scripts/find-chromium.mjs";

export const ROOT = resolve(new URL("../..", import.meta.url).pathname);
export const DIST = join(ROOT, ".tmp/bench-dist");

/** Builds a Vite config (a file path) quietly, with `overrides` merged over it. */
export async function buildPage(configFile: string, overrides: InlineConfig = {}): Promise<void> {
  const log = console.warn;
  // pi-ai's Node-only helper is externalized for the browser on every build; that warning is expected noise.
  console.warn = (...args: unknown[]) => {
    if (!String(args[0]).includes("externalized for browser compatibility")) log(...args);
  };
  try {
    await build({ ...overrides, configFile, logLevel: "error" });
  } finally {
    console.warn = log;
  }
}

export interface Server {
  url: string;
  close(): Promise<void>;
}

const TYPES: Record<string, string> = {
  ".html": "text/html; charset=utf-8",
  ".js": "text/javascript; charset=utf-8",
  ".mjs": "text/javascript; charset=utf-8",
  ".wasm": "application/wasm",
  ".json": "application/json",
};

/**
 * Serves `root` on a free port. `isolated` adds COOP/COEP (the peer's sqlocal needs SharedArrayBuffer);
 * our pages are served without them, as the demo app is. Every file is `no-store` (every reload downloads and
 * compiles the worker and the wasm again) unless `cache` is `"hashed"`: then Vite's content-hashed `assets/` are
 * served as a deployed Vite app's usually are (`public, max-age=31536000, immutable`) and the rest `no-cache`
 * (decision 0104: Chromium then reuses the compiled wasm across reloads).
 */
export async function serveStatic(root: string, options: { isolated?: boolean; cache?: "none" | "hashed" } = {}): Promise<Server> {
  const base = resolve(root);
  const isolation = options.isolated ? { "Cross-Origin-Opener-Policy": "same-origin", "Cross-Origin-Embedder-Policy": "require-corp" } : {};
  const server = createServer(async (request, response) => {
    const pathname = decodeURIComponent(new URL(request.url ?? "/", "http://localhost").pathname);
    const file = normalize(join(base, pathname.endsWith("/") ? `${pathname}index.html` : pathname));
    if (!file.startsWith(base)) return void response.writeHead(403).end();
    try {
      if (!(await stat(file)).isFile()) throw new Error("not a file");
    } catch {
      return void response.writeHead(404).end();
    }
    response.writeHead(200, {
      "Content-Type": TYPES[extname(file)] ?? "application/octet-stream",
      "Cache-Control":
        options.cache !== "hashed" ? "no-store" : pathname.startsWith("/assets/") ? "public, max-age=31536000, immutable" : "no-cache",
      ...isolation,
    });
    createReadStream(file).pipe(response);
  });
  await new Promise<void>((done) => server.listen(0, "127.0.0.1", done));
  const { port } = server.address() as AddressInfo;
  return {
    url: `http://127.0.0.1:${port}/`,
    close: () =>
      new Promise<void>((done) => {
        server.closeAllConnections();
        server.close(() => done());
      }),
  };
}

export interface Chromium {
  context: BrowserContext;
  version: string;
  /** Console errors and page errors seen so far (printed when a benchmark fails). */
  logs: string[];
  newPage(): Promise<Page>;
  close(): Promise<void>;
}

export function chromiumPath(): string {
  const path = findChromium();
  if (!path) throw new Error('No Chromium found: run "node scripts/ensure-chromium.mjs" or set CHROMIUM_PATH.');
  return path;
}

export async function launchChromium(options: { blockServiceWorkers?: boolean } = {}): Promise<Chromium> {
  const userDataDir = await mkdtemp(join(tmpdir(), "pi-durable-bench-"));
  const context = await chromium.launchPersistentContext(userDataDir, {
    executablePath: chromiumPath(),
    headless: true,
    // BENCH_CHROMIUM_ARGS (space-separated) for a diagnostic run, e.g. "--js-flags=--no-liftoff" (decision 0116).
    args: [...CHROMIUM_ARGS, ...(process.env.BENCH_CHROMIUM_ARGS?.split(" ").filter(Boolean) ?? [])],
    ...(options.blockServiceWorkers ? { serviceWorkers: "block" as const } : {}),
  });
  const logs: string[] = [];
  const version = context.browser()?.version() ?? "unknown";
  return {
    context,
    version,
    logs,
    async newPage() {
      const page = await context.newPage();
      page.on("console", (message) => {
        if (message.type() === "error" || message.type() === "warning") logs.push(`[${message.type()}] ${message.text()}`);
      });
      page.on("pageerror", (error) => logs.push(`[pageerror] ${error.message}`));
      return page;
    },
    async close() {
      await context.close();
      await rm(userDataDir, { recursive: true, force: true });
    },
  };
}

/**
 * The JS heap of the page's (only) dedicated worker after a full GC, over CDP: `Runtime.getHeapUsage` on the
 * worker target. Playwright's CDP sessions do not route flattened child sessions, so this attaches in the
 * non-flattened mode and talks to the worker through `Target.sendMessageToTarget`.
 */
export async function workerHeap(page: Page): Promise<{ usedBytes: number; totalBytes: number }> {
  const cdp: CDPSession = await page.context().newCDPSession(page);
  try {
    const attached = new Promise<string>((resolveSession, reject) => {
      const timer = setTimeout(() => reject(new Error("No worker target attached within 5 s.")), 5000);
      cdp.on("Target.attachedToTarget", (event) => {
        if (event.targetInfo.type === "worker") {
          clearTimeout(timer);
          resolveSession(event.sessionId);
        }
      });
    });
    const replies = new Map<number, (message: { result?: unknown; error?: { message: string } }) => void>();
    cdp.on("Target.receivedMessageFromTarget", (event) => {
      const message = JSON.parse(event.message) as { id?: number; result?: unknown; error?: { message: string } };
      if (message.id !== undefined) replies.get(message.id)?.(message);
    });
    await cdp.send("Target.setAutoAttach", { autoAttach: true, waitForDebuggerOnStart: false, flatten: false });
    const sessionId = await attached;
    let nextId = 0;
    const send = <T>(method: string, params: object = {}) =>
      new Promise<T>((resolveReply, reject) => {
        const id = ++nextId;
        replies.set(id, (message) =>
          message.error ? reject(new Error(`${method}: ${message.error.message}`)) : resolveReply(message.result as T),
        );
        void cdp.send("Target.sendMessageToTarget", { sessionId, message: JSON.stringify({ id, method, params }) }).catch(reject);
      });
    await send("HeapProfiler.collectGarbage");
    const usage = await send<{ usedSize: number; totalSize: number }>("Runtime.getHeapUsage");
    return { usedBytes: usage.usedSize, totalBytes: usage.totalSize };
  } finally {
    await cdp.detach().catch(() => {});
  }
}

/** Polls `predicate` in the page every `intervalMs` until it is truthy (Playwright's own polling). */
export async function waitInPage<T, A = undefined>(
  page: Page,
  predicate: (arg: A) => T,
  timeoutMs = 60_000,
  intervalMs = 10,
  arg?: A,
): Promise<T> {
  const handle = await page.waitForFunction(predicate as (arg: unknown) => T, arg, { timeout: timeoutMs, polling: intervalMs });
  return (await handle.jsonValue()) as T;
}
