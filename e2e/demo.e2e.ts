import { mkdir, readFile } from "node:fs/promises";
import type { Page } from "playwright-core";
import { afterEach, beforeEach, describe, expect, it } from "vitest";
import { waitForReady } from "../src/testing/playwright.ts";
import { STORY } from "../worker/offline-model.ts";
import { OFFLINE_MODEL_LABEL, PROBE } from "../worker/protocol.ts";
import { startBrowser, type BrowserSession } from "./support/browser";
import {
  openDemo,
  press,
  reveal,
  sendMessage,
  shownTranscript,
  ticks,
  toolCard,
  waitForLine,
  waitForReply,
  waitForShownTask,
  waitForStatus,
  waitForUserEntry,
} from "./support/demo";

// The demo app (web/) as a person uses it, in its production build in real Chromium on real OPFS: the chat
// with the offline demo model, a reload in the middle of a tool call, the seed's demos from their buttons,
// the storage inspector, the settings, offline loading, the layout at two sizes, and model text that must
// stay text. A reload is the crash. Each test cites the rule it shows where there is one (DESIGN.md §3).

let session: BrowserSession;

beforeEach(async () => {
  session = await startBrowser();
});

afterEach(async () => {
  await session.close();
});

const INTERRUPTED = "[error] Tool append was interrupted and may have partially run";

async function openApp(search = ""): Promise<Page> {
  const page = await openDemo(session, search);
  await waitForReady(page);
  await waitForStatus(page, "ready");
  return page;
}

/** Reloads through the crash banner's "Reload now" (shown once the worker stopped at the armed point). */
async function reloadFromBanner(page: Page, point: string): Promise<void> {
  const banner = page.locator("#crash-banner");
  await banner.getByText(`Stopped at ${point}`).waitFor({ timeout: 30_000 });
  expect(await banner.textContent()).toContain("reload to crash here");
  await Promise.all([page.waitForEvent("load"), page.click("#banner-reload")]);
  await page.waitForSelector("body[data-ready]", { state: "attached" });
  await waitForStatus(page, "ready");
}

/** Opens the Storage panel, runs a preset query from its button, and returns the result table. */
async function runPreset(page: Page, preset: string): Promise<{ columns: string[]; rows: string[][] }> {
  await press(page, `[data-preset="${preset}"]`);
  await page.waitForFunction(() => (document.querySelector("#sql-meta")?.textContent ?? "").endsWith(" rows") || document.querySelector("#sql-meta")?.textContent === "1 row");
  return page.evaluate(() => ({
    columns: [...document.querySelectorAll("#sql-result th")].map((cell) => cell.textContent ?? ""),
    rows: [...document.querySelectorAll("#sql-result tbody tr")].map((row) => [...row.querySelectorAll("td")].map((cell) => cell.textContent ?? "")),
  }));
}

/** Saves settings through the Crash panel's form (empty string: the default); the worker restarts with them. */
async function applySettings(page: Page, fields: Record<string, string>, replay?: "safe" | "unsafe"): Promise<void> {
  await reveal(page, "#settings-form");
  for (const [id, value] of Object.entries(fields)) await page.fill(`#${id}`, value);
  if (replay) await page.check(`#replay-${replay}`);
  const before = await page.evaluateHandle(() => pi.client);
  await page.click("#apply-settings");
  await page.waitForFunction((before) => pi.client !== before, before); // the new worker's status is shown from here on
}

/** Opens the conversation's file `path` in the Storage panel and returns its text once shown. */
async function shownFile(page: Page, path: string): Promise<string> {
  await press(page, "#files-refresh");
  await press(page, `#files [data-path="${path}"]`);
  const handle = await page.waitForFunction((path) => {
    const content = document.querySelector<HTMLElement>("#file-content");
    return content && !content.hidden && content.dataset.path === path ? content.textContent : undefined;
  }, path);
  return String(await handle.jsonValue());
}

