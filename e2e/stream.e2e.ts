import { mkdir } from "node:fs/promises";
import type { Page } from "playwright-core";
import { describe, expect, it } from "vitest";
import { waitForReady } from "../src/testing/playwright.ts";
import { STORY } from "../worker/offline-model.ts";
import { PROBE } from "../worker/protocol.ts";
import { browserPerTest } from "./support/browser";
import { openDemo, query, reveal, sendMessage, toolCard, waitForReply, waitForStatus, waitForUserEntry } from "./support/demo";

// The live channel in the demo app with the default settings (persistWithinMs 1000): the partial answer is on
// screen before it is committed, and after a reload (the crash) the page shows only what was committed. Then
// the recovery a person sees: the retry countdown, the aborted partial, the interrupted tool's notice, at
// 1280×800 and 390×844 (screenshots in .tmp/screenshots/stream-*.png).

const session = browserPerTest();

async function openApp(): Promise<Page> {
  const page = await openDemo(session);
  await waitForReady(page);
  await waitForStatus(page, "ready");
  return page;
}

/** The committed partial answer's text (pi.live.generation.message), "" when nothing is committed yet. */
async function committedPartial(page: Page): Promise<string> {
  const rows = await query(page, "SELECT record ->> '$.value.generation.message' AS message FROM documents WHERE key = 'pi.live'");
  const message = rows.map((row) => row.message).find((value) => typeof value === "string");
  if (typeof message !== "string") return "";
  return (JSON.parse(message) as { content: Array<{ type: string; text?: string }> }).content.map((part) => part.text ?? "").join("");
}

/** The streamed partial on screen and whether it is marked durable. */
function shownPartial(page: Page): Promise<{ text: string; durable: string | null }> {
  return page.evaluate(() => {
    const element = document.querySelector<HTMLElement>('[data-live="generation"]');
    return { text: element?.querySelector(".msg-body")?.textContent ?? "", durable: element?.dataset.durable ?? null };
  });
}

async function screenshots(page: Page, name: string): Promise<void> {
  await mkdir(".tmp/screenshots", { recursive: true });
  for (const [width, height] of [
    [1280, 800],
    [390, 844],
  ] as const) {
    await page.setViewportSize({ width, height });
    await page.evaluate(() => pi.showView("chat")); // the narrow layout shows one view at a time
    await page.evaluate(() => new Promise((resolve) => requestAnimationFrame(() => requestAnimationFrame(resolve))));
    await page.screenshot({ path: `.tmp/screenshots/stream-${name}-${width}x${height}.png` });
  }
  await page.setViewportSize({ width: 1280, height: 800 });
}

