import { describe, expect, it } from "vitest";
import { browserPerTest } from "./support/browser";
import { openDemo, query, startTask, waitForShownTask, waitForStatus } from "./support/demo";
import { edgePerTest } from "./support/edge";
import { openFollowing, recordTabPrints } from "./support/follow";

// A real idle eviction (issue 27 item 6, decision 0046): workerd evicts a Durable Object 10 s after its last event
// was done, an event being done once its handler returned and every timer it set fired (server.c++
// `ActorContainer::inactive()` → `handleShutdown()`; io-context.c++ adds each of an actor's timers to the event's
// `waitUntil` tasks). A following object sets no timer (the alarm watches the expiry), so between two pushes of a
// slow count it really goes: no restart of workerd, no abort. Its hibernatable follow socket stays; the next push
// starts a new instance, which applies it to the copy under the same lease, and takes over when the tab leaves.

const session = browserPerTest();
const edge = edgePerTest();

/** Longer than workerd's 10 s of inactivity, with room for a loaded machine. */
const EVERY_MS = 16_000;

describe("a real idle eviction of a following object (Chromium + workerd, issue 27 item 6)", () => {
  it("S4/S12: evicted while idle between two pushes, the object comes back on the next one: the copy and the lease go on, the takeover after it finishes the count, every tick printed once", async () => {
    const name = "follow-idle"; // a 10 minute lease: the tab renews it no sooner than every 200 s, so nothing else wakes the object
    const tabPrints = await recordTabPrints(session);
    const page = await openFollowing(session, edge, name);
    await page.waitForSelector('body[data-runs="here"]', { state: "attached" });
    await startTask(page, "example.counter", { to: 3, everyMs: EVERY_MS });
    await expect.poll(() => tabPrints.includes("tick 1"), { timeout: 30_000 }).toBe(true);
    const before = edge.started.lines.length;
    expect(before).toBe(1); // the one instance that answered the tab's open and its pushes so far
    // Tick 2's push is the first event after a quiet EVERY_MS: a new instance receives it.
    await expect.poll(() => tabPrints.includes("tick 2"), { timeout: EVERY_MS + 30_000 }).toBe(true);
    await expect.poll(() => edge.started.lines.length, { timeout: 10_000, message: "a second instance (the first was evicted)" }).toBe(2);
    // The tab still holds the lease (the new instance took nothing over): it writes on.
    expect(await page.getAttribute("body", "data-runs")).toBe("here");
    const tabRows = await query(
      page,
      "SELECT record ->> '$.state.checkpoint.n' AS n, record ->> '$.restarts' AS restarts FROM tasks WHERE kind = 'example.counter'",
    );
    expect(tabRows).toEqual([{ n: 3, restarts: null }]);
    // The tab leaves: the evicted object's next instance takes the lease from its copy and finishes.
    await page.evaluate(() => pi.client.leave());
    await page.close();
    await edge.printed.until((lines) => lines.includes("tick 3"), "the object's tick 3");
    expect(tabPrints).toEqual(["tick 1", "tick 2"]);
    expect(edge.printed.lines).toEqual(["tick 3"]);
    const watcher = await openDemo(session, `?edge=${encodeURIComponent(edge.socketUrl(name))}`);
    await waitForStatus(watcher, "ready");
    expect(await waitForShownTask(watcher, "counted to 3")).toContain("terminal");
    // S12's end, on the object: terminal, no memos, no restarts (the task slept through the eviction and the
    // hand-over; only a running task is counted, S4).
    const rows = await query(
      watcher,
      "SELECT status, record ->> '$.memos' AS memos, record ->> '$.restarts' AS restarts FROM tasks WHERE kind = 'example.counter'",
    );
    expect(rows).toEqual([{ status: "terminal", memos: null, restarts: null }]);
    console.log(`object instances ${edge.started.lines.length} (no restart, no abort)`);
  }, 180_000);
});
