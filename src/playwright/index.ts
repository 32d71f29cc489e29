/**
 * `pi-durable-web/playwright`: a @playwright/test fixture for apps whose worker calls `serveHarness`. It reaches
 * the harness inside the worker, so the app needs no test hooks of its own.
 *
 *   import { test, expect } from "pi-durable-web/playwright";
 *   test("a reload mid-task is recovered", async ({ page, harness }) => {
 *     await page.goto("/");
 *     await harness.ready();
 *     const point = await harness.armCrashPoint("checklist:after-step-2");
 *     await page.getByRole("button", { name: "Start" }).click();
 *     await point.reached();
 *     await harness.crash("reload");
 *     expect((await harness.ready()).tasks).toHaveLength(1);
 *   });
 */
import { mkdtemp, rm } from "node:fs/promises";
import { tmpdir } from "node:os";
import { join } from "node:path";
import { type BrowserContext, test as base, type Page } from "@playwright/test";
import type { Json } from "../base/json.ts";
import type { Recovery } from "../harness.ts";
import type { CrashPointHit, HarnessService } from "../host/protocol.ts";
import type { TaskRecord } from "../storage/records.ts";
import type { Row } from "../storage/storage.ts";
import { type BrowserCrashScenario, type BrowserCrashSweepOptions, browserCrashSweep } from "../testing/browser-sweep.ts";
import {
  type CrashKind,
  crashTab,
  harnessWorker,
  queryThroughPage,
  recoveryThroughPage,
  type TaskMatch,
  waitForReady,
  waitForTask,
} from "../testing/playwright.ts";

export { expect } from "@playwright/test";
export {
  BROWSER_INVARIANTS,
  type BrowserCrashScenario,
  type BrowserCrashSweepOptions,
  type BrowserCrashSweepResult,
  type BrowserCrashWorld,
  type BrowserInvariant,
  browserCrashSweep,
} from "../testing/browser-sweep.ts";
export type { CrashKind, TaskMatch } from "../testing/playwright.ts";

/** A crash point armed in the worker. */
export interface ArmedCrashPoint {
  /** Resolves when the worker reaches it; the phase then stays stopped there until you crash the tab. */
  reached(): Promise<CrashPointHit>;
}

/** The harness of the page under test, driven from the test. */
export interface HarnessFixture {
  /** The page the harness lives in; after `crash("renderer")` it is the new page that replaced the crashed one. */
  readonly page: Page;
  /**
   * Waits until the page's harness is open; resolves with what that open recovered. In a follower tab (another
   * tab leads) that is the leader's harness, reached through the page's client, as are `waitForTask` and `query`;
   * crash points live in the leading tab's worker.
   */
  ready(options?: { timeout?: number }): Promise<Recovery>;
  /**
   * Crashes the database work: `reload` (the product's crash), `terminate-worker` (the worker dies, the page
   * stays: reload to recover), `renderer` (the tab's renderer process dies; Chromium only, the test is skipped
   * elsewhere). Call `ready()` afterwards to wait for the recovered harness.
   */
  crash(kind: CrashKind): Promise<void>;
  /** Arms a crash point (`runtime.crashPoint(name)` in a task, or a built-in one such as `tool:after-intent`). */
  armCrashPoint(name: string): Promise<ArmedCrashPoint>;
  /** Polls the committed tasks until one matches (a task id or a predicate); resolves with its record. */
  waitForTask(match: TaskMatch, options?: { timeout?: number }): Promise<TaskRecord>;
  /** Read-only SQL on the page's database, for example `SELECT id, status FROM tasks`. */
  query(sql: string, ...params: Json[]): Promise<Row[]>;
  /** What the current open recovered: how the last harness stopped, and the tasks a crash cut off. */
  recovered(): Promise<Recovery>;
}

export interface HarnessFixtureOptions {
  /**
   * Runs the test in a persistent context (an on-disk profile in a temporary directory), so OPFS is real files
   * with real flushes. Default false: Playwright's incognito context keeps OPFS in memory (it survives reloads
   * within the test, not the context).
   */
  persistentContext: boolean;
}

type Hooked = { __piDurableHost: HarnessService };

