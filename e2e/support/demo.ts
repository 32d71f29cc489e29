import type { Page } from "playwright-core";
import { inject } from "vitest";
import type { CrashPointHit, HarnessClient } from "../../src/browser/client.ts";
import type { Json } from "../../src/json.ts";
import type { Row } from "../../src/storage/storage.ts";
import type { TaskRecord } from "../../src/storage/records.ts";
import type { BrowserSession } from "./browser";

// Helpers for driving the demo app (web/main.ts, production build) the way a person would: its buttons, its
// page text, and the console hooks it documents (`globalThis.pi`, `body[data-status]`).

declare global {
  // The demo page's console hooks (web/main.ts).
  var pi: { readonly client: HarnessClient; transcript(): string[]; restartWorker(): void };
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
  await page.waitForFunction((line) => (document.querySelector("#transcript")?.textContent ?? "").split("\n").includes(line), line, { timeout });
}

/** Waits until the page's task list shows a task whose line contains `text`; returns that line. */
export async function waitForShownTask(page: Page, text: string, timeout = 30_000): Promise<string> {
  const item = page.locator("#tasks li", { hasText: text }).first();
  await item.waitFor({ state: "attached", timeout });
  return (await item.textContent()) ?? "";
}

/** Starts a task through the page's form (kind + JSON input, "Start task"). */
export async function startTask(page: Page, kind: string, input: Json): Promise<void> {
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
  return rows.map((row) => ({ id: Number(row.id), kind: String(row.kind), status: String(row.status), record: JSON.parse(String(row.record)) as TaskRecord }));
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
