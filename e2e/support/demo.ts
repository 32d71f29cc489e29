import type { Page } from "playwright-core";
import { expect, inject } from "vitest";
import type { Json } from "../../src/base/json.ts";
import type { CrashPointHit, HarnessClient } from "../../src/browser/client.ts";
import type { TaskRecord } from "../../src/storage/records.ts";
import type { Row } from "../../src/storage/storage.ts";
import type { BrowserSession } from "./browser";

// Helpers for driving the demo app (web/main.ts, production build) the way a person would: its buttons, its
// page text, and the console hooks it documents (`globalThis.pi`, `body[data-status]`). The app shows one
// panel at a time beside the chat (Demos, Tasks, Storage, Crash, Models, Log); `press` opens the panel that
// holds a control before clicking it, as a person would.

declare global {
  // The demo page's console hooks (web/main.ts).
  var pi: {
    readonly client: HarnessClient;
    transcript(): string[];
    restartWorker(): void;
    showView(view: string): void;
    checkForUpdate(): Promise<void>;
  };
  // Test-side state kept in the page between evaluate calls.
  var e2eCrashPoint: Promise<CrashPointHit> | undefined;
}

/** The database the demo's worker opens (serveHarness's default path in the default pool). */
export const DEMO_DATABASE = "/pi-durable.sqlite3";

/** Opens the demo app in a new tab; `search` is for example "?paused". */
export function openDemo(session: BrowserSession, search = ""): Promise<Page> {
  return session.newPage(`${inject("demoBaseUrl")}${search}`);
}

/** Waits until the page shows `kind` as its status (`body[data-status]`). */
export async function waitForStatus(page: Page, kind: string, timeout = 30_000): Promise<void> {
  await page.waitForSelector(`body[data-status="${kind}"]`, { state: "attached", timeout });
}

/** The transcript as the page shows it, one printed line per entry. */
export async function shownTranscript(page: Page): Promise<string[]> {
  const text = (await page.textContent("#transcript")) ?? "";
  return text === "" ? [] : text.split("\n");
}

/** Waits until the page's transcript shows `line`. */
export async function waitForLine(page: Page, line: string, timeout = 30_000): Promise<void> {
  await page.waitForFunction((line) => (document.querySelector("#transcript")?.textContent ?? "").split("\n").includes(line), line, {
    timeout,
  });
}

/** Opens the view (tab) that holds `selector` (its `[data-panel]`), unless it is shown already. */
export async function reveal(page: Page, selector: string): Promise<void> {
  const view = await page
    .locator(selector)
    .first()
    .evaluate((element) => {
      const panel = element.closest<HTMLElement>("[data-panel]");
      return panel?.hidden ? panel.dataset.panel! : undefined;
    });
  if (view) await page.click(`.views [role=tab][data-view="${view}"]`);
}

/** Clicks a control of the page, opening its panel first. */
export async function press(page: Page, selector: string): Promise<void> {
  await reveal(page, selector);
  await page.click(selector);
}

/**
 * Waits until the page's task panel shows a task whose row, read as one line, contains `text`; returns that
 * line: `#id kind: status detail facts…`, for example `#7 example.counter: terminal completed: "counted to 5"`
 * or `#7 example.counter: pending ready to run phase tick n 2 restarts 1`.
 */
export async function waitForShownTask(page: Page, text: string, timeout = 30_000): Promise<string> {
  const line = await page.waitForFunction(
    (text) => {
      const lineOf = (item: Element) => {
        const part = (name: string) => (item.querySelector(name)?.textContent ?? "").trim();
        const facts = [...item.querySelectorAll(".fact")].map((fact) => fact.textContent);
        return [`${part(".task-head")}: ${part(".task-summary")}`, ...facts].join(" ");
      };
      return [...document.querySelectorAll("#tasks li")].map(lineOf).find((line) => line.includes(text));
    },
    text,
    { timeout },
  );
  return (await line.jsonValue()) as string;
}

/** Starts a task through the page's form (kind + JSON input, "Start task"). */
export async function startTask(page: Page, kind: string, input: Json): Promise<void> {
  await reveal(page, "#task-kind");
  await page.fill("#task-kind", kind);
  await page.fill("#task-input", JSON.stringify(input));
  await page.click("#start-task");
}

/** Read-only SQL through the page's client (`HarnessClient.query`). */
export function query(page: Page, sql: string, ...params: Json[]): Promise<Row[]> {
  return page.evaluate(([sql, params]) => pi.client.query(sql, ...(JSON.parse(params) as [])), [sql, JSON.stringify(params)] as const);
}

/** Every task row, parsed, in id order. */
export async function taskRows(page: Page): Promise<Array<{ id: number; kind: string; status: string; record: TaskRecord }>> {
  const rows = await query(page, "SELECT id, kind, status, record FROM tasks ORDER BY id");
  return rows.map((row) => ({
    id: Number(row.id),
    kind: String(row.kind),
    status: String(row.status),
    record: JSON.parse(String(row.record)) as TaskRecord,
  }));
}

