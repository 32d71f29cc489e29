import { mkdtemp, rm } from "node:fs/promises";
import { tmpdir } from "node:os";
import { join } from "node:path";
import { type BrowserContext, chromium, type Page } from "playwright-core";
import { afterEach, beforeEach, inject, onTestFailed } from "vitest";
import { CHROMIUM_ARGS, findChromium } from "../../scripts/find-chromium.mjs";

export interface BrowserSession {
  readonly context: BrowserContext;
  /** Page and worker console output and page errors, printed when the test fails. */
  readonly logs: string[];
  /** A new tab on `url` (default: the e2e page), once the page says it is ready (`body[data-ready]`). */
  newPage(url?: string): Promise<Page>;
  /** Collects the console output and errors of a page opened some other way (for example by crashTab). */
  track(page: Page): Page;
  /** Reloads (the crash) and waits for the page to be ready again. */
  reload(page: Page): Promise<void>;
  close(): Promise<void>;
}

/**
 * Starts Chromium on a fresh on-disk profile, so OPFS is real files with real flushes (an incognito
 * `browser.newContext()` keeps OPFS in memory), and nothing leaks between tests.
 */
export async function startBrowser(): Promise<BrowserSession> {
  const executablePath = findChromium();
  if (!executablePath) throw new Error('No Chromium found: run "node scripts/ensure-chromium.mjs" or set CHROMIUM_PATH.');
  const baseUrl = inject("e2eBaseUrl");
  const userDataDir = await mkdtemp(join(tmpdir(), "pi-durable-e2e-"));
  const context = await chromium.launchPersistentContext(userDataDir, { executablePath, headless: true, args: CHROMIUM_ARGS });
  const logs: string[] = [];
  onTestFailed(() => {
    if (logs.length) console.log(`browser log:\n  ${logs.join("\n  ")}`);
  });
  const ready = (page: Page) => page.waitForSelector("body[data-ready]", { state: "attached" });
  const tracked = new WeakSet<Page>();
  const track = (page: Page) => {
    if (tracked.has(page)) return page;
    tracked.add(page);
    page.on("console", (message) => logs.push(`[${message.type()}] ${message.text()}`));
    page.on("pageerror", (error) => logs.push(`[pageerror] ${error.message}`));
    page.on("worker", (worker) => worker.on("close", () => logs.push(`[worker closed] ${worker.url()}`)));
    return page;
  };
  return {
    context,
    logs,
    track,
    async newPage(url = baseUrl) {
      const page = track(await context.newPage());
      await page.goto(url);
      await ready(page);
      return page;
    },
    async reload(page) {
      await page.reload();
      await ready(page);
    },
    async close() {
      await context.close();
      await rm(userDataDir, { recursive: true, force: true });
    },
  };
}

/**
 * A fresh browser for every test of the file (started before each, closed after): the returned session
 * forwards to the current test's browser, so a file declares it once at the top.
 */
export function browserPerTest(): BrowserSession {
  let current: BrowserSession | undefined;
  beforeEach(async () => {
    current = await startBrowser();
  });
  afterEach(async () => {
    await current?.close();
    current = undefined;
  });
  const now = (): BrowserSession => {
    if (!current) throw new Error("browserPerTest(): the session exists only while a test runs.");
    return current;
  };
  return {
    get context() {
      return now().context;
    },
    get logs() {
      return now().logs;
    },
    newPage: (url) => now().newPage(url),
    track: (page) => now().track(page),
    reload: (page) => now().reload(page),
    close: () => now().close(),
  };
}
