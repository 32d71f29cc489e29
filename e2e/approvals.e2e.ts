import { mkdir } from "node:fs/promises";
import type { Page } from "playwright-core";
import { describe, expect, it } from "vitest";
import { waitForReady } from "../src/testing/playwright.ts";
import { PROBE } from "../worker/protocol.ts";
import { browserPerTest } from "./support/browser";
import { openDemo, query, sendMessage, toolCard, waitForReply, waitForStatus, waitForUserEntry } from "./support/demo";

// A person in the loop in the demo app (issue 23, decision 0024), in real Chromium on real OPFS: the "ask
// before writing files" switch puts an approval rule on the file tools, and a call that writes waits on its
// card (arguments, age, Approve / Deny with a reason) for as long as it takes — through a reload, decided from
// any tab, exactly once. Every test says what happened to notes.txt: written exactly once, or never.

const session = browserPerTest();
const NOTE = "note buy milk";
const WRITTEN = "buy milk\n";

async function openTab(role: "leader" | "follower"): Promise<Page> {
  const page = await openDemo(session);
  await waitForReady(page);
  await page.waitForSelector(`body[data-status="ready"][data-role="${role}"]`, { state: "attached", timeout: 30_000 });
  return page;
}

/** Flips the switch on and waits until its entry is committed (every tab's view then says so). */
async function askBeforeWriting(page: Page): Promise<void> {
  await page.locator("#ask-before-writing:not(:disabled)").waitFor();
  await page.click("#ask-before-writing");
  await page.waitForSelector('body[data-ask-before-writing="true"]', { state: "attached" });
}

/** notes.txt as the worker's files have it, or null when there is none. */
function notes(page: Page): Promise<string | null> {
  return page.evaluate(async () => {
    const id = await pi.client.rootConversation();
    const files = (await pi.client.call("files.list", id)) as string[];
    return files.includes("notes.txt") ? ((await pi.client.call("files.read", id, "notes.txt")) as string) : null;
  });
}

/** The approval records in the database (one per call that asked): `pi.approval:<callId>` documents. */
async function approvalRecords(page: Page): Promise<Array<{ key: string; status: string; reason?: string }>> {
  const rows = await query(page, "SELECT key, record FROM documents WHERE key LIKE 'pi.approval:%' ORDER BY key");
  return rows.map((row) => {
    const value = (JSON.parse(String(row.record)) as { value: { status: string; reason?: string } }).value;
    return { key: String(row.key), status: value.status, ...(value.reason !== undefined ? { reason: value.reason } : {}) };
  });
}

/** The append card, once it waits for a decision. */
async function waitingCard(page: Page) {
  const card = toolCard(page, "append");
  await card.locator(".approval .approval-approve").waitFor({ timeout: 30_000 });
  expect(await card.getAttribute("data-status")).toBe("awaiting-approval");
  return card;
}

async function screenshot(page: Page, name: string): Promise<void> {
  await mkdir(".tmp/screenshots", { recursive: true });
  await page.screenshot({ path: `.tmp/screenshots/approvals-${name}.png` });
}

