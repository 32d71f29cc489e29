import { mkdir } from "node:fs/promises";
import type { Page } from "playwright-core";
import { describe, expect, inject, it } from "vitest";
import { browserPerTest, startBrowser } from "./support/browser";
import { openDemo, query, waitForStatus } from "./support/demo";
import { edgePerTest } from "./support/edge";
import { openFollowing } from "./support/follow";

// A place per device (decision 0046): `serveHarness({ follow: { url } })` names the tab's place after this browser
// profile (`devicePlace()`: `tab-<random id>` kept in OPFS), not "tab" for every browser. Before, two browsers of one
// user were both "tab": the second one's open was granted the lease under the same name, fenced the first, and forks
// piled up. Now the second device opens read-only while the first holds the lease.

const session = browserPerTest();
const edge = edgePerTest();

/** The id this browser profile keeps (the file devicePlace() writes), read from a page of the origin. */
function keptPlace(page: Page): Promise<string> {
  return page.evaluate(async () => {
    const root = await navigator.storage.getDirectory();
    return (await (await root.getFileHandle("pi-durable-web.place")).getFile()).text();
  });
}

/** The lease's record on the object (its holder's place), read through a page on the object's socket. */
async function leaseHolder(page: Page): Promise<string | undefined> {
  const [row] = await query(page, "SELECT record ->> '$.holder' AS holder FROM pi_follow_lease");
  return (row?.holder as string | null) ?? undefined;
}

describe("a place per device (Chromium + workerd, decision 0046)", () => {
  it("the tab's place is this browser's own id, the same after a reload; a second browser is another place and opens read-only while the first holds the lease", async () => {
    const name = "follow-device";
    const tab = await openFollowing(session, edge, name);
    await tab.waitForSelector('body[data-runs="here"]', { state: "attached" });
    const place = await keptPlace(tab);
    expect(place).toMatch(/^tab-[0-9a-f-]{36}$/);
    const object = await openDemo(session, `?edge=${encodeURIComponent(edge.socketUrl(name))}`);
    await waitForStatus(object, "ready");
    expect(await leaseHolder(object)).toBe(place);
    // The `?edge=` page (a client of the object's own host) names the holder too, from the object's own lease record
    // (decision 0067) — before, "a tab that holds the object's lease" for any holder.
    await object.waitForSelector('#place-bar[data-place="tab"]', { state: "attached" });
    expect(await object.textContent("#place-where")).toBe(`another tab or device (${place.slice(0, 12)})`);
    expect(await object.isVisible("#place-move")).toBe(false);
    await mkdir(".tmp/screenshots", { recursive: true });
    await object.screenshot({ path: ".tmp/screenshots/follow-device-edge-held-by-tab.png" });
    // Another browser profile: another device.
    const other = await startBrowser();
    try {
      const device = await other.newPage(`${inject("demoBaseUrl")}?follow=${encodeURIComponent(edge.followUrl(name))}`);
      await waitForStatus(device, "ready");
      await device.waitForSelector('body[data-runs="elsewhere"]', { state: "attached" });
      const devicePlace = await keptPlace(device);
      expect(devicePlace).toMatch(/^tab-[0-9a-f-]{36}$/);
      expect(devicePlace).not.toBe(place);
      // Its strip names the holder as the object records it (decision 0057): another device, by its place — before,
      // "the Durable Object" (with a Run here the object could not grant) for any holder.
      await device.waitForSelector('#place-bar[data-place="tab"]', { state: "attached", timeout: 30_000 });
      const where = await device.textContent("#place-where");
      expect(where).toBe(`another tab or device (${place.slice(0, 12)})`);
      expect(await device.isVisible("#place-move")).toBe(false);
      expect(await device.textContent("#place-note")).toContain("That tab holds the Durable Object's lease");
      await mkdir(".tmp/screenshots", { recursive: true });
      await device.screenshot({ path: ".tmp/screenshots/follow-device-held-by-tab.png" });
      // The first device still holds the lease and writes.
      expect(await leaseHolder(object)).toBe(place);
      expect(await tab.getAttribute("body", "data-runs")).toBe("here");
    } finally {
      await other.close();
    }
    // A reload keeps the id (the lease then went to the object at the page's leave; the place is the browser's).
    await tab.reload();
    await waitForStatus(tab, "ready");
    expect(await keptPlace(tab)).toBe(place);
  });
});