/** Arms crash point `name` in the page's worker; `crashPointHit` waits for it. */
export async function armCrashPoint(page: Page, name: string): Promise<void> {
  await page.evaluate((name) => {
    globalThis.e2eCrashPoint = pi.client.armCrashPoint(name);
  }, name);
}

/** Resolves when the armed crash point was reached (the worker then stays stopped there). */
export function crashPointHit(page: Page): Promise<CrashPointHit> {
  return page.evaluate(() => globalThis.e2eCrashPoint!);
}

export function ticks(from: number, to: number): string[] {
  return Array.from({ length: to - from + 1 }, (_, index) => `tick ${from + index}`);
}

/** Types `text` into the chat and sends it. */
export async function sendMessage(page: Page, text: string): Promise<void> {
  await reveal(page, "#chat-input");
  await page.fill("#chat-input", text);
  await page.click("#send");
}

/** The entry id of the last user message in the chat that reads `text` (waits for it). */
export async function waitForUserEntry(page: Page, text: string, timeout = 30_000): Promise<number> {
  const handle = await page.waitForFunction(
    (text) => {
      const items = [...document.querySelectorAll<HTMLElement>('#chat-log li[data-kind="pi.user"]')].filter(
        (item) => item.textContent === text,
      );
      return items.at(-1)?.dataset.entryId;
    },
    text,
    { timeout },
  );
  return Number(await handle.jsonValue());
}

/** Waits for an answer of the agent (a committed `pi.assistant` entry) after entry `afterId` that contains `text`; returns its text. */
export async function waitForReply(page: Page, afterId: number, text: string, timeout = 30_000): Promise<string> {
  const handle = await page.waitForFunction(
    ([afterId, text]) =>
      [...document.querySelectorAll<HTMLElement>('#chat-log li[data-kind="pi.assistant"]')]
        .filter((item) => Number(item.dataset.entryId) > afterId)
        .map((item) => item.querySelector(".msg-body")?.textContent ?? "")
        .find((body) => body.includes(text)),
    [afterId, text] as const,
    { timeout },
  );
  return String(await handle.jsonValue());
}

/** The chat's card of the last call of tool `name` (Playwright locator). */
export function toolCard(page: Page, name: string) {
  return page.locator(`#chat-log .tool[data-tool="${name}"]`).last();
}

/** Reloads through the crash banner's "Reload now" (shown once the worker stopped at the armed point). */
export async function reloadFromBanner(page: Page, point: string): Promise<void> {
  const banner = page.locator("#crash-banner");
  await banner.getByText(`Stopped at ${point}`).waitFor({ timeout: 30_000 });
  expect(await banner.textContent()).toContain("reload to crash here");
  await Promise.all([page.waitForEvent("load"), page.click("#banner-reload")]);
  await page.waitForSelector("body[data-ready]", { state: "attached" });
  await waitForStatus(page, "ready");
}

/** Opens the Storage panel, runs a preset query from its button, and returns the result table. */
export async function runPreset(page: Page, preset: string): Promise<{ columns: string[]; rows: string[][] }> {
  await press(page, `[data-preset="${preset}"]`);
  await page.waitForFunction(
    () =>
      (document.querySelector("#sql-meta")?.textContent ?? "").endsWith(" rows") ||
      document.querySelector("#sql-meta")?.textContent === "1 row",
  );
  return page.evaluate(() => ({
    columns: [...document.querySelectorAll("#sql-result th")].map((cell) => cell.textContent ?? ""),
    rows: [...document.querySelectorAll("#sql-result tbody tr")].map((row) =>
      [...row.querySelectorAll("td")].map((cell) => cell.textContent ?? ""),
    ),
  }));
}

/** Saves settings through the Crash panel's form (empty string: the default); the worker restarts with them. */
export async function applySettings(page: Page, fields: Record<string, string>, replay?: "safe" | "unsafe"): Promise<void> {
  await reveal(page, "#settings-form");
  for (const [id, value] of Object.entries(fields)) await page.fill(`#${id}`, value);
  if (replay) await page.check(`#replay-${replay}`);
  const before = await page.evaluateHandle(() => pi.client);
  await page.click("#apply-settings");
  await page.waitForFunction((before) => pi.client !== before, before); // the new worker's status is shown from here on
}

/** Opens the conversation's file `path` in the Storage panel and returns its text once shown. */
export async function shownFile(page: Page, path: string): Promise<string> {
  await press(page, "#files-refresh");
  await press(page, `#files [data-path="${path}"]`);
  const handle = await page.waitForFunction((path) => {
    const content = document.querySelector<HTMLElement>("#file-content");
    return content && !content.hidden && content.dataset.path === path ? content.textContent : undefined;
  }, path);
  return String(await handle.jsonValue());
}