describe("the live channel", () => {
  it("S9: the partial answer is on screen before it is committed, in many small updates, with the default persistWithinMs; each live frame carries only the new text", async () => {
    const page = await openApp();
    // The raw frames of a second subscription, as the worker sends them.
    await page.evaluate(async () => {
      const frames: string[] = [];
      (globalThis as { e2eFrames?: string[] }).e2eFrames = frames;
      const client = pi.client;
      await client.watchConversationUpdates(await client.rootConversation(), (update) => {
        if (update.type === "live" && update.answer) frames.push(JSON.stringify(update.answer));
      });
    });
    // Every text the streamed answer shows, in order, as the page's DOM changes.
    await page.evaluate(() => {
      const seen: string[] = [];
      (globalThis as { e2eShown?: string[] }).e2eShown = seen;
      new MutationObserver(() => {
        const text = document.querySelector('[data-live="generation"] .msg-body')?.textContent ?? "";
        if (text && text !== seen.at(-1)) seen.push(text);
      }).observe(document.querySelector("#chat-live")!, { childList: true, subtree: true, characterData: true });
    });
    await sendMessage(page, "story");
    await page.waitForFunction(() => (document.querySelector('[data-live="generation"] .msg-body')?.textContent ?? "").length >= 8);
    const shown = await shownPartial(page);
    expect(shown.durable).toBe("false"); // marked as not yet durable
    expect(STORY.startsWith(shown.text)).toBe(true);
    // persistWithinMs is 1000: the first commit of the partial comes a second after its first chunk.
    expect((await committedPartial(page)).length).toBeLessThan(shown.text.length);

    const userEntry = await waitForUserEntry(page, "story");
    expect(await waitForReply(page, userEntry, STORY)).toBe(STORY);
    const texts = await page.evaluate(() => (globalThis as { e2eShown?: string[] }).e2eShown ?? []);
    // The screen follows the tokens, not the save interval (1 update a second before the live channel).
    expect(texts.length).toBeGreaterThan(20);
    for (const [index, text] of texts.entries())
      if (index > 0) expect(text.startsWith(texts[index - 1]!), "the partial only grows").toBe(true);

    // The first frame of the answer is whole; every later one appends to the text the page holds.
    const frames = (await page.evaluate(() => (globalThis as { e2eFrames?: string[] }).e2eFrames ?? [])).map(
      (json) => JSON.parse(json) as { message?: { content: Array<{ text?: string }> }; grown?: { at: number; text: string } },
    );
    expect(frames[0]?.message).toBeDefined();
    let received = "";
    for (const frame of frames) {
      if (frame.message) received = frame.message.content.map((part) => part.text ?? "").join("");
      else if (frame.grown) {
        expect(frame.grown.at).toBe(received.length);
        received += frame.grown.text;
      }
      expect(STORY.startsWith(received)).toBe(true);
    }
    const appends = frames.filter((frame) => frame.grown);
    expect(appends.length).toBeGreaterThan(20);
    expect(Math.max(...appends.map((frame) => JSON.stringify(frame).length))).toBeLessThan(STORY.length / 4);
  });

  it("S9: after a reload mid-answer the page shows only committed text: the aborted partial as committed, a countdown to the retry (screenshots)", async () => {
    const page = await openApp();
    await sendMessage(page, "story");
    // Wait until something is committed and the screen is ahead of it.
    await page.waitForFunction(() => (document.querySelector('[data-live="generation"] .msg-body')?.textContent ?? "").length >= 8);
    let committed = "";
    let shown = { text: "", durable: null as string | null };
    for (let tries = 0; tries < 200; tries++) {
      shown = await shownPartial(page);
      committed = await committedPartial(page);
      if (committed.length > 0 && shown.text.length > committed.length) break;
      await page.waitForTimeout(50);
    }
    expect(committed.length).toBeGreaterThan(0);
    expect(shown.text.length).toBeGreaterThan(committed.length);

    await page.reload();
    await waitForStatus(page, "ready");
    const aborted = page.locator('#chat-log li[data-kind="pi.assistant"][data-stop-reason="aborted"]');
    await aborted.waitFor();
    const abortedText = (await aborted.locator(".md").textContent()) ?? "";
    // Exactly what was committed before the crash (the kept partial), never the newer live text.
    expect(STORY.startsWith(abortedText)).toBe(true);
    const stored = await query(
      page,
      "SELECT record ->> '$.payload.message.content[0].text' AS text FROM entries WHERE kind = 'pi.assistant' ORDER BY id DESC LIMIT 1",
    );
    expect(abortedText).toBe(stored[0]?.text);
    expect(abortedText.length).toBeLessThan(shown.text.length);
    expect(await aborted.locator(".msg-flag").textContent()).toContain("Cut off");

    const retry = page.locator("#chat-live .retry");
    await retry.waitFor();
    const notice = (await retry.textContent()) ?? "";
    expect(notice).toMatch(/^Retrying in \d s — attempt 2 of 4, the previous request was cut off by a reload\.$/);
    await screenshots(page, "retry");
    // The countdown moves on its own.
    await page.waitForFunction((before) => document.querySelector("#chat-live .retry")?.textContent !== before, notice, {
      timeout: 10_000,
    });
    const userEntry = await waitForUserEntry(page, "story");
    expect(await waitForReply(page, userEntry, STORY, 60_000)).toBe(STORY);
  });

  it("S8: an interrupted tool's result is a notice for the person; the help list renders as a list (screenshots)", async () => {
    const page = await openApp();
    await sendMessage(page, "help");
    const help = page.locator('#chat-log li[data-kind="pi.assistant"] ul.md-list').last();
    await help.waitFor({ timeout: 30_000 });
    expect(await help.locator("li").count()).toBeGreaterThan(3);

    await reveal(page, "#crash-point");
    await page.selectOption("#crash-point", "tool:output-persisted");
    await page.click("#arm");
    await page.locator("#crash-banner-text").getByText("Armed").waitFor();
    await sendMessage(page, "probe");
    await page.locator("#crash-banner").getByText("Stopped at tool:output-persisted").waitFor({ timeout: 30_000 });
    await Promise.all([page.waitForEvent("load"), page.click("#banner-reload")]);
    await waitForStatus(page, "ready");
    const card = toolCard(page, PROBE.tool);
    await card.and(page.locator('[data-code="interrupted"]')).waitFor({ timeout: 30_000 });
    expect(await card.locator(".tool-notice").textContent()).toContain("Cut off by a reload");
    expect(await card.locator(".tool-result").textContent()).not.toContain("<harness>");
    await waitForReply(page, Number(await card.getAttribute("data-entry-id")), "interrupted");
    await screenshots(page, "tool");
  });
});
