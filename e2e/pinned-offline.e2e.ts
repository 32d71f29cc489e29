import { describe, expect, it } from "vitest";
import { browserPerTest } from "./support/browser";
import { openDemo, startTask, ticks, waitForStatus } from "./support/demo";
import { edgePerTest } from "./support/edge";

// Issue 27 item 4, decision 0039, in real Chromium against a real workerd: a tab under a pinned lease
// (`ttlMs: Infinity`) reloads while the browser is offline (`context.setOffline`: the page from the service
// worker's cache, no socket to the object) and opens writable at once under the epoch it remembered; its work goes
// on offline, and once online the object holds it (the tab hands over at its close and the object counts on).
// Before, every open asked the object for a new epoch over the socket: offline, the open failed after the link's
// call timeout and the page never ran here.

const session = browserPerTest();
const edge = edgePerTest();

async function recordTabPrints(): Promise<string[]> {
  const lines: string[] = [];
  await session.context.exposeFunction("e2eTabPrinted", (line: string) => void lines.push(line));
  await session.context.addInitScript(() => {
    const forward = (globalThis as unknown as { e2eTabPrinted(line: string): void }).e2eTabPrinted;
    new BroadcastChannel("pi-durable-web:print").addEventListener("message", (event) => forward(String(event.data.line)));
  });
  return lines;
}

async function until(done: () => boolean, what: string): Promise<void> {
  await expect.poll(done, { timeout: 60_000, message: what }).toBe(true);
}

describe("a pinned lease through an offline reload (Chromium + workerd)", () => {
  it("reloaded offline, the tab runs here at once and counts; back online and closed, the object counts on from the tab's ticks, each tick once", async () => {
    const tabPrints = await recordTabPrints();
    const page = await openDemo(session, `?follow=${encodeURIComponent(edge.followUrl("pinned-reload"))}`);
    await waitForStatus(page, "ready");
    await page.waitForSelector('body[data-runs="here"]', { state: "attached" });
    await page.waitForFunction(() => navigator.serviceWorker.ready.then((registration) => registration.active?.state === "activated"));

    await session.context.setOffline(true);
    let offline = true;
    try {
      // Chromium's offline mode refuses new connections but keeps an open WebSocket: the object's restart drops
      // the tab's, so the network is really gone for the tab's worker, as when a train enters a tunnel.
      await edge.restart();
      const response = await page.reload();
      expect(response?.fromServiceWorker()).toBe(true);
      expect(await page.evaluate(() => navigator.onLine)).toBe(false);
      await waitForStatus(page, "ready");
      await page.waitForSelector('body[data-runs="here"]', { state: "attached" });
      expect(await page.textContent("#status")).toContain("the agent runs in this tab");
      await startTask(page, "example.counter", { to: 400 });
      await until(() => tabPrints.includes("tick 3"), "the tab printed tick 3 offline");
      await session.context.setOffline(false);
      offline = false;
    } finally {
      if (offline) await session.context.setOffline(false);
    }
    // Online again: the worker's socket comes back within its backoff (at most 10 s, 200 ticks) and the mirror pushes
    // what the tab did offline under its pinned epoch; closing then hands the lease over.
    await until(() => tabPrints.includes("tick 250"), "the tab printed tick 250 online");
    await page.close();
    const printedInTab = tabPrints.length;
    await edge.printed.until((lines) => lines.includes("tick 400"), "the object's tick 400");
    expect(tabPrints.length).toBe(printedInTab);
    const all = [...tabPrints, ...edge.printed.lines];
    expect(new Set(all).size).toBe(all.length);
    const first = Number(edge.printed.lines[0]!.split(" ")[1]);
    expect(first).toBeGreaterThan(250);
    expect(edge.printed.lines).toEqual(ticks(first, 400));
  });
});
