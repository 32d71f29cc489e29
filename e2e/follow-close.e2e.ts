import type { Page, Worker } from "playwright-core";
import { describe, expect, it } from "vitest";
import type { HarnessClient } from "../src/browser/client.ts";
import "./app/host-api.ts";
import { browserPerTest } from "./support/browser";
import { edgePerTest } from "./support/edge";
import { rpcOf } from "./support/follow";
import { harnessWorkerOf } from "./support/harness-worker";

// Decision 0133 and its reviews (H1, M1) in Chromium + workerd: the page closes its worker's host (`client.close()`,
// the worker's `service.close()`) while the tab holds the lease and mirrors its commits to its object. The last commits
// the tab stored have not reached the object yet (the worker's frames are held back, then let go): the close waits for
// them, and only then lets the database's Web Lock go — a tab queued on the lock gets it when the object already holds
// every position the tab stored. Then the follow link's socket is closed and no new one opens, and another tab opens
// the database.

const session = browserPerTest();
const edge = edgePerTest();
/** The e2e worker's database (its pool and the default path), as its Web Lock names it (src/browser/ownership.ts). */
const LOCK = "pi-durable-web:.e2e-host-pool:/pi-durable.sqlite3";
/** `WebSocket.CLOSED` (this Node has no WebSocket global). */
const CLOSED = 3;

declare global {
  interface Window {
    client: HarnessClient;
    closing: Promise<void>;
    granted: boolean;
    e2eAtGrant(): Promise<void>;
  }
  var __piDurableCommits: { log(): Array<{ fence?: { epoch: number; position: number } }> } | undefined;
  var e2eHeld: { readonly count: number; release(): void } | undefined;
}

/**
 * The head of object `name`'s own log (0 before any): the last position it applied from the tab. A following object
 * keeps no rows of the tab's (nothing to push on): its head is the marker's floor, `log_position` (as `logHead` in
 * src/storage/sqlite/schema.ts reads it).
 */
async function objectHead(name: string): Promise<number> {
  const [row] = (await rpcOf(
    edge,
    name,
    "query",
    `SELECT max(coalesce((SELECT max(position) FROM pi_durable_log), 0),
       coalesce((SELECT CAST(value AS INTEGER) FROM pi_durable_meta WHERE key = 'log_position'), 0)) AS head`,
  )) as Array<{ head: number }>;
  return row!.head;
}

/** The positions the tab stored under `epoch` (its worker's commit watch). */
async function storedUnder(worker: Worker, epoch: number): Promise<number[]> {
  const commits = await worker.evaluate(() => globalThis.__piDurableCommits?.log() ?? []);
  return commits.flatMap((commit) => (commit.fence?.epoch === epoch ? [commit.fence.position] : []));
}

/** A tab of the e2e page whose worker follows object `name`, once it runs the work here. */
async function followingTab(name: string): Promise<Page> {
  const page = await session.newPage();
  await page.evaluate(async (url) => {
    window.client = window.hostE2e.connect({ follow: url });
    await window.client.ready();
  }, edge.followUrl(name));
  await page.waitForFunction(() => window.client.status.kind === "ready" && window.client.status.runs === "here", undefined, {
    timeout: 30_000,
  });
  return page;
}