describe("ask before writing files", () => {
  it("S1/S4: a call waiting for approval sleeps through a reload; the card is back with its arguments, and Approve writes the file once (S8: nothing ran before)", async () => {
    const page = await openTab("leader");
    await askBeforeWriting(page);
    await sendMessage(page, NOTE);
    const asked = await waitForUserEntry(page, NOTE);
    let card = await waitingCard(page);
    expect(await card.locator(".approval-args dt").allTextContents()).toEqual(["path", "text"]);
    expect(await card.locator(".approval-args dd").allTextContents()).toEqual(["notes.txt", WRITTEN]);
    expect(await card.locator(".approval-age").textContent()).toMatch(/^Asked (just now|\d+ s ago)\.$/);
    const callId = await card.getAttribute("data-call-id");
    await screenshot(page, "waiting");
    expect(await notes(page)).toBeNull(); // S8: nothing of the tool runs before the decision

    await session.reload(page); // the crash
    await waitForStatus(page, "ready");
    card = await waitingCard(page);
    expect(await card.getAttribute("data-call-id")).toBe(callId);
    expect(await card.locator(".approval-args dd").allTextContents()).toEqual(["notes.txt", WRITTEN]);
    // S1/S4: the tool task sleeps without a deadline, left as it was by the reopen.
    const [task] = await query(
      page,
      "SELECT status, record ->> '$.state.until' AS until, record ->> '$.state.checkpoint.phase' AS phase FROM tasks WHERE kind = 'pi.tool'",
    );
    expect(task).toEqual({ status: "sleeping", until: null, phase: "approval" });
    expect(await page.isChecked("#ask-before-writing")).toBe(true); // the switch is durable too
    await screenshot(page, "after-reload");
    // On a phone the card fits: its buttons and the switch stay inside the screen (light and dark).
    await page.setViewportSize({ width: 390, height: 844 });
    await page.evaluate(() => pi.showView("chat"));
    for (const scheme of ["light", "dark"] as const) {
      await page.emulateMedia({ colorScheme: scheme });
      await screenshot(page, `390-${scheme}`);
      for (const selector of [".approval-deny", ".approval-approve", "#ask-before-writing"]) {
        const box = await page.locator(selector).last().boundingBox();
        expect(box!.x + box!.width, selector).toBeLessThanOrEqual(390);
      }
      expect(await page.evaluate(() => document.documentElement.scrollWidth)).toBeLessThanOrEqual(390);
    }
    await page.setViewportSize({ width: 1280, height: 720 });

    await card.locator(".approval-approve").click();
    expect(await waitForReply(page, asked, "Added")).toBe('Added "buy milk" to notes.txt.');
    await card.and(page.locator('[data-status="done"]')).waitFor();
    expect(await card.locator(".approval-outcome").textContent()).toMatch(/^Approved by a person at /);
    expect(await card.locator(".approval").count()).toBe(0);
    expect(await notes(page)).toBe(WRITTEN);
    expect(await approvalRecords(page)).toEqual([{ key: `pi.approval:${callId}`, status: "approved" }]);
  });

  it("approves from a follower tab: the leader's card follows, the file is written once", async () => {
    const leader = await openTab("leader");
    const follower = await openTab("follower");
    await askBeforeWriting(leader);
    await follower.waitForSelector('body[data-ask-before-writing="true"]', { state: "attached" });
    await sendMessage(leader, NOTE);
    const asked = await waitForUserEntry(leader, NOTE);
    await waitingCard(leader);
    const card = await waitingCard(follower);
    await card.locator(".approval-approve").click();
    for (const page of [leader, follower]) {
      expect(await waitForReply(page, asked, "Added")).toBe('Added "buy milk" to notes.txt.');
      expect(await toolCard(page, "append").locator(".approval-outcome").textContent()).toMatch(/^Approved by a person/);
    }
    expect(await notes(follower)).toBe(WRITTEN);
    expect((await approvalRecords(leader)).map((record) => record.status)).toEqual(["approved"]);
  });

  it("denies with a reason: the model reads it and the turn goes on; the file is never written", async () => {
    const page = await openTab("leader");
    await askBeforeWriting(page);
    await sendMessage(page, NOTE);
    const asked = await waitForUserEntry(page, NOTE);
    const card = await waitingCard(page);
    await card.locator(".approval-reason").fill("not on the shared list");
    await card.locator(".approval-deny").click();
    const reply = await waitForReply(page, asked, "did not run");
    expect(reply).toBe(`I did not run append: the person denied it (reason: not on the shared list). ${PROBE.path} is as it was.`);
    expect(await card.getAttribute("data-code")).toBe("denied");
    expect(await card.locator(".approval-outcome").textContent()).toMatch(/^Denied by a person at .*: not on the shared list$/);
    await screenshot(page, "denied");
    expect(await notes(page)).toBeNull();
    expect(await approvalRecords(page)).toEqual([
      { key: `pi.approval:${await card.getAttribute("data-call-id")}`, status: "denied", reason: "not on the shared list" },
    ]);
    // The conversation goes on: the next message is answered.
    await sendMessage(page, "list files");
    expect(await waitForReply(page, await waitForUserEntry(page, "list files"), "no files yet")).toBe("There are no files yet.");
  });

  it("two tabs decide at once: one decision wins, the other tab shows AlreadyDecided naming it; the file is written once or never", async () => {
    const leader = await openTab("leader");
    const follower = await openTab("follower");
    await askBeforeWriting(leader);
    await sendMessage(leader, NOTE);
    const asked = await waitForUserEntry(leader, NOTE);
    await waitingCard(leader);
    await waitingCard(follower);
    // Both click at the same instant of the shared clock: neither tab has seen the other's decision yet.
    const at = Date.now() + 400;
    const clickAt = ([at, button]: readonly [number, string]) =>
      new Promise<void>((done) =>
        setTimeout(
          () => {
            document.querySelector<HTMLButtonElement>(`#chat-log .tool[data-tool="append"] ${button}`)!.click();
            done();
          },
          Math.max(0, at - Date.now()),
        ),
      );
    await Promise.all([
      leader.evaluate(clickAt, [at, ".approval-approve"] as const),
      follower.evaluate(clickAt, [at, ".approval-deny"] as const),
    ]);
    for (const page of [leader, follower]) await waitForReply(page, asked, "notes.txt");
    const errors = async () =>
      Promise.all([leader, follower].map((page) => toolCard(page, "append").locator(".approval-error").allTextContents()));
    await expect.poll(async () => (await errors()).flat().length).toBe(1);
    const [record] = await approvalRecords(leader);
    const approved = record!.status === "approved";
    const loser = approved ? follower : leader;
    const error = toolCard(loser, "append").locator(".approval-error");
    expect(await error.getAttribute("data-error-name")).toBe("AlreadyDecided");
    expect(await error.textContent()).toContain(`was already ${approved ? "approved" : "denied"} by a person`);
    await screenshot(loser, "second-decision");
    expect(await notes(leader)).toBe(approved ? WRITTEN : null);
    expect((await approvalRecords(follower)).length).toBe(1);
  });

  it("a follow-up sent while a call waits queues behind the decision: one approval, no second request for the same note, the file written once", async () => {
    const page = await openTab("leader");
    await askBeforeWriting(page);
    await sendMessage(page, NOTE);
    const asked = await waitForUserEntry(page, NOTE);
    const card = await waitingCard(page);
    await sendMessage(page, "list files");
    await page.locator('#inbox-list li[data-mode="followUp"]', { hasText: "list files" }).waitFor();
    const pending = await page.evaluate(async () => pi.client.pendingApprovals(await pi.client.rootConversation()));
    expect(pending.map((approval) => [approval.toolName, approval.arguments])).toEqual([["append", { path: "notes.txt", text: WRITTEN }]]);
    await screenshot(page, "follow-up-queued");

    await card.locator(".approval-approve").click();
    const added = await waitForReply(page, asked, "Added");
    expect(added).toBe('Added "buy milk" to notes.txt.');
    const followUp = await waitForUserEntry(page, "list files");
    expect(await waitForReply(page, followUp, "The files:")).toBe("The files:notes.txt"); // two lines of markdown
    // The follow-up was placed after the decided turn ended, and the model was asked for the note once.
    const kinds = (await query(page, "SELECT kind FROM entries WHERE kind IN ('pi.user', 'pi.tool-result') ORDER BY id")).map(
      (row) => row.kind,
    );
    expect(kinds).toEqual(["pi.user", "pi.tool-result", "pi.user", "pi.tool-result"]);
    expect((await approvalRecords(page)).map((record) => record.status)).toEqual(["approved"]);
    expect(await page.locator('#chat-log .tool[data-tool="append"]').count()).toBe(1);
    expect(await notes(page)).toBe(WRITTEN);
  });

  it("Stop while a call waits withdraws it: the card says so, no decision is asked again, and the file is never written", async () => {
    const page = await openTab("leader");
    await askBeforeWriting(page);
    await sendMessage(page, NOTE);
    const card = await waitingCard(page);
    await page.click("#stop");
    await card.and(page.locator('[data-status="done"]')).waitFor({ timeout: 30_000 });
    expect(await card.getAttribute("data-code")).toBe("aborted");
    expect(await card.locator(".tool-notice").textContent()).toBe("Stopped: the run was aborted.");
    expect(await card.locator(".approval").count()).toBe(0);
    await page.locator('.run-failure[data-reason="aborted"]').waitFor();
    expect(await approvalRecords(page)).toEqual([{ key: `pi.approval:${await card.getAttribute("data-call-id")}`, status: "withdrawn" }]);
    expect(await page.evaluate(async () => pi.client.pendingApprovals(await pi.client.rootConversation()))).toEqual([]);
    expect(await notes(page)).toBeNull();
  });
});
