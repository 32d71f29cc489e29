import type { Page, Worker } from "playwright-core";
import { describe, expect, it } from "vitest";
import { browserPerTest } from "./support/browser";
import { startTask, taskRows, ticks } from "./support/demo";
import { edgePerTest } from "./support/edge";
import { holderOf, openFollowing, recordTabPrints, tickOf } from "./support/follow";

// Decision 0134 (issue 27; tried in 0133 and withdrawn there): since 0127 the page's reads answer from the read-only
// copy while Run here takes the lease back, but a conversation watch (`useChat`, `openConversation`) asked then waited
// for the harness opened after the take-back — over a silent link, until the frames were delivered again: the page's
// chat froze. Now it starts on the copy at once and moves to the harness under the lease. And the tab runs on after
// the take-back: in 0133's runs it took the lease back and never stepped again (its first push met the object's
// instance that had handed back; fixed in decision 0130's later section). Bounded by order, not by time: the watch is
// answered while the worker's frames are still being dropped and the object still holds the lease.

const session = browserPerTest();
const edge = edgePerTest();
/** Far enough that the object is still counting when the frames are delivered again (300 ms a tick). */
const TO = 100;

declare global {
  var e2eMuted: { readonly dropped: number; readonly handBacks: number; restore(): void } | undefined;
  /** Run here's outcome, the watch's answer, and each view state it rendered (the ids of its entries). */
  var e2eTakeBack: { runHere?: string; answered: boolean; lost?: string; views: number[][] } | undefined;
}

function harnessWorker(page: Page): Worker {
  const workers = page.workers();
  expect(workers.length, "the demo's harness worker").toBeGreaterThan(0);
  return workers[0]!;
}

