import type { Page, Worker } from "playwright-core";
import { describe, expect, it } from "vitest";
import { browserPerTest } from "./support/browser";
import { startTask, ticks } from "./support/demo";
import { edgePerTest } from "./support/edge";
import { heardBy, holderOf, openFollowing, recordTabPrints } from "./support/follow";

// Decision 0125 (issue 27): the page's reads of its own database never wait on the network. e2e/leave-late.e2e.ts's
// silent link (the worker's `WebSocket.prototype.send` drops every frame, the link stays up, the page's own socket
// carries its `lease.leaving`): before, from the `pagehide` on, `client.query` and `client.listConversations` froze
// until the frames were delivered again, then failed with HarnessClosed — the host stayed on the handed-over, stopped
// harness until the object answered the leave, and the page's tabs endpoint held that HarnessClosed while the worker's
// status said ready. Now the host opens its copy again read-only at the hand-over, and the reads answer from it.
// Bounded by order, not by time: every read is answered while the worker's frames are still being dropped.

const session = browserPerTest();
const edge = edgePerTest();
const TO = 40;

declare global {
  var e2eSilent: { readonly dropped: number; restore(): void } | undefined;
  /** The page's reads: what was asked, when (the page's clock), and how it was answered. */
  var e2eReads: Array<{ method: string; at: string; answered?: boolean; error?: string }> | undefined;
  var e2eRead: ((at: string) => void) | undefined;
}

function harnessWorker(page: Page): Worker {
  const workers = page.workers();
  expect(workers.length, "the demo's harness worker").toBeGreaterThan(0);
  return workers[0]!;
}

/** Asks the page for one of each read (labelled `at`), answered into `e2eReads`. */
function readIn(page: Page, at: string): Promise<void> {
  return page.evaluate((at) => globalThis.e2eRead!(at), at);
}

/** The reads labelled `at` once every one answered (polled: they either answer or the poll's timeout fails the test). */
async function answered(page: Page, at: string): Promise<Array<{ method: string; error?: string }>> {
  const reads = () => page.evaluate((at) => globalThis.e2eReads!.filter((read) => read.at === at), at);
  await expect
    .poll(async () => (await reads()).filter((read) => !read.answered).map((read) => read.method), {
      timeout: 30_000,
      message: `the page's reads ${at} answered while the worker's frames are dropped`,
    })
    .toEqual([]);
  return reads();
}

describe("the page's reads while its worker's link is silent (Chromium + workerd, decision 0125)", () => {
  it("S5: from pagehide on, with every frame of the worker lost and the object taking over, the page's query, listConversations, inspect and forks answer from its copy, read-only, before the frames are delivered again; then it follows the object to the end", async () => {
    const name = "follow-silent-reads";
    const tabPrints = await recordTabPrints(session);
    const page = await openFollowing(session, edge, name);
    await page.waitForSelector('body[data-runs="here"]', { state: "attached", timeout: 30_000 });
    await startTask(page, "example.counter", { to: TO, everyMs: 300, declared: true });
    await expect.poll(() => tabPrints.length, { timeout: 60_000, message: "the tab counts" }).toBeGreaterThanOrEqual(3);
    await page.evaluate(() => {
      const reads: NonNullable<typeof globalThis.e2eReads> = (globalThis.e2eReads = []);
      const calls: Array<[string, () => Promise<unknown>]> = [
        ["query", () => pi.client.query("SELECT id, status FROM tasks")],
        ["listConversations", () => pi.client.listConversations()],
        ["inspect", () => pi.client.inspect()],
        ["forks", () => pi.client.forks()],
      ];
      globalThis.e2eRead = (at) => {
        for (const [method, call] of calls) {
          const read: (typeof reads)[number] = { method, at };
          reads.push(read);
          call().then(
            () => void (read.answered = true),
            (error: unknown) => {
              read.answered = true;
              read.error = String(error);
            },
          );
        }
      };
    });

    // The worker's link stays open but every frame it sends is lost.
    await harnessWorker(page).evaluate(() => {
      const send = WebSocket.prototype.send;
      let dropped = 0;
      WebSocket.prototype.send = () => void dropped++;
      globalThis.e2eSilent = {
        get dropped() {
          return dropped;
        },
        restore() {
          WebSocket.prototype.send = send;
        },
      };
    });
    await readIn(page, "before pagehide");
    expect((await answered(page, "before pagehide")).filter((read) => read.error !== undefined)).toEqual([]);
    // The page leaves (left open): reads asked in the same task as its `pagehide`, then again while the object takes
    // over, and once the tab shows the work runs elsewhere.
    await page.evaluate(() => {
      globalThis.dispatchEvent(new PageTransitionEvent("pagehide", { persisted: true }));
      globalThis.e2eRead!("at pagehide");
    });
    await expect
      .poll(() => heardBy(edge, name), { timeout: 30_000, message: "the object heard the page's word" })
      .toMatchObject({ leaving: 1 });
    await readIn(page, "after the word");
    await edge.printed.until((lines) => lines.length >= 1, "the object's first tick");
    await page.waitForSelector('body[data-runs="elsewhere"]', { state: "attached", timeout: 60_000 });
    await readIn(page, "while the object runs");
    const seen = () => JSON.stringify({ tab: tabPrints, object: edge.printed.lines });
    const during = [
      ...(await answered(page, "at pagehide")),
      ...(await answered(page, "after the word")),
      ...(await answered(page, "while the object runs")),
    ];
    // Still silent: nothing the worker sent since the cut has arrived (no release), and it is still dropping.
    expect(await heardBy(edge, name), seen()).toEqual({ release: 0, leaving: 1 });
    const dropped = await harnessWorker(page).evaluate(() => globalThis.e2eSilent?.dropped ?? 0);
    expect(dropped, seen()).toBeGreaterThan(0);
    // Answered, not refused (before: HarnessClosed once the frames came back).
    expect(
      during.filter((read) => read.error !== undefined),
      seen(),
    ).toEqual([]);
    // The copy reads what the tab committed, read-only (S5).
    const copy = await page.evaluate(async () => ({
      scheduling: (await pi.client.inspect()).scheduling,
      tasks: (await pi.client.query("SELECT id FROM tasks")).length,
    }));
    expect(copy, seen()).toMatchObject({ scheduling: "read-only" });
    expect(copy.tasks, seen()).toBeGreaterThan(0);

    // Its link delivering again, the tab follows the object to the end.
    await harnessWorker(page).evaluate(() => globalThis.e2eSilent?.restore());
    await edge.printed.until((lines) => lines.includes(`tick ${TO}`), "the object's last tick");
    expect([...tabPrints, ...edge.printed.lines], seen()).toEqual(ticks(1, TO));
    expect(await holderOf(edge.followUrl(name)), seen()).toMatchObject({ object: true });
    await page.waitForSelector('body[data-status="ready"][data-runs="elsewhere"]', { state: "attached", timeout: 60_000 });
    await readIn(page, "after the frames came back");
    expect(
      (await answered(page, "after the frames came back")).filter((read) => read.error !== undefined),
      seen(),
    ).toEqual([]);
    console.log(`silent reads: ${during.length} reads answered while ${dropped} frames were dropped; ${seen()}`);
  }, 300_000);
});
