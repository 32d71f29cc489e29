import { mkdir, readFile } from "node:fs/promises";
import type { Page } from "playwright-core";
import { describe, expect, it } from "vitest";
import { waitForReady } from "../src/testing/playwright.ts";
import { STORY } from "../worker/offline-model.ts";
import { OFFLINE_MODEL_LABEL, PROBE } from "../worker/protocol.ts";
import { browserPerTest } from "./support/browser";
import {
  applySettings,
  openDemo,
  press,
  reloadFromBanner,
  reveal,
  runPreset,
  sendMessage,
  shownFile,
  shownTranscript,
  startTask,
  ticks,
  toolCard,
  waitForReply,
  waitForShownTask,
  waitForStatus,
  waitForUserEntry,
} from "./support/demo";

// The first minute: README.md's "The demo app (`npm start`)" paragraph, walked top to bottom as a person
// would, in the production build in real Chromium on real OPFS, one claim after another, with a screenshot
// of each step in .tmp/screenshots/first-minute-*.png. The detailed checks of each part are in
// demo.e2e.ts; this test is the story in one piece. A reload is the crash.

const session = browserPerTest();

let step = 0;
async function shot(page: Page, name: string): Promise<void> {
  step += 1;
  await page.screenshot({ path: `.tmp/screenshots/first-minute-${String(step).padStart(2, "0")}-${name}.png` });
}

/** The restart count in a task line of the Tasks panel (0 without one). */
function restartsOf(line: string): number {
  return Number(/restarts (\d+)/.exec(line)?.[1] ?? 0);
}

/** Says `text` in the chat and returns the agent's answer once it contains `expected`. */
/** Sends `text` and returns the reply to this very message (an earlier message with the same text is skipped). */
async function say(page: Page, text: string, expected: string): Promise<string> {
  const earlier = await page.evaluate(
    (text) =>
      Math.max(
        0,
        ...[...document.querySelectorAll<HTMLElement>('#chat-log li[data-kind="pi.user"]')]
          .filter((item) => item.textContent === text)
          .map((item) => Number(item.dataset.entryId)),
      ),
    text,
  );
  await sendMessage(page, text);
  let entry = earlier;
  await expect.poll(async () => (entry = await waitForUserEntry(page, text)), { timeout: 30_000 }).toBeGreaterThan(earlier);
  return waitForReply(page, entry, expected);
}

