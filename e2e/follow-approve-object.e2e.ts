import type { Page } from "playwright-core";
import { describe, expect, inject, it } from "vitest";
import { waitForReady } from "../src/testing/playwright.ts";
import { browserPerTest, startBrowser } from "./support/browser";
import { query, sendMessage, waitForStatus } from "./support/demo";
import { edgePerTest } from "./support/edge";
import { openFollowing } from "./support/follow";

// Decision 0107, in Chromium against workerd: a tool call waits for a person while a tab holds its object's lease;
// the tab closes (it hands the lease over at pagehide) and the object runs the conversation, the call still waiting.
// A second device (another browser profile, following the object read-only) approves it, twice under one decisionId:
// its decision goes through the object's follow link to the object's own harness, which now holds the lease. One
// decision record; the tool runs once (the object's `notes.txt` is `buy milk\n`); one tool result, on the second
// device's copy and on the object (a page of the first device on the object's socket, `?edge=`). Before this, the e2e approved on the
// holding tab only (decision 0103); the object's decide was covered by unit tests (decision 0097).

const session = browserPerTest();
const edge = edgePerTest();

describe("a person approves, through a following device, a call the object took over (Chromium + workerd, decision 0107)", () => {
  it("S8/S12: the tab that held the lease closed with the call waiting; the second device's decision reaches the object's harness: one record, the tool runs once, one result on each device", async () => {
    const name = "follow-approve-object"; // a 10 minute lease: only the close's hand-over moves it here
    const tab = await openFollowing(session, edge, name);
    await tab.waitForSelector('body[data-runs="here"]', { state: "attached" });
    const other = await startBrowser();
    try {
      const device = await other.newPage(`${inject("demoBaseUrl")}?follow=${encodeURIComponent(edge.followUrl(name))}`);
      await waitForStatus(device, "ready");
      await device.waitForSelector('#place-bar[data-place="tab"]', { state: "attached", timeout: 30_000 });

      // The holding tab asks before writing files; its model's append waits for a person.
      await tab.locator("#ask-before-writing:not(:disabled)").waitFor();
      await tab.click("#ask-before-writing");
      await tab.waitForSelector('body[data-ask-before-writing="true"]', { state: "attached" });
      await sendMessage(tab, "note buy milk");
      const conversationId = await device.evaluate(() => pi.client.rootConversation());
      const pending = () => device.evaluate((id) => pi.client.pendingApprovals(id), conversationId);
      await expect.poll(async () => (await pending()).map((call) => call.toolName), { timeout: 60_000 }).toEqual(["append"]);

      // The tab leaves with the call waiting: the object takes the lease and runs the conversation.
      await tab.close();
      await device.waitForSelector('#place-bar[data-place="object"]', { state: "attached", timeout: 60_000 });
      const [card] = await pending(); // still waiting, now on the object
      expect(card?.toolName).toBe("append");

      // The second device approves it, twice under one decisionId (a retry after a lost answer): one record.
      const decision = { approved: true, argumentsHash: card!.argumentsHash, decisionId: "approved-after-takeover" };
      const approve = () =>
        device.evaluate(([id, callId, d]) => pi.client.decide(id, callId, d), [conversationId, card!.callId, decision] as const);
      const record = await approve();
      expect(record).toMatchObject({ callId: card!.callId, status: "approved", decisionId: decision.decisionId });
      expect(await approve()).toEqual(record);

      // The first device's page on the object's socket: the object's own harness answers it.
      const onObject = await session.newPage(`${inject("demoBaseUrl")}?edge=${encodeURIComponent(edge.socketUrl(name))}`);
      await waitForReady(onObject);
      await waitForStatus(onObject, "ready");
      expect(await onObject.getAttribute("body", "data-runs")).toBe("here");
      const notes = (page: Page) => page.evaluate((id) => pi.client.call("files.read", id, "notes.txt").catch(() => null), conversationId);
      const results = (page: Page) =>
        query(page, "SELECT count(*) AS count FROM entries WHERE kind = 'pi.tool-result' AND instr(record, ?) > 0", card!.callId);
      const decisions = (page: Page) => query(page, "SELECT count(*) AS count FROM documents WHERE key = ?", `pi.approval:${card!.callId}`);
      // The tool ran once, on the object (a tool's files live in the environment of the place that runs it).
      await expect.poll(() => notes(onObject), { timeout: 60_000 }).toBe("buy milk\n");
      for (const page of [onObject, device]) {
        await expect.poll(() => results(page), { timeout: 30_000 }).toEqual([{ count: 1 }]);
        expect(await decisions(page)).toEqual([{ count: 1 }]);
      }
      expect(await onObject.evaluate((id) => pi.client.pendingApprovals(id), conversationId)).toEqual([]);
      expect(await pending()).toEqual([]);
      console.log(`approved after the takeover: ${JSON.stringify(record)}`);
    } finally {
      await other.close();
    }
  }, 240_000);
});
