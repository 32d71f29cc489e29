import { mkdir } from "node:fs/promises";
import type { Page } from "playwright-core";
import { describe, expect, inject, it } from "vitest";
import { waitForReady } from "../src/testing/playwright.ts";
import { type BrowserSession, browserPerTest, startBrowser } from "./support/browser";
import { query, sendMessage, startTask, waitForReply, waitForShownTask, waitForStatus, waitForUserEntry } from "./support/demo";
import { edgePerTest } from "./support/edge";
import { openFollowing, recordTabPrints, tickOf } from "./support/follow";

// Issue 27 item 6, "a second device (another browser context) watching live", in real Chromium against a real
// workerd (decision 0094): one browser profile's `?follow=` tab holds its Durable Object's lease and counts; a second
// profile (another device: its own OPFS, its own place) opens the same conversation with `?follow=` and follows it
// read-only. What the tab pushes reaches it through the object's relay (decision 0090): every step, in order, the
// holder named. It approves a tool call that waits for a person on the holding tab (decision 0103). Its own submit goes through the object to the holder (decision 0096), and so does that of the same
// device's page on the object's socket (`?edge=`): the holder carries each out once under its requestId (decision
// 0034), both devices showing it. Then the first tab goes (its
// page closed: the hand-over at pagehide; or its renderer crashed: the lease's expiry) and the second device sees the
// object take the lease and count on to the end; after the crash its own submit and decide go to the object, which
// now runs them (decision 0097).

const session = browserPerTest();
const edge = edgePerTest();
const EVERY_MS = 300;
const SHOTS = ".tmp/screenshots";

declare global {
  /** The counter's views the page's `watchTasks` listener got, in order (kept in the page between evaluates). */
  var e2eSteps: Array<{ n: number | null; status: string; restarts: number; memos: string[] }> | undefined;
}

/** The id this browser profile keeps as its place (devicePlace()), read from a page of the origin. */
function keptPlace(page: Page): Promise<string> {
  return page.evaluate(async () => {
    const root = await navigator.storage.getDirectory();
    return (await (await root.getFileHandle("pi-durable-web.place")).getFile()).text();
  });
}

/** From now on, every view of the counter task the page's client is given (`watchTasks`) is kept in `e2eSteps`. */
async function recordSteps(page: Page): Promise<void> {
  await page.evaluate(async () => {
    globalThis.e2eSteps = [];
    await pi.client.watchTasks((inspection) => {
      const counter = inspection.tasks.find((task) => task.record.kind === "example.counter");
      if (!counter) return;
      const state = counter.record.state as { status: string; checkpoint?: { n?: number } };
      globalThis.e2eSteps!.push({
        n: state.checkpoint?.n ?? null,
        status: state.status,
        restarts: counter.record.restarts ?? 0,
        memos: Object.keys(counter.record.memos ?? {}),
      });
    });
  });
}

function steps(page: Page): Promise<NonNullable<typeof globalThis.e2eSteps>> {
  return page.evaluate(() => globalThis.e2eSteps ?? []);
}

/**
 * The steps (the counter's checkpoint `n`) the views showed, each once in the order first seen. (A terminal task
 * leaves the inspection's live tasks: the end is read from the Tasks panel.)
 */
async function stepsSeen(page: Page): Promise<number[]> {
  const seen: number[] = [];
  for (const view of await steps(page)) if (view.n !== null && view.n !== seen.at(-1)) seen.push(view.n);
  return seen;
}

/** The ready status's `heldBy` as the page's client has it. */
function heldBy(page: Page): Promise<unknown> {
  return page.evaluate(() => (pi.client.status.kind === "ready" ? (pi.client.status.heldBy ?? null) : null));
}

/** The second device: another browser profile's `?follow=` tab on object `name`, read-only, recording its steps. */
async function secondDevice(other: BrowserSession, name: string): Promise<Page> {
  const device = await other.newPage(`${inject("demoBaseUrl")}?follow=${encodeURIComponent(edge.followUrl(name))}`);
  await waitForStatus(device, "ready");
  await device.waitForSelector('body[data-runs="elsewhere"]', { state: "attached", timeout: 30_000 });
  await recordSteps(device);
  return device;
}