describe("chat with the offline demo model", () => {
  it("answers a message, streaming the partial answer before the committed one (S9: partial answers in pi.live)", async () => {
    const page = await openApp();
    expect(await page.textContent("#model-name")).toBe(OFFLINE_MODEL_LABEL);
    // Persist every streamed chunk, so the partial answer is surely on screen while the story is told.
    await applySettings(page, { "setting-persist": "0" });
    await waitForStatus(page, "ready");

    await sendMessage(page, "story");
    const userEntry = await waitForUserEntry(page, "story");
    const partial = await page.waitForFunction(() => {
      const text = document.querySelector('[data-live="generation"] .msg-body')?.textContent ?? "";
      return text.length > 0 ? text : undefined;
    });
    const partialText = String(await partial.jsonValue());
    expect(STORY.startsWith(partialText)).toBe(true);
    expect(partialText.length).toBeLessThan(STORY.length);
    expect(await page.isVisible("#stop")).toBe(true); // busy: the answer can be stopped

    expect(await waitForReply(page, userEntry, STORY)).toBe(STORY);
    await page.locator('[data-live="generation"]').waitFor({ state: "detached" });
    await page.locator("#stop").waitFor({ state: "hidden" });

    // Anything else gets the model's short help.
    await sendMessage(page, "hello there");
    expect(await waitForReply(page, await waitForUserEntry(page, "hello there"), OFFLINE_MODEL_LABEL)).toContain("probe");
  });

  it("queues a message sent while the agent answers, and Stop aborts the run (its queued input too)", async () => {
    const page = await openApp();
    await applySettings(page, { "setting-persist": "0" });
    await waitForStatus(page, "ready");
    await sendMessage(page, "story");
    await page.locator('[data-live="generation"]').waitFor(); // answering
    expect(await page.textContent("#send")).toBe("Queue");
    await sendMessage(page, "list files");
    const queued = page.locator('#inbox-list li[data-mode="followUp"]');
    await queued.waitFor();
    expect(await queued.textContent()).toBe("queued list files");

    await page.click("#stop");
    await page.locator('.run-failure[data-reason="aborted"]').waitFor();
    await page.locator("#inbox").waitFor({ state: "hidden" }); // withdrawn, not answered
    const cut = page.locator('#chat-log li[data-kind="pi.assistant"][data-stop-reason="aborted"]');
    if ((await cut.count()) > 0) expect(STORY.startsWith((await cut.locator(".md").textContent()) ?? "")).toBe(true);
    expect(await page.locator('#chat-log li[data-kind="pi.user"]', { hasText: "list files" }).count()).toBe(0);
    expect(await page.isVisible("#stop")).toBe(false);
  });

  it("shows a tool run: running with its live output, then its result, then the agent's reply", async () => {
    const page = await openApp();
    await sendMessage(page, "probe");
    const userEntry = await waitForUserEntry(page, "probe");
    const card = toolCard(page, PROBE.tool);
    await card.and(page.locator('[data-status="running"]')).waitFor({ timeout: 30_000 });
    await card.locator(".tool-output").getByText("working").waitFor();

    await card.and(page.locator('[data-status="done"]')).waitFor({ timeout: 30_000 });
    expect(await card.locator(".tool-result").textContent()).toBe(PROBE.result);
    expect(await card.getAttribute("data-code")).toBeNull();
    expect(await waitForReply(page, userEntry, '"appended"')).toContain("Appended");

    // Its effect is in the conversation's files (Storage panel).
    expect(await shownFile(page, PROBE.path)).toBe(PROBE.text);

    // S10: "Compact" summarizes the messages before the newest input into a compaction entry.
    await sendMessage(page, "list files");
    await waitForReply(page, await waitForUserEntry(page, "list files"), "notes.txt");
    await page.click("#compact");
    const summary = page.locator('#chat-log li[data-kind="pi.compaction"]');
    await summary.waitFor({ timeout: 30_000 });
    expect(await summary.locator("summary").textContent()).toBe("Earlier messages were summarized");
    expect(await summary.locator("p").textContent()).toContain('"probe"');
  });

  it("S8: a reload during the tool shows the interrupted result (with the output saved before the cut) and the agent's reply after it", async () => {
    const page = await openApp();
    // Crash panel: stop right after the tool's "working" output reached the disk.
    await reveal(page, "#crash-point");
    await page.selectOption("#crash-point", "tool:output-persisted");
    await page.click("#arm");
    await page.locator("#crash-banner-text").getByText("Armed").waitFor();
    await sendMessage(page, "probe");
    await toolCard(page, PROBE.tool).and(page.locator('[data-status="running"]')).waitFor({ timeout: 30_000 });
    await reloadFromBanner(page, "tool:output-persisted");

    const card = toolCard(page, PROBE.tool);
    await card.and(page.locator('[data-code="interrupted"]')).waitFor({ timeout: 30_000 });
    expect(await card.locator(".tool-status").textContent()).toBe("interrupted — may have partially run");
    const result = (await card.locator(".tool-result").textContent()) ?? "";
    expect(result.startsWith(PROBE.output)).toBe(true); // the output persisted before the crash comes first
    expect(result).toContain(INTERRUPTED);
    const resultEntry = Number(await card.getAttribute("data-entry-id"));
    expect(await waitForReply(page, resultEntry, "interrupted")).toContain(PROBE.tool);
    expect(await page.textContent("#recovered-banner-text")).toContain("stopped at tool:output-persisted");

    // The report log has the interruption (S7).
    await press(page, "#tab-log");
    const report = JSON.parse((await page.locator('#reports li[data-kind="task_interrupted"] .report-json').first().textContent()) ?? "");
    expect(report).toMatchObject({ kind: "task_interrupted", taskKind: "pi.tool", reason: "interrupted" });
  });

  it("a model answer containing <img src=x onerror=alert(1)> shows up as text and runs nothing", async () => {
    const page = await openApp();
    const dialogs: string[] = [];
    page.on("dialog", (dialog) => {
      dialogs.push(dialog.message());
      void dialog.dismiss();
    });
    const markup = "<img src=x onerror=alert(1)>";
    await sendMessage(page, `note ${markup}`);
    const userEntry = await waitForUserEntry(page, `note ${markup}`);
    const reply = await waitForReply(page, userEntry, "Appended");
    expect(reply).toContain(markup); // the model's text, verbatim, as text
    expect(await shownFile(page, PROBE.path)).toBe(`${markup}\n`);
    expect(await page.locator("#chat-log img, #file-content img, #tasks img").count()).toBe(0);
    expect(await page.evaluate(() => document.querySelectorAll("img:not(.logo)").length)).toBe(0);
    expect(dialogs).toEqual([]);
  });
});