describe("the worker's host closes while the tab follows its object (decision 0133)", () => {
  it("S4: what the tab stored reaches the object before the database's lock goes; the follow socket closes and does not reconnect; another tab then opens the database", async () => {
    const name = "follow-close"; // a 10-minute lease: the object takes nothing over during the test
    const page = await followingTab(name);
    const worker = await harnessWorkerOf(page);
    const epoch = (await page.evaluate(() => (window.client.status as { epoch?: number }).epoch))!;
    expect(epoch).toBeGreaterThan(0);
    await page.evaluate(() => window.client.call("count", 100_000, 100));
    await expect.poll(() => objectHead(name), { timeout: 30_000, message: "the object receives the tab's commits" }).toBeGreaterThan(3);

    // From now on every frame the worker sends is held back (the link stays up): the tab's next commits stay
    // unacknowledged. Held, not lost: let go in order later.
    await worker.evaluate(() => {
      const send = WebSocket.prototype.send;
      const held: Array<[WebSocket, Parameters<WebSocket["send"]>[0]]> = [];
      WebSocket.prototype.send = function (this: WebSocket, frame) {
        held.push([this, frame]);
      };
      globalThis.e2eHeld = {
        get count() {
          return held.length;
        },
        release() {
          WebSocket.prototype.send = send;
          for (const [socket, frame] of held.splice(0)) if (socket.readyState === WebSocket.OPEN) send.call(socket, frame);
        },
      };
    });
    const acknowledged = await objectHead(name);
    await expect
      .poll(async () => Math.max(0, ...(await storedUnder(worker, epoch))), { timeout: 30_000, message: "the tab stores on" })
      .toBeGreaterThan(acknowledged + 2);

    await page.evaluate(() => {
      window.closing = window.client.close();
    });
    // The harness closed; the close now waits for the object's acknowledgement, the database's lock still held.
    await expect.poll(() => worker.evaluate(() => globalThis.e2eHarness?.closed === true), { timeout: 30_000 }).toBe(true);
    const stored = await storedUnder(worker, epoch);
    const last = Math.max(...stored);
    expect(last, "the tab stored past what the object holds").toBeGreaterThan(await objectHead(name));

    // Another tab queues for the database's lock; when granted, it asks what the object holds then.
    const other = await session.newPage();
    let headAtGrant: number | undefined;
    await other.exposeFunction("e2eAtGrant", async () => {
      headAtGrant = await objectHead(name);
    });
    const held = await other.evaluate(async (lock) => (await navigator.locks.query()).held?.some((one) => one.name === lock), LOCK);
    expect(held, `${LOCK} is held while the close waits`).toBe(true);
    await other.evaluate((lock) => {
      window.granted = false;
      void navigator.locks.request(lock, async () => {
        await window.e2eAtGrant();
        window.granted = true;
      });
    }, LOCK);

    // The frames go out: the object acknowledges, the close ends, the lock goes.
    await worker.evaluate(() => globalThis.e2eHeld?.release());
    await other.waitForFunction(() => window.granted, undefined, { timeout: 30_000 });
    expect(headAtGrant, `the object's head when the lock went; the tab stored ${stored[0]}-${last}`).toBeGreaterThanOrEqual(last);
    await page.evaluate(() => window.closing);
    expect(await page.evaluate(() => window.client.status.kind)).toBe("closed");
    // The tab's epoch is the object's last: it took nothing over, the tab's stretch is the whole log.
    expect(await rpcOf(edge, name, "query", "SELECT epoch, start FROM pi_durable_epochs ORDER BY epoch")).toEqual([{ epoch, start: 1 }]);

    // The follow link ended with the close: its socket closed cleanly — the object answered its Close frame (decision
    // 0136; before, the socket stayed CLOSING until Chromium gave up, 1006) — and no new one opens (a reconnect's first
    // wait is 250 ms; the bounded wait below covers it several times over).
    const closes = () =>
      worker.evaluate(() => globalThis.e2eFollowSockets.map((one) => ({ state: one.socket.readyState, closed: one.closed })));
    await expect.poll(closes, { timeout: 10_000 }).toEqual([{ state: CLOSED, closed: { code: 1000, wasClean: true } }]);
    await new Promise((resolve) => setTimeout(resolve, 2_000));
    expect(await closes()).toEqual([{ state: CLOSED, closed: { code: 1000, wasClean: true } }]);

    // Another tab opens the database and follows the same object.
    const next = await session.newPage();
    await next.evaluate(async (url) => {
      window.client = window.hostE2e.connect({ follow: url });
      await window.client.ready();
    }, edge.followUrl(name));
    expect(await next.evaluate(() => window.client.role)).toBe("leader");
  }, 120_000);
});