describe("a conversation watch during Run here over a silent link (Chromium + workerd, decision 0134)", () => {
  it("S5, S12: with every frame of the worker lost, Run here waits while a watch asked during its take-back is answered with the copy's view; once the frames are delivered the lease comes back, the watch moves, and the tab counts on to the end — every tick printed once, the count completed, not faulted", async () => {
    const name = "follow-watch-take-back";
    const tabPrints = await recordTabPrints(session);
    const page = await openFollowing(session, edge, name);
    await page.waitForSelector('body[data-runs="here"]', { state: "attached", timeout: 30_000 });
    await startTask(page, "example.counter", { to: TO, everyMs: 300, declared: true });
    await expect.poll(() => tabPrints.length, { timeout: 60_000, message: "the tab counts" }).toBeGreaterThanOrEqual(3);
    // The agent moves to the object; the tab follows it read-only.
    await page.evaluate(() => pi.client.leave());
    await page.waitForSelector('body[data-runs="elsewhere"]', { state: "attached", timeout: 60_000 });
    await edge.printed.until((lines) => lines.length >= 1, "the object's first tick");
    const conversationId = await page.evaluate(async () => (await pi.client.listConversations())[0]!.id);

    // The worker's link stays open but every frame it sends is lost: the take-back's call never reaches the object.
    await harnessWorker(page).evaluate(() => {
      const send = WebSocket.prototype.send;
      let dropped = 0;
      let handBacks = 0;
      WebSocket.prototype.send = (data) => {
        dropped++;
        if (typeof data === "string" && data.includes('"handBack"')) handBacks++;
      };
      globalThis.e2eMuted = {
        get dropped() {
          return dropped;
        },
        get handBacks() {
          return handBacks;
        },
        restore() {
          WebSocket.prototype.send = send;
        },
      };
    });
    const state = () => page.evaluate(() => globalThis.e2eTakeBack!);
    const silent = () =>
      harnessWorker(page).evaluate(() => ({ dropped: globalThis.e2eMuted!.dropped, handBacks: globalThis.e2eMuted!.handBacks }));
    const seen = async () => {
      const { views, ...rest } = await state();
      return JSON.stringify({ ...rest, views: views.length, tab: tabPrints, object: edge.printed.lines });
    };

    // Run here: its take-back asks the object for the lease (the call is dropped)...
    await page.evaluate(() => {
      const state: NonNullable<typeof globalThis.e2eTakeBack> = (globalThis.e2eTakeBack = { answered: false, views: [] });
      pi.client.runHere().then(
        () => void (state.runHere = "ok"),
        (error: unknown) => void (state.runHere = String(error)),
      );
    });
    await expect
      .poll(async () => (await silent()).handBacks, { timeout: 30_000, message: "the take-back's call sent (and lost)" })
      .toBeGreaterThan(0);
    // ...and, the take-back under way, the page opens the conversation's view, as its chat does.
    await page.evaluate((conversationId) => {
      const state = globalThis.e2eTakeBack!;
      const watched = pi.client.watchConversation(
        conversationId,
        (view) => void state.views.push(view.entries.map((entry) => entry.id)),
        (error) => void (state.lost = String(error)),
      );
      Promise.resolve(watched).then(
        () => void (state.answered = true),
        (error: unknown) => void (state.lost = String(error)),
      );
    }, conversationId);
    // Answered before Run here settles, the frames still dropped (the take-back's call never reached the object, which
    // holds the lease and counts on). Before 0134 the watch waited for the take-back to end: over this silent link, until
    // its call's bound (15 s) rejected Run here with ConnectionLost, the watch answered only then.
    await expect
      .poll(async () => (await state()).answered || (await state()).runHere !== undefined || (await state()).lost !== undefined, {
        timeout: 60_000,
        message: "the watch answered, or Run here settled",
      })
      .toBe(true);
    const whileSilent = await state();
    const holderWhileSilent = await holderOf(edge.followUrl(name));
    expect(edge.printed.lines, "the object is still counting when the frames come back").not.toContain(`tick ${TO}`);
    // The frames delivered again at once (before the take-back's call reaches its bound): the lease comes back.
    await harnessWorker(page).evaluate(() => globalThis.e2eMuted?.restore());
    expect({ answered: whileSilent.answered, runHere: whileSilent.runHere, lost: whileSilent.lost }, await seen()).toEqual({
      answered: true,
      runHere: undefined,
      lost: undefined,
    });
    expect(whileSilent.views.length, "the copy's view rendered").toBeGreaterThan(0);
    expect(holderWhileSilent, "the object held the lease meanwhile").toMatchObject({ object: true });

    // The tab runs here; the watch moves to the harness opened under the lease (a snapshot there).
    await expect.poll(async () => (await state()).runHere, { timeout: 60_000, message: "Run here" }).toBe("ok");
    await page.waitForSelector('body[data-runs="here"]', { state: "attached", timeout: 60_000 });
    expect(await page.evaluate(() => pi.client.status), await seen()).toMatchObject({ kind: "ready", runs: "here" });
    const printedAtRunHere = tabPrints.length;
    const viewsAtRunHere = (await state()).views.length;

    // The tab counts on (0133's runs: it stopped here for good) to the end; every tick printed once, in one place.
    const all = () => [...edge.printed.lines, ...tabPrints].sort((a, b) => tickOf(a) - tickOf(b));
    await expect
      .poll(() => tabPrints.includes(`tick ${TO}`), { timeout: 120_000, message: "the tab printed the last tick" })
      .toBe(true)
      .catch(async (error: unknown) => {
        const tasks = JSON.stringify((await taskRows(page)).map((task) => task.record.state));
        throw new Error(`the tab stopped counting after Run here: ${await seen()}; its tasks: ${tasks}`, { cause: error });
      });
    expect(tabPrints.length, await seen()).toBeGreaterThan(printedAtRunHere);
    expect(all(), await seen()).toEqual(ticks(1, TO));
    await expect
      .poll(async () => (await taskRows(page)).filter((task) => task.kind === "example.counter").map((task) => task.record.state), {
        timeout: 30_000,
        message: "the count completed in the tab, not faulted",
      })
      .toMatchObject([{ status: "terminal", outcome: { status: "completed", result: `counted to ${TO}` } }]);
    // The watch moved to the harness that runs here: its view rendered again after Run here (the copy it started on
    // is closed), and was never lost.
    expect((await state()).views.length, await seen()).toBeGreaterThan(viewsAtRunHere);
    expect((await state()).lost, await seen()).toBeUndefined();
    for (const ids of (await state()).views) expect(ids, await seen()).toEqual([...new Set(ids)].sort((a, b) => a - b)); // no entry twice
    const { dropped } = await silent();
    console.log(`watch during take-back: answered while ${dropped} frames were dropped; ${await seen()}`);
  }, 300_000);
});