describe("the seed's demos from their buttons", () => {
  it("S12: Example 12 stops after tick 2; after the reload it prints tick 3, 4, 5 and counted to 5, never tick 2 again", async () => {
    const page = await openApp();
    await press(page, "#demo-counter");
    await waitForLine(page, "tick 2");
    // Before the reload: the seed's query shows the row as the crash will leave it.
    await page.locator("#crash-banner").getByText("Stopped at counter:after-tick-2").waitFor();
    const before = await runPreset(page, "counter");
    expect(before.columns).toEqual(["id", "status", "n", "memos", "restarts"]);
    expect(before.rows).toEqual([[expect.any(String), "running", "2", '{"printed-1":true,"printed-2":true}', "—"]]);

    await reloadFromBanner(page, "counter:after-tick-2");
    expect(await page.textContent("#recovered-banner-text")).toContain("tick 3");
    const done = await waitForShownTask(page, "counted to 5");
    expect(done).toMatch(/^#\d+ example\.counter: terminal completed: "counted to 5"$/);
    expect(await shownTranscript(page)).toEqual(ticks(1, 5));
    const after = await runPreset(page, "counter");
    expect(after.rows).toEqual([[before.rows[0]![0], "terminal", "—", "—", "—"]]);
  });

  it("S8: the tool probe, unsafe then safe: not rerun (interrupted) and then rerun (appended twice)", async () => {
    const page = await openApp();
    await press(page, "#demo-probe-unsafe");
    await reloadFromBanner(page, "tool:output-persisted");
    const unsafe = toolCard(page, PROBE.tool);
    await unsafe.and(page.locator('[data-code="interrupted"]')).waitFor({ timeout: 30_000 });
    expect(await unsafe.locator(".tool-result").textContent()).toContain(INTERRUPTED);
    await waitForReply(page, Number(await unsafe.getAttribute("data-entry-id")), "interrupted");
    const rows = (await runPreset(page, "probe")).rows;
    expect(rows.filter((row) => row[1] === "pi.tool").map((row) => row.slice(1))).toEqual([["pi.tool", "terminal", "—", "—", "—"]]);

    // The safe probe restarts the worker with the tool declared safe, then stops at the same point.
    await press(page, "#demo-probe-safe");
    await reloadFromBanner(page, "tool:output-persisted");
    const cards = page.locator(`#chat-log .tool[data-tool="${PROBE.tool}"]`);
    await expect.poll(() => cards.count(), { timeout: 30_000 }).toBe(2);
    const safe = cards.last();
    await safe.and(page.locator('[data-status="done"]')).waitFor({ timeout: 30_000 });
    expect(await safe.getAttribute("data-code")).toBeNull();
    expect(await safe.locator(".tool-result").textContent()).toBe(PROBE.result);
    // The rerun appended a second time: once by the unsafe probe, twice by the safe one.
    expect(await shownFile(page, PROBE.path)).toBe(PROBE.text.repeat(3));
  });
});

describe("storage inspector and settings", () => {
  it("S11: runs read-only SQL as a table, refuses a write with QueryNotReadOnly, and downloads the database", async () => {
    const page = await openApp();
    await press(page, "#counter");
    await waitForShownTask(page, "counted to 5");
    const table = await runPreset(page, "probe");
    expect(table.columns).toEqual(["id", "kind", "status", "restarts", "phase", "replay"]);
    expect(table.rows).toEqual([[expect.any(String), "example.counter", "terminal", "—", "—", "—"]]);

    await page.fill("#sql", "DELETE FROM tasks");
    await page.click("#run-sql");
    await page.locator('#sql-error[data-name="QueryNotReadOnly"]').waitFor();
    expect(await page.textContent("#sql-error")).toMatch(/^QueryNotReadOnly: /);
    expect(await page.locator("#sql-result tr").count()).toBe(0);

    const [download] = await Promise.all([page.waitForEvent("download"), page.click("#download-db")]);
    expect(download.suggestedFilename()).toBe("pi-durable.sqlite3");
    const bytes = await readFile((await download.path())!);
    expect(bytes.subarray(0, 16).toString("latin1")).toBe("SQLite format 3\0");
  });

  it("S6: a bad restartLimit fails the open with InvalidSetting, shown in the banner; resetting the settings opens again", async () => {
    const page = await openApp();
    await applySettings(page, { "setting-restart-limit": "0" });
    await waitForStatus(page, "failed");
    const banner = (await page.textContent("#failed-banner-text")) ?? "";
    expect(banner).toContain("InvalidSetting");
    expect(banner).toContain("settings.restartLimit must be a positive integer");
    await page.click("#banner-reset-settings");
    await waitForStatus(page, "ready");
    expect(await page.isVisible("#failed-banner")).toBe(false);
  });
});

describe("models and keys", () => {
  const SECRET = "sk-demo-secret-4711";

  async function addProvider(page: Page, remember: boolean): Promise<void> {
    await reveal(page, "#provider-form");
    await page.selectOption("#provider-kind", "openai-compatible");
    await page.fill("#provider-base-url", "http://127.0.0.1:9/v1");
    await page.fill("#provider-model", "tiny-model");
    await page.fill("#provider-key", SECRET);
    await page.setChecked("#provider-remember", remember);
    await page.click("#provider-save");
    // Added: listed as kept where it was asked to be, and chosen for the conversation.
    await page.locator("#providers li", { hasText: remember ? "remembered on this device" : "in memory only" }).waitFor();
    await page.waitForFunction(() => (document.querySelector<HTMLSelectElement>("#model-select")?.value ?? "").endsWith("/tiny-model"));
  }

  const keyInDatabase = (page: Page) =>
    page.evaluate(async (secret) => {
      const bytes = await pi.client.exportDatabase();
      return new TextDecoder("latin1").decode(bytes).includes(secret);
    }, SECRET);
  const keyInLocalStorage = (page: Page) => page.evaluate((secret) => Object.values(localStorage).some((value) => value.includes(secret)), SECRET);

  it("a provider's key never enters the database; it is kept on the device only when asked to, and sent again after a reload", async () => {
    const page = await openApp();
    await addProvider(page, false);
    expect(await page.textContent("#model-name")).toContain("tiny-model");
    expect(await keyInDatabase(page)).toBe(false);
    expect(await keyInLocalStorage(page)).toBe(false);

    // In memory only: after a reload the conversation's model needs its key again.
    await session.reload(page);
    await waitForStatus(page, "ready");
    await page.waitForSelector('body[data-model-missing="true"]', { state: "attached" });
    expect(await page.textContent("#model-note")).toContain("whose key is not in this worker's memory");

    // Remembered: kept in localStorage (not in the database), and configured again on the next load.
    await addProvider(page, true);
    expect(await keyInLocalStorage(page)).toBe(true);
    await session.reload(page);
    await waitForStatus(page, "ready");
    await page.waitForSelector('body[data-model-missing="false"]', { state: "attached" });
    expect(await page.inputValue("#model-select")).toBe("openai-compatible/tiny-model");
    expect(await keyInDatabase(page)).toBe(false);

    // Back to the offline demo model.
    await page.selectOption("#model-select", "offline/demo-agent");
    await page.waitForFunction(() => document.querySelector("#model-name")?.textContent === "offline demo model");
    await press(page, "#providers button");
    expect(await keyInLocalStorage(page)).toBe(false);
  });
});

describe("installable and offline", () => {
  it("loads the app and its agent history with the network cut, after the first visit", async () => {
    const page = await openApp();
    const manifest = await page.evaluate(async () => {
      const link = document.querySelector<HTMLLinkElement>('link[rel="manifest"]')!;
      return (await fetch(link.href)).json();
    });
    expect(manifest).toMatchObject({ display: "standalone", start_url: "./" });
    expect(manifest.icons.map((icon: { sizes: string }) => icon.sizes)).toEqual(expect.arrayContaining(["192x192", "512x512"]));

    await sendMessage(page, "list files");
    const userEntry = await waitForUserEntry(page, "list files");
    await waitForReply(page, userEntry, "files");
    // The service worker is active once it has cached the app shell.
    expect(await page.evaluate(() => navigator.serviceWorker.ready.then((registration) => registration.active?.state))).toBe("activated");

    await session.context.setOffline(true);
    try {
      const response = await page.reload();
      expect(response?.fromServiceWorker()).toBe(true);
      await page.waitForSelector("body[data-ready]", { state: "attached" });
      await waitForStatus(page, "ready");
      expect(await page.evaluate(() => navigator.onLine)).toBe(false);
      // The history comes back from OPFS, the app from the cache.
      expect(await waitForUserEntry(page, "list files")).toBe(userEntry);
      await waitForReply(page, userEntry, "files");
      // And it still works: the offline model answers without a network.
      await sendMessage(page, "read notes");
      await waitForReply(page, await waitForUserEntry(page, "read notes"), "notes.txt");
    } finally {
      await session.context.setOffline(false);
    }
  });
});

describe("layout", () => {
  const VIEWS = ["chat", "demos", "tasks", "storage", "crash", "models", "log"];

  /** Boxes of the shown main regions: the header, banners, the view tabs and the shown panels. */
  function regions(page: Page) {
    return page.evaluate(() => {
      const shown = (element: Element) => element instanceof HTMLElement && !element.hidden && element.offsetParent !== null;
      const elements = [
        document.querySelector(".topbar")!,
        ...[...document.querySelectorAll(".banner")].filter(shown),
        document.querySelector(".views")!,
        ...[...document.querySelectorAll("[data-panel]")].filter(shown),
      ];
      return elements.map((element) => {
        const box = element.getBoundingClientRect();
        const name = element.id || element.className;
        return { name, left: box.left, top: box.top, right: box.right, bottom: box.bottom, overflowX: element.scrollWidth - element.clientWidth };
      });
    });
  }

  it("the main views at 1280×800 and 390×844: no panel overlaps another or leaves the viewport (screenshots in .tmp/screenshots)", async () => {
    await mkdir(".tmp/screenshots", { recursive: true });
    const page = await openApp();
    // Something in every view: a chat with a tool call, a finished task, a query result.
    await sendMessage(page, "probe");
    await toolCard(page, PROBE.tool).and(page.locator('[data-status="done"]')).waitFor({ timeout: 30_000 });
    await press(page, "#counter");
    await waitForShownTask(page, "counted to 5");
    await runPreset(page, "probe");

    for (const [width, height] of [
      [1280, 800],
      [390, 844],
    ] as const) {
      await page.setViewportSize({ width, height });
      for (const view of VIEWS) {
        await page.evaluate((view) => pi.showView(view), view);
        await page.evaluate(() => new Promise((resolve) => requestAnimationFrame(() => requestAnimationFrame(resolve))));
        await page.screenshot({ path: `.tmp/screenshots/${width}x${height}-${view}.png` });
        const boxes = await regions(page);
        const where = `${width}×${height} ${view}`;
        expect(boxes.some((box) => box.name.includes("panel")), where).toBe(true);
        for (const box of boxes) {
          expect(box.left, `${where}: ${box.name} left`).toBeGreaterThanOrEqual(0);
          expect(box.right, `${where}: ${box.name} right`).toBeLessThanOrEqual(width);
          expect(box.bottom, `${where}: ${box.name} bottom`).toBeLessThanOrEqual(height);
          expect(box.overflowX, `${where}: ${box.name} is wider than its box`).toBeLessThanOrEqual(0);
        }
        for (const [index, a] of boxes.entries()) {
          for (const b of boxes.slice(index + 1)) {
            const overlap = Math.min(a.right, b.right) - Math.max(a.left, b.left) > 0.5 && Math.min(a.bottom, b.bottom) - Math.max(a.top, b.top) > 0.5;
            expect(overlap, `${where}: ${a.name} overlaps ${b.name}`).toBe(false);
          }
        }
        expect(await page.evaluate(() => document.documentElement.scrollWidth), `${where}: page scrolls sideways`).toBeLessThanOrEqual(width);
      }
    }
  });
});