describe("the first minute", () => {
  it("walks the README's demo paragraph top to bottom (S7, S8, S11, S12)", { timeout: 420_000 }, async () => {
    await mkdir(".tmp/screenshots", { recursive: true });
    const page = await openDemo(session);
    await waitForReady(page);
    await waitForStatus(page, "ready");
    await page.setViewportSize({ width: 1280, height: 800 });
    expect(await page.textContent("#model-name")).toBe(OFFLINE_MODEL_LABEL);
    await shot(page, "opened");

    // "Chat with the offline demo model … say note buy milk, read notes, list files, probe, story, help"
    expect(await say(page, "note buy milk", "Added")).toBe('Added "buy milk" to notes.txt.');
    expect(await say(page, "read notes", "holds")).toContain("buy milk");
    expect(await say(page, "list files", "The files:")).toContain("notes.txt");
    expect(await say(page, "probe", '"appended"')).toContain("Appended");
    expect(await toolCard(page, PROBE.tool).locator(".tool-output").textContent()).toBe(PROBE.output);
    expect(await say(page, "story", "lighthouse")).toBe(STORY);
    // The help list renders as a list: one item per command, the probe among them.
    expect(await say(page, "help", "Try:")).toContain("Try:");
    expect(
      await page
        .locator("#chat-log li li")
        .filter({ hasText: /^probe: / })
        .count(),
    ).toBeGreaterThan(0);
    await shot(page, "chat");

    // "Demos: Example 12 (reload right after tick 2: it goes on with tick 3 and never prints tick 2 again)"
    await press(page, "#demo-counter");
    await reloadFromBanner(page, "counter:after-tick-2");
    await waitForShownTask(page, "counted to 5");
    expect(await shownTranscript(page)).toEqual(ticks(1, 5));
    await reveal(page, "#results");
    await page.locator("#results li", { hasText: '"counted to 5"' }).waitFor();
    await shot(page, "example-12");

    // "… and the tool probe, unsafe (not run again: an interrupted result)"
    await press(page, "#demo-probe-unsafe");
    await reloadFromBanner(page, "tool:output-persisted");
    const unsafe = toolCard(page, PROBE.tool);
    await unsafe.and(page.locator('[data-code="interrupted"]')).waitFor({ timeout: 30_000 });
    // The harness-written part of the result is shown as a notice; its text is the seed's message.
    expect(await unsafe.locator(".tool-notice").getAttribute("title")).toContain(
      `Tool ${PROBE.tool} was interrupted and may have partially run`,
    );
    await shot(page, "probe-unsafe");

    // "… and safe (run again: notes.txt gets a second line)"
    await press(page, "#demo-probe-safe");
    await reloadFromBanner(page, "tool:output-persisted");
    const cards = page.locator(`#chat-log .tool[data-tool="${PROBE.tool}"]`);
    await expect.poll(() => cards.count(), { timeout: 30_000 }).toBe(3);
    await cards.last().and(page.locator('[data-status="done"]')).waitFor({ timeout: 30_000 });
    expect(await cards.last().locator(".tool-result").textContent()).toBe(PROBE.result);
    // The note, the chat's probe, the unsafe probe once, the safe probe twice (it ran again).
    expect(await shownFile(page, PROBE.path)).toBe(`buy milk\n${PROBE.text.repeat(4)}`);
    await shot(page, "probe-safe");

    // "Tasks: the live task graph — status, phase, restarts, replay, what each waits on."
    await startTask(page, "demo.stall", {});
    const stall = await waitForShownTask(page, "demo.stall: running");
    expect(stall).toContain("running now");
    expect(stall).toContain("phase stall");
    await shot(page, "tasks");

    // "Storage: read-only SQL with the seed's queries one click away, the conversation's OPFS files, and download"
    const counter = await runPreset(page, "counter");
    expect(counter.rows).toEqual([[expect.any(String), "terminal", "—", "—", "—"]]);
    const probes = await runPreset(page, "probe");
    expect(probes.rows.map((row) => row[5])).toEqual(["completed", "failed", "completed"]);
    await page.fill("#sql", "DELETE FROM tasks");
    await page.click("#run-sql");
    await page.locator('#sql-error[data-name="QueryNotReadOnly"]').waitFor();
    const [download] = await Promise.all([page.waitForEvent("download"), page.click("#download-db")]);
    expect((await readFile((await download.path())!)).subarray(0, 16).toString("latin1")).toBe("SQLite format 3\0");
    await shot(page, "storage");

    // "Crash: reload now, terminate the worker, … clean close, open paused …" — the stalled task counts them.
    await Promise.all([page.waitForEvent("load"), press(page, "#reload")]);
    await page.waitForSelector("body[data-ready]", { state: "attached" });
    await waitForStatus(page, "ready");
    await waitForShownTask(page, "demo.stall: running running now phase stall restarts 1");
    await press(page, "#restart-worker");
    await waitForShownTask(page, "demo.stall: running running now phase stall restarts 2");
    await press(page, "#close");
    await waitForStatus(page, "closed");
    expect(await page.textContent("#closed-banner-text")).toContain("no restart counted");
    await page.click("#banner-reopen");
    await waitForStatus(page, "ready");
    const reopened = restartsOf(await waitForShownTask(page, "demo.stall: running running now"));
    expect(reopened).toBeLessThanOrEqual(2); // a clean close is not a crash
    await Promise.all([page.waitForEvent("load"), press(page, "#reload-paused")]);
    await page.waitForSelector("body[data-ready]", { state: "attached" });
    await waitForStatus(page, "ready");
    await page.locator("#paused-banner").waitFor();
    expect(restartsOf(await waitForShownTask(page, "demo.stall: pending"))).toBe(reopened + 1);
    await shot(page, "paused");
    await page.click("#banner-resume");
    await waitForShownTask(page, "demo.stall: running running now");

    // "… stop at a named crash point (then reload to crash exactly there)"
    await reveal(page, "#crash-point");
    await page.selectOption("#crash-point", "tool:after-intent");
    await page.click("#arm");
    await sendMessage(page, "note call Ada");
    await reloadFromBanner(page, "tool:after-intent");
    await toolCard(page, "append").and(page.locator('[data-code="interrupted"]')).waitFor({ timeout: 30_000 });
    expect(await page.textContent("#recovered-banner-text")).toContain("never ran");
    expect(await shownFile(page, PROBE.path)).toBe(`buy milk\n${PROBE.text.repeat(4)}`); // the note was not appended
    await shot(page, "crash-point");

    // "… restartLimit …": a limit of one more than the stalled task's count stops it at the next open.
    const cutOff = restartsOf(await waitForShownTask(page, "demo.stall: running"));
    await applySettings(page, { "setting-restart-limit": String(cutOff + 1) });
    await waitForStatus(page, "ready");
    await session.reload(page);
    await waitForStatus(page, "ready");
    await waitForShownTask(page, "demo.stall: terminal faulted");

    // "Log of task_faulted / task_interrupted reports" — kept across reloads, each with its load.
    await press(page, "#tab-log");
    const faulted = page.locator('#reports li[data-kind="task_faulted"]');
    await faulted.waitFor();
    expect(await faulted.locator(".log-title").textContent()).toMatch(/demo\.stall\) faulted: restart_limit$/);
    expect(await faulted.locator(".log-load").textContent()).toContain("(this one)");
    const interrupted = page.locator('#reports li[data-kind="task_interrupted"]');
    expect(await interrupted.count()).toBe(2); // the unsafe probe and the note, each from its own load
    for (const item of await interrupted.all()) expect(await item.locator(".log-load").textContent()).toMatch(/reloads? ago\)$/);
    await shot(page, "log");

    // "… a banner when the database is open in another tab, with take over here."
    // Every tab is live: the second one follows the first, with the chat, and can take the database over.
    const second = await openDemo(session);
    await second.waitForSelector('body[data-status="ready"][data-role="follower"]', { state: "attached" });
    await second.locator("#lock-banner").waitFor();
    await waitForUserEntry(second, "note buy milk");
    await shot(second, "second-tab");
    await second.click("#takeover");
    await second.waitForSelector('body[data-status="ready"][data-role="leader"]', { state: "attached" });
    await page.waitForSelector('body[data-status="ready"][data-role="follower"]', { state: "attached" });
    expect(await page.textContent("#role")).toBe("follower");
    await page.close();

    // "It is an installable PWA: after the first visit it loads with the network cut."
    expect(await second.evaluate(() => navigator.serviceWorker.ready.then((registration) => registration.active?.state))).toBe("activated");
    await session.context.setOffline(true);
    try {
      const response = await second.reload();
      expect(response?.fromServiceWorker()).toBe(true);
      await second.waitForSelector("body[data-ready]", { state: "attached" });
      await waitForStatus(second, "ready");
      await waitForUserEntry(second, "note buy milk");
      const notes = await say(second, "read notes", "holds");
      expect(notes).toContain("buy milk");
      expect(notes.match(/hello/g)).toHaveLength(4);
      await shot(second, "offline");
    } finally {
      await session.context.setOffline(false);
    }
  });
});