/**
 * Every step the second device saw, from its first to the task's end, one after the other: no gap (each step
 * the one after the last), no duplicate (no step seen again after a later one), and every view's memos the
 * counter's printed ticks 1..n-1 or 1..n (its copy never lacks a tick in between).
 */
async function expectEveryStepInOrder(device: Page, to: number, seenFirstBy: number): Promise<number[]> {
  const seen = await stepsSeen(device);
  expect(seen[0], `the first step seen: ${seen}`).toBeLessThanOrEqual(seenFirstBy);
  expect(seen, "every step once, in order").toEqual(Array.from({ length: to - seen[0]! + 1 }, (_, i) => seen[0]! + i));
  for (const view of await steps(device)) {
    const printed = view.memos.map((memo) => Number(memo.replace("printed-", ""))).sort((a, b) => a - b);
    expect(printed, `memos of a view at n ${view.n}`).toEqual(Array.from({ length: printed.length }, (_, i) => i + 1));
    expect(printed.length === view.n! - 1 || printed.length === view.n, `memos of n ${view.n}: ${printed}`).toBe(true);
  }
  return seen;
}

/** Said when a test fails, before its browsers close: what the second device showed and what each place printed. */
async function explain(device: Page | undefined, tabPrints: readonly string[]): Promise<void> {
  const shown = await device
    ?.evaluate(() =>
      JSON.stringify({
        status: pi.client.status,
        body: { ...document.body.dataset },
        where: document.querySelector("#place-where")?.textContent,
      }),
    )
    .catch((error: Error) => error.message);
  const seen = device ? await stepsSeen(device).catch(() => []) : [];
  console.log(
    `second device: ${shown}; steps ${JSON.stringify(seen)}; tab printed ${JSON.stringify(tabPrints)}; ` +
      `object printed ${JSON.stringify(edge.printed.lines)}; instances ${JSON.stringify(edge.instances.lines)}`,
  );
}

async function shoot(page: Page, file: string): Promise<void> {
  await mkdir(SHOTS, { recursive: true });
  await page.evaluate(() => pi.showView("tasks"));
  await page.screenshot({ path: `${SHOTS}/${file}.png` });
}