export const test = base.extend<HarnessFixtureOptions & { harness: HarnessFixture }>({
  persistentContext: [false, { option: true }],

  context: async ({ context, persistentContext, browserName, playwright, launchOptions }, use, testInfo) => {
    if (!persistentContext) return use(context);
    const userDataDir = await mkdtemp(join(tmpdir(), "pi-durable-playwright-"));
    const { baseURL, viewport } = testInfo.project.use;
    const persistent: BrowserContext = await playwright[browserName].launchPersistentContext(userDataDir, {
      ...launchOptions,
      ...(baseURL !== undefined ? { baseURL } : {}),
      ...(viewport !== undefined ? { viewport } : {}),
    });
    try {
      await use(persistent);
    } finally {
      await persistent.close();
      await rm(userDataDir, { recursive: true, force: true });
    }
  },

  harness: async ({ page, browserName }, use) => {
    let current = page;
    const hook = async () => harnessWorker(current);
    const fixture: HarnessFixture = {
      get page() {
        return current;
      },
      async ready(options = {}) {
        await waitForReady(current, options.timeout);
        return fixture.recovered();
      },
      async crash(kind) {
        if (kind === "renderer" && browserName !== "chromium") {
          base.skip(true, `crash("renderer") needs Chromium (CDP Page.crash); this test runs in ${browserName}.`);
        }
        current = await crashTab(current, kind);
      },
      async armCrashPoint(name) {
        const worker = await hook();
        const armed = await worker.evaluateHandle(
          (point) => ({ hit: (globalThis as unknown as Hooked).__piDurableHost.armCrashPoint(point) }),
          name,
        );
        return { reached: () => armed.evaluate((handle) => handle.hit) };
      },
      waitForTask: (match, options = {}) => waitForTask(current, match, options.timeout),
      async query(sql, ...params) {
        const throughPage = await queryThroughPage(current, sql, params as unknown[]);
        if (throughPage && "failed" in throughPage) {
          const error = new Error(throughPage.failed.message);
          error.name = throughPage.failed.name;
          throw error;
        }
        if (throughPage) return throughPage.rows as Row[];
        const worker = await hook();
        // Json is too deep for Playwright's argument types: the rows cross as plain structured clones.
        const run = (args: { sql: string; params: unknown[] }): Promise<unknown> =>
          (globalThis as unknown as Hooked).__piDurableHost.query(args.sql, ...(args.params as Json[]));
        return (await worker.evaluate(run, { sql, params: params as unknown[] })) as Row[];
      },
      async recovered() {
        const ready = await recoveryThroughPage(current);
        if (ready) return ready.recovery;
        const worker = await hook();
        return worker.evaluate(async () => (await (globalThis as unknown as Hooked).__piDurableHost.inspect()).recovery);
      },
    };
    await use(fixture);
  },
});

export interface CrashEveryCommitOptions extends Omit<BrowserCrashSweepOptions, "shard" | "context"> {
  /** Tests the worlds are dealt to, run in parallel by Playwright's workers. Default 2. */
  shards?: number;
  /** Per test (each shard counts the commits once, then runs its worlds). Default 10 minutes. */
  testTimeoutMs?: number;
}

/**
 * Declares a crash sweep of your scenario as Playwright tests: `shards` tests in a parallel describe block,
 * each counting the scenario's commits once and then crashing its share of them for real, one fresh context
 * per commit. A test fails with the first world of its share that breaks an invariant (`CrashSweepViolation`:
 * the crash, the invariant, the commits before and after).
 *
 *   crashEveryCommit("the checklist survives a crash at every commit", {
 *     run: (page) => page.getByRole("button", { name: "Start" }).click(),
 *   }, { crash: "reload" });
 */
export function crashEveryCommit(title: string, scenario: BrowserCrashScenario, options: CrashEveryCommitOptions = {}): void {
  const { shards = 2, testTimeoutMs = 600_000, ...sweep } = options;
  base.describe(title, () => {
    base.describe.configure({ mode: "parallel" });
    for (let index = 0; index < shards; index++) {
      base(`worlds ${index + 1} of ${shards}`, async ({ browser, browserName }, testInfo) => {
        if (sweep.crash === "renderer") base.skip(browserName !== "chromium", 'crash: "renderer" needs Chromium (CDP Page.crash).');
        testInfo.setTimeout(testTimeoutMs);
        const { baseURL } = testInfo.project.use;
        const result = await browserCrashSweep(
          browser,
          { name: title, ...scenario },
          {
            ...sweep,
            shard: { index, count: shards },
            ...(baseURL !== undefined ? { context: { baseURL } } : {}),
          },
        );
        testInfo.annotations.push({ type: "crash sweep", description: `${result.commits} commits, ${result.worlds} worlds in this shard` });
      });
    }
  });
}
