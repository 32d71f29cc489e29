/**
 * Crash helpers for Playwright users (`pi-durable-web/testing`). They work on any page whose worker called
 * `serveHarness`: they reach the harness inside the worker, so the app needs no test hooks of its own.
 *
 *   await crashTab(page, "reload");                    // the product's crash: a reload
 *   await crashTab(page, "terminate-worker");          // the database worker dies, the page stays
 *   await crashTab(page, "renderer");                  // the renderer process dies (CDP Page.crash)
 *   const task = await waitForTask(page, (t) => t.kind === "example.counter" && t.state.status === "terminal");
 */
import type { Page, Worker as PlaywrightWorker } from "playwright-core";
import type { HarnessService, HarnessStatus } from "../host/protocol.ts";
import { PAGE_TEST_HOOK } from "../host/protocol.ts";
import type { TaskRecord } from "../storage/records.ts";

export type CrashKind = "reload" | "terminate-worker" | "renderer";

/** A task id, or a predicate over the committed record. */
export type TaskMatch = number | ((task: TaskRecord) => boolean);

/** The worker of `page` that serves the harness (waits for it to appear). */
export async function harnessWorker(page: Page, timeoutMs = 15_000): Promise<PlaywrightWorker> {
  // Time is counted in polls of 50 ms (Playwright's own timer), not read from the wall clock.
  for (let waited = 0; ; waited += 50) {
    for (const worker of page.workers()) {
      const serves = await worker.evaluate(() => "__piDurableHost" in globalThis).catch(() => false);
      if (serves) return worker;
    }
    if (waited > timeoutMs) throw new Error("No worker on this page serves a harness (serveHarness was not called).");
    await page.waitForTimeout(50);
  }
}

/** The harness status inside the page's worker. */
export async function harnessStatus(page: Page): Promise<HarnessStatus> {
  const worker = await harnessWorker(page);
  return worker.evaluate(() => (globalThis as unknown as { __piDurableHost: HarnessService }).__piDurableHost.status());
}

/**
 * The statuses of the page's own clients (`connectHarness` in the page), or undefined when the page has none
 * (its client lives elsewhere, or it was made before this hook existed).
 */
async function pageClientStatuses(page: Page): Promise<HarnessStatus[] | undefined> {
  return page
    .evaluate((key) => {
      const clients = (globalThis as unknown as Record<string, Set<{ status: HarnessStatus }> | undefined>)[key];
      return clients && clients.size > 0 ? [...clients].map((client) => client.status) : undefined;
    }, PAGE_TEST_HOOK)
    .catch(() => undefined);
}

/**
 * Runs read-only SQL through the page's ready client (the leader tab's harness in a follower tab): its rows, or
 * the error the query failed with (`failed`); undefined when the page has no ready client (or is navigating).
 */
export async function queryThroughPage(
  page: Page,
  sql: string,
  params: unknown[] = [],
): Promise<{ rows: Array<Record<string, unknown>> } | { failed: { name: string; message: string } } | undefined> {
  return page
    .evaluate(
      async ({ key, sql, params }) => {
        type PageClient = { status: HarnessStatus; query(sql: string, ...params: unknown[]): Promise<unknown> };
        const clients = (globalThis as unknown as Record<string, Set<PageClient> | undefined>)[key];
        const client = clients && [...clients].find((one) => one.status.kind === "ready");
        if (!client) return undefined;
        try {
          return { rows: (await client.query(sql, ...params)) as Array<Record<string, unknown>> };
        } catch (error) {
          return { failed: { name: (error as Error).name, message: (error as Error).message } };
        }
      },
      { key: PAGE_TEST_HOOK, sql, params },
    )
    .catch(() => undefined); // the page is navigating (a reload): no answer yet
}

/** What the page's ready client says its harness's open recovered; undefined without one. */
export async function recoveryThroughPage(page: Page): Promise<(HarnessStatus & { kind: "ready" }) | undefined> {
  const statuses = await pageClientStatuses(page);
  return statuses?.find((status): status is HarnessStatus & { kind: "ready" } => status.kind === "ready");
}

/**
 * Waits until the page's harness is ready: its client's, when the page made one with `connectHarness` — in a
 * follower tab that is the leader tab's harness, while the tab's own worker waits for the lock — else the
 * worker's own.
 */
export async function waitForReady(page: Page, timeoutMs = 30_000): Promise<void> {
  // Time is counted in polls of 50 ms (Playwright's own timer), not read from the wall clock.
  for (let waited = 0; ; waited += 50) {
    const clients = await pageClientStatuses(page);
    const status =
      clients?.find((one) => one.kind === "ready" || one.kind === "failed") ?? (await harnessStatus(page).catch(() => undefined));
    if (status?.kind === "ready") return;
    if (status?.kind === "failed") throw new Error(`The harness failed to open: ${status.error.name}: ${status.error.message}`);
    if (waited > timeoutMs) throw new Error(`The harness did not open in ${timeoutMs} ms (status: ${status?.kind ?? "no worker"}).`);
    await page.waitForTimeout(50);
  }
}

/**
 * Crashes the tab's database work. `reload` and `renderer` return a page that is loading again (for a
 * renderer crash, a new page in the same context: the crashed one is unusable).
 */
export async function crashTab(page: Page, kind: CrashKind): Promise<Page> {
  if (kind === "reload") {
    await page.reload();
    return page;
  }
  if (kind === "terminate-worker") {
    const worker = await harnessWorker(page);
    // Closing the worker's own scope stops it at once, mid-phase, exactly like Worker.terminate().
    await worker.evaluate(() => (globalThis as unknown as { close(): void }).close()).catch(() => {});
    return page;
  }
  const url = page.url();
  const session = await page.context().newCDPSession(page);
  const crashed = page.waitForEvent("crash", { timeout: 10_000 }).catch(() => {});
  // Not awaited: the renderer dies before it can answer, so the call settles only when the page is closed.
  void session.send("Page.crash").catch(() => {});
  await crashed;
  await page.close().catch(() => {});
  const next = await page.context().newPage();
  await next.goto(url);
  return next;
}

/** Polls the committed tasks until one matches (its id, or a predicate); resolves with it. */
export async function waitForTask(page: Page, match: TaskMatch, timeoutMs = 30_000): Promise<TaskRecord> {
  const matches = typeof match === "number" ? (task: TaskRecord) => task.id === match : match;
  // Time is counted in polls of 50 ms (Playwright's own timer), not read from the wall clock.
  for (let waited = 0; ; waited += 50) {
    // Through the page's client when it has one (in a follower tab its own worker never opens the database).
    const answer = await queryThroughPage(page, "SELECT record FROM tasks ORDER BY id");
    const throughPage = answer && "rows" in answer ? answer.rows : undefined; // a failed read is polled again
    const worker = answer ? undefined : await harnessWorker(page).catch(() => undefined);
    const rows = throughPage
      ? throughPage.map((row) => String(row.record))
      : worker
        ? await worker
            .evaluate(async () => {
              const host = (globalThis as unknown as { __piDurableHost: HarnessService }).__piDurableHost;
              if (host.status().kind !== "ready") return [] as string[];
              return (await host.query("SELECT record FROM tasks ORDER BY id")).map((row) => String(row.record));
            })
            .catch(() => [] as string[])
        : [];
    const found = rows.map((text) => JSON.parse(text) as TaskRecord).find(matches);
    if (found) return found;
    if (waited > timeoutMs) throw new Error(`No task matched in ${timeoutMs} ms.`);
    await page.waitForTimeout(50);
  }
}
