import { mkdir } from "node:fs/promises";
import { describe, expect, inject, it } from "vitest";
import { waitForReady } from "../src/testing/playwright.ts";
import { browserPerTest, startBrowser } from "./support/browser";
import { openDemo, sendMessage, waitForReply, waitForStatus, waitForUserEntry } from "./support/demo";
import { edgePerTest } from "./support/edge";

// Issue 27 item 2's last half in real Chromium against a real workerd (decision 0037): the demo page opened with
// `?follow=` runs its agent in the tab under the object's lease and mirrors it; a second browser context (another
// Chromium profile: another device) opens the demo on the object's page socket (`?edge=`) and is served the
// object's copy — it watches the tab's conversation live and its submission is forwarded to the tab, which answers.

const session = browserPerTest();
const edge = edgePerTest();

describe("another device watches the tab's conversation through its Durable Object (Chromium + workerd)", () => {
  it("S5: a second browser context on the object's page socket sees the tab's chat live and submits to it; the tab runs the turn, both show it", async () => {
    const name = "follow-devices";
    const tab = await openDemo(session, `?follow=${encodeURIComponent(edge.followUrl(name))}`);
    await waitForStatus(tab, "ready");
    await tab.waitForSelector('body[data-runs="here"]', { state: "attached" });
    await sendMessage(tab, "hello from the tab");
    const first = await waitForUserEntry(tab, "hello from the tab");
    await waitForReply(tab, first, "");
    const other = await startBrowser();
    try {
      const device = await other.newPage(`${inject("demoBaseUrl")}?edge=${encodeURIComponent(edge.socketUrl(name))}`);
      await waitForReady(device); // the page's client of the object by URL (pi-durable-web/testing)
      await waitForStatus(device, "ready");
      expect(await device.getAttribute("body", "data-runs")).toBe("elsewhere");
      // What the tab wrote before the device came, then live while it watches.
      await waitForUserEntry(device, "hello from the tab");
      await sendMessage(tab, "second from the tab");
      const second = await waitForUserEntry(device, "second from the tab");
      await waitForReply(device, second, "");
      // The device's message is forwarded to the tab, which runs the turn; both show it.
      await sendMessage(device, "hello from another device");
      const forwarded = await waitForUserEntry(tab, "hello from another device");
      const answered = await waitForReply(tab, forwarded, "");
      expect(await waitForReply(device, forwarded, answered)).toBe(answered);
      expect(await waitForUserEntry(device, "hello from another device")).toBe(forwarded);
      await mkdir(".tmp/screenshots", { recursive: true });
      await device.screenshot({ path: ".tmp/screenshots/devices-second-context.png" });
      // The page's app methods are served from the copy too (the demo asks models.list): the Log shows no error.
      expect(await device.$$eval("#errors li", (items) => items.map((item) => item.textContent))).toEqual([]);
      const users = await device.$$eval('#chat-log li[data-kind="pi.user"]', (items) => items.map((item) => item.textContent));
      expect(users).toEqual(["hello from the tab", "second from the tab", "hello from another device"]);
    } finally {
      await other.close();
    }
  });
});