describe("a second device watches a tab's work live through the Durable Object (Chromium + workerd, issue 27 item 6)", () => {
  it("S5/S12: while the first device's tab holds the lease and counts, the second device's tab sees every step in order and names the holder; it approves a call that waits for a person on the holder, whose tool runs once (decision 0103); its own submit and its page's on the object each reach the holder once (decision 0096), both show them; the tab closes, the object takes over and the second device sees it count to the end", async () => {
    const name = "follow-second-device"; // a 10 minute lease: only the close's release can hand it over here
    const TO = 80;
    const tabPrints = await recordTabPrints(session);
    const tab = await openFollowing(session, edge, name);
    await tab.waitForSelector('body[data-runs="here"]', { state: "attached" });
    const place = await keptPlace(tab);
    const other = await startBrowser();
    let watching: Page | undefined;
    try {
      const device = await secondDevice(other, name);
      watching = device;
      expect(await keptPlace(device)).not.toBe(place);
      // Its copy is new (rebuilt from the object's snapshot, or followed from the start): nothing crashed there
      // (decision 0103; before, a rebuilt copy said "crash").
      const stop = await device.evaluate(() => (pi.client.status.kind === "ready" ? pi.client.status.recovery.stop : null));
      expect(["rebuilt", "none"]).toContain(stop);
      // It names the holder: the first device, by its place, as the object's lease record says (decision 0057).
      await device.waitForSelector('#place-bar[data-place="tab"]', { state: "attached", timeout: 30_000 });
      expect(await device.textContent("#place-where")).toBe(`another tab or device (${place.slice(0, 12)})`);
      expect(await heldBy(device)).toEqual({ kind: "tab", place });
      expect(await device.isVisible("#place-move")).toBe(false);

      // A call that really waits for a person on the holder (decision 0103; 0097's e2e decided none): the tab asks
      // before writing files and its model's append waits; the second device sees the call in its own copy and
      // approves it, twice under one decisionId; the decision goes through the object to the tab, whose tool runs once.
      await tab.locator("#ask-before-writing:not(:disabled)").waitFor();
      await tab.click("#ask-before-writing");
      await tab.waitForSelector('body[data-ask-before-writing="true"]', { state: "attached" });
      await sendMessage(tab, "note buy milk");
      const conversationId = await device.evaluate(() => pi.client.rootConversation());
      const pending = () => device.evaluate((id) => pi.client.pendingApprovals(id), conversationId);
      await expect.poll(async () => (await pending()).map((call) => call.toolName), { timeout: 60_000 }).toEqual(["append"]);
      const [card] = await pending();
      const decision = { approved: true, argumentsHash: card!.argumentsHash, decisionId: "second-device-approves" };
      const approve = () =>
        device.evaluate(([id, callId, d]) => pi.client.decide(id, callId, d), [conversationId, card!.callId, decision] as const);
      const record = await approve();
      expect(record).toMatchObject({ callId: card!.callId, status: "approved" });
      expect(await approve()).toEqual(record); // sent again (a lost answer): the same record, nothing more
      const written = () => tab.evaluate((id) => pi.client.call("files.read", id, "notes.txt").catch(() => null), conversationId);
      await expect.poll(written, { timeout: 60_000 }).toBe("buy milk\n");
      const results = (page: Page) =>
        query(page, "SELECT count(*) AS count FROM entries WHERE kind = 'pi.tool-result' AND instr(record, ?) > 0", card!.callId);
      await expect.poll(() => results(device), { timeout: 30_000 }).toEqual([{ count: 1 }]);
      expect(await results(tab)).toEqual([{ count: 1 }]);
      expect(await pending()).toEqual([]);

      await startTask(tab, "example.counter", { to: TO, everyMs: EVERY_MS });
      // Live: the second device's count moves while the tab still counts, and its tab prints nothing.
      await expect
        .poll(async () => (await stepsSeen(device)).at(-1) ?? 0, { timeout: 60_000, message: "the second device sees step 6" })
        .toBeGreaterThanOrEqual(6);
      expect(tabPrints.includes(`tick ${TO}`)).toBe(false);
      expect(await heldBy(device)).toEqual({ kind: "tab", place });
      await shoot(device, "follow-second-device-watching");

      // Its own submit goes through the object to the holder under its requestId (decision 0096): sent twice, one
      // submission; the holder's tab runs it and both show it. (Before: refused, ReadOnlySession.)
      const mine = { type: "input" as const, content: "typed on the follower", requestId: "second-follower-1" };
      const forwarded = await device.evaluate(([id, draft]) => pi.client.submit(id, draft), [conversationId, mine] as const);
      expect(await device.evaluate(([id, draft]) => pi.client.submit(id, draft), [conversationId, mine] as const)).toEqual(forwarded);
      const mineEntry = await waitForUserEntry(tab, mine.content, 60_000);
      const mineReply = await waitForReply(tab, mineEntry, "", 60_000);
      expect(await waitForUserEntry(device, mine.content, 60_000)).toBe(mineEntry);
      expect(await waitForReply(device, mineEntry, mineReply, 60_000)).toBe(mineReply);
      expect(await query(tab, "SELECT count(*) AS count FROM submissions WHERE request_id = ?", mine.requestId)).toEqual([{ count: 1 }]);

      // The same device's page on the object's socket submits: forwarded to the holder under its requestId, once.
      const onObject = await other.newPage(`${inject("demoBaseUrl")}?edge=${encodeURIComponent(edge.socketUrl(name))}`);
      await waitForReady(onObject);
      await waitForStatus(onObject, "ready");
      expect(await onObject.getAttribute("body", "data-runs")).toBe("elsewhere");
      const draft = { type: "input" as const, content: "hello from the second device", requestId: "second-device-1" };
      const submitted = await onObject.evaluate(([id, draft]) => pi.client.submit(id, draft), [conversationId, draft] as const);
      // Sent again under the same key (a retry after a lost answer): the same submission, nothing more.
      const again = await onObject.evaluate(([id, draft]) => pi.client.submit(id, draft), [conversationId, draft] as const);
      expect(again).toEqual(submitted);
      const entry = await waitForUserEntry(tab, draft.content, 60_000);
      const reply = await waitForReply(tab, entry, "", 60_000);
      // Both devices show it: the holder's tab ran it; the second device's follower and its page got it live.
      expect(await waitForUserEntry(device, draft.content, 60_000)).toBe(entry);
      expect(await waitForReply(device, entry, reply, 60_000)).toBe(reply);
      expect(await waitForReply(onObject, entry, reply, 60_000)).toBe(reply);
      const users = (page: Page) =>
        query(page, "SELECT count(*) AS count FROM entries WHERE kind = 'pi.user' AND instr(record, ?) > 0", draft.content);
      expect(await users(tab)).toEqual([{ count: 1 }]);
      const tabSubmissions = await query(tab, "SELECT count(*) AS count FROM submissions WHERE request_id = ?", draft.requestId);
      expect(tabSubmissions).toEqual([{ count: 1 }]);
      await expect.poll(() => users(device), { timeout: 30_000 }).toEqual([{ count: 1 }]);
      await onObject.close();

      // The first device's tab closes mid-task: it hands the lease over at pagehide and the object counts on.
      expect(tabPrints.includes(`tick ${TO}`), "the tab finished before it closed (a slow machine: raise TO)").toBe(false);
      const seenBefore = (await stepsSeen(device)).at(-1)!;
      await tab.close();
      await device.waitForSelector('#place-bar[data-place="object"]', { state: "attached", timeout: 60_000 });
      expect(await device.textContent("#place-where")).toBe("the Durable Object");
      expect(await heldBy(device)).toMatchObject({ kind: "object" });
      await edge.printed.until((lines) => lines.length > 0, "the object's first tick");
      await expect
        .poll(async () => (await stepsSeen(device)).at(-1) ?? 0, { timeout: 60_000, message: "the second device sees the object count" })
        .toBeGreaterThan(Math.max(seenBefore, tickOf(edge.printed.lines[0]!)));
      await shoot(device, "follow-second-device-object-took-over");
      expect(await waitForShownTask(device, `counted to ${TO}`, 90_000)).toContain("terminal");
      const seen = await expectEveryStepInOrder(device, TO, 6);
      // Every tick printed once, in one place or the other; the second device printed none (its prints would be in
      // its own profile's channel, which nothing here hears — but its tasks never ran: it only followed).
      const all = [...tabPrints, ...edge.printed.lines];
      expect(new Set(all).size, `printed twice: ${all}`).toBe(all.length);
      expect(new Set(all.map(tickOf))).toEqual(new Set(Array.from({ length: TO }, (_, i) => i + 1)));
      const views = await steps(device);
      console.log(
        `second device: ${views.length} views, steps ${seen[0]}..${seen.at(-1)} (${seen.length}), its own submit forwarded (submission ${forwarded}); ` +
          `tab printed ${tabPrints.length}, object ${edge.printed.lines.length}; restarts seen ${JSON.stringify(views.filter((v) => v.restarts > 0).map((v) => [v.n, v.restarts]))}`,
      );
    } catch (error) {
      await explain(watching, tabPrints);
      throw error;
    } finally {
      await other.close();
    }
  }, 240_000);

  it("S4/S12: the first device's renderer crashes mid-task (no pagehide): the second device sees the object take over at the lease's expiry and count to the end, every step once in order; its own submit and decide then go through the object, which runs them (decision 0097)", async () => {
    const name = "short-second-device"; // a 3 s lease: the crash is covered by its expiry
    const TO = 40;
    const tabPrints = await recordTabPrints(session);
    const tab = await openFollowing(session, edge, name);
    await tab.waitForSelector('body[data-runs="here"]', { state: "attached" });
    const place = await keptPlace(tab);
    const other = await startBrowser();
    let watching: Page | undefined;
    try {
      const device = await secondDevice(other, name);
      watching = device;
      await device.waitForSelector('#place-bar[data-place="tab"]', { state: "attached", timeout: 30_000 });
      expect(await heldBy(device)).toEqual({ kind: "tab", place });
      await startTask(tab, "example.counter", { to: TO, everyMs: EVERY_MS });
      await expect
        .poll(async () => (await stepsSeen(device)).at(-1) ?? 0, { timeout: 60_000, message: "the second device sees step 5" })
        .toBeGreaterThanOrEqual(5);
      expect(tabPrints.includes(`tick ${TO}`), "the tab finished before it crashed (a slow machine: raise TO)").toBe(false);
      const cdp = await tab.context().newCDPSession(tab);
      void cdp.send("Page.crash").catch(() => {});
      await tab.waitForEvent("crash", { timeout: 10_000 }).catch(() => {});
      await tab.close().catch(() => {});
      await device.waitForSelector('#place-bar[data-place="object"]', { state: "attached", timeout: 60_000 });
      expect(await heldBy(device)).toMatchObject({ kind: "object" });
      // The follower writes through the object, which now holds the lease and runs the conversation itself (decisions
      // 0096, 0097): its submit, sent twice under one requestId, is one submission, run there and shown here; its
      // decision on a call that never asked is decide's own NotFound from the object's harness, typed across the link
      // (before 0097: ReadOnlySession, refused by its own copy).
      const conversationId = await device.evaluate(() => pi.client.rootConversation());
      const mine = { type: "input" as const, content: "typed after the crash", requestId: "second-after-crash-1" };
      const forwarded = await device.evaluate(([id, draft]) => pi.client.submit(id, draft), [conversationId, mine] as const);
      expect(await device.evaluate(([id, draft]) => pi.client.submit(id, draft), [conversationId, mine] as const)).toEqual(forwarded);
      const mineEntry = await waitForUserEntry(device, mine.content, 60_000);
      await waitForReply(device, mineEntry, "", 60_000);
      expect(await query(device, "SELECT count(*) AS count FROM submissions WHERE request_id = ?", mine.requestId)).toEqual([{ count: 1 }]);
      const decided = await device.evaluate(
        (id) =>
          pi.client.decide(id, "no-such-call", { approved: true }).then(
            () => "decided",
            (error: Error) => error.name,
          ),
        conversationId,
      );
      expect(decided).toBe("NotFound");
      expect(await waitForShownTask(device, `counted to ${TO}`, 90_000)).toContain("terminal");
      const seen = await expectEveryStepInOrder(device, TO, 5);
      // The object counts on from what it received; a tick whose memo the crash cut before its push is printed again
      // by the object (a counter's print is no declared effect, decision 0032), never twice in one place.
      for (const lines of [tabPrints, edge.printed.lines]) expect(new Set(lines).size).toBe(lines.length);
      expect(new Set([...tabPrints, ...edge.printed.lines].map(tickOf))).toEqual(new Set(Array.from({ length: TO }, (_, i) => i + 1)));
      const views = await steps(device);
      console.log(
        `crash: second device ${views.length} views, steps ${seen[0]}..${seen.at(-1)}, its own submit after the takeover submission ${forwarded}; tab printed ${tabPrints.length}, ` +
          `object ${edge.printed.lines.length} from ${edge.printed.lines[0]}; restarts seen ${JSON.stringify(views.filter((v) => v.restarts > 0).map((v) => [v.n, v.restarts]))}`,
      );
    } catch (error) {
      await explain(watching, tabPrints);
      throw error;
    } finally {
      await other.close();
    }
  }, 240_000);
});
