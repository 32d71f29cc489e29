import { mkdir } from "node:fs/promises";
import type { Page } from "playwright-core";
import { describe, expect, it } from "vitest";
import { waitForReady } from "../src/testing/playwright.ts";
import { ASK_PERSON } from "../worker/protocol.ts";
import { browserPerTest } from "./support/browser";
import { openDemo, query, sendMessage, toolCard, waitForReply, waitForStatus, waitForUserEntry } from "./support/demo";

// "Ask the person", the demo's page tool (decision 0028), in real Chromium: the worker declares ask_person,
// every tab provides it, one tab claims a call and shows its question on the card; the pick is the result,
// committed once. A reload while it asks is a crash of the page that runs it: the call is unsafe (S8).

const session = browserPerTest();

async function openTab(role: "leader" | "follower"): Promise<Page> {
  const page = await openDemo(session);
  await waitForReady(page);
  await page.waitForSelector(`body[data-status="ready"][data-role="${role}"]`, { state: "attached", timeout: 30_000 });
  return page;
}

/** The ask_person results in the database: the text of each. */
async function results(page: Page): Promise<string[]> {
  const rows = await query(
    page,
    "SELECT record ->> '$.payload.message.content[0].text' AS text FROM entries WHERE kind = 'pi.tool-result' AND record ->> '$.payload.message.toolName' = ? ORDER BY id",
    ASK_PERSON.tool,
  );
  return rows.map((row) => String(row.text));
}

async function screenshot(page: Page, name: string): Promise<void> {
  await mkdir(".tmp/screenshots", { recursive: true });
  await page.screenshot({ path: `.tmp/screenshots/ask-person-${name}.png` });
}

describe("ask the person (a page tool)", () => {
  it("one of two tabs asks the question on the card, the other says where; the pick is the result, committed once, and the model answers with it", async () => {
    const leader = await openTab("leader");
    const follower = await openTab("follower");
    await sendMessage(leader, ASK_PERSON.input);
    const asked = await waitForUserEntry(leader, ASK_PERSON.input);
    // Exactly one tab claimed the call and shows its question; the other tab's card says it is asked elsewhere.
    const asks = (page: Page) => toolCard(page, ASK_PERSON.tool).locator(".ask").count();
    await expect.poll(async () => (await asks(leader)) + (await asks(follower)), { timeout: 30_000 }).toBe(1);
    const [asking, other] = (await asks(leader)) === 1 ? [leader, follower] : [follower, leader];
    const card = toolCard(asking, ASK_PERSON.tool);
    expect(await card.locator(".ask-question").textContent()).toBe(ASK_PERSON.question);
    expect(await card.locator(".ask-choice").allTextContents()).toEqual([...ASK_PERSON.choices]);
    expect(await card.locator(".tool-status").textContent()).toBe("asking you");
    await toolCard(other, ASK_PERSON.tool).locator(".ask-elsewhere").waitFor();
    expect(await toolCard(other, ASK_PERSON.tool).locator(".tool-status").textContent()).toBe("asked in another tab");
    expect(await toolCard(other, ASK_PERSON.tool).locator(".ask").count()).toBe(0);
    await screenshot(asking, "asking");
    await screenshot(other, "elsewhere");

    await card.locator('.ask-choice[data-choice="red"]').click();
    for (const page of [leader, follower]) {
      expect(await waitForReply(page, asked, "You chose")).toBe("You chose red.");
      expect(await toolCard(page, ASK_PERSON.tool).locator(".tool-result").textContent()).toBe("red");
      expect(await toolCard(page, ASK_PERSON.tool).locator(".ask, .ask-elsewhere").count()).toBe(0);
    }
    expect(await results(leader)).toEqual(["red"]);
  });

  it("S8: a reload while it asks (replay unsafe) ends the call interrupted, once, and never asks again; the model says so", async () => {
    const page = await openTab("leader");
    await sendMessage(page, ASK_PERSON.input);
    const asked = await waitForUserEntry(page, ASK_PERSON.input);
    await toolCard(page, ASK_PERSON.tool).locator(".ask").waitFor({ timeout: 30_000 });

    await session.reload(page); // the crash: the page that runs the call goes, its claim with it
    await waitForStatus(page, "ready");
    const card = toolCard(page, ASK_PERSON.tool);
    await card.and(page.locator('[data-code="interrupted"]')).waitFor({ timeout: 30_000 });
    expect(await waitForReply(page, asked, "cut off")).toContain(`The ${ASK_PERSON.tool} call was cut off`);
    await screenshot(page, "interrupted");
    expect(await card.locator(".ask").count()).toBe(0);
    const [result] = await results(page);
    expect(await results(page)).toHaveLength(1);
    expect(result).toContain("interrupted");
  });
});
