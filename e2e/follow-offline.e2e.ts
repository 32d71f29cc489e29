import { describe, expect, it } from "vitest";
import { browserPerTest } from "./support/browser";
import { startTask, waitForShownTask } from "./support/demo";
import { edgePerTest } from "./support/edge";
import { openFollowing, recordTabPrints, tickOf } from "./support/follow";

// Issue 27 item 2 of handover's brief (decisions 0032, 0040): the browser goes offline mid-task
// (`context.setOffline(true)`) and comes back, in both lease modes, in Chromium against workerd.

const session = browserPerTest();
const edge = edgePerTest();

describe("offline mid-task (Chromium + workerd, decision 0032)", () => {
  it("takeover lease: the tab stops at its lease's expiry, the object takes over and finishes; back online the tab runs nothing more (S4, S12)", async () => {
    const name = "short-offline"; // a 3 s lease
    const tabPrints = await recordTabPrints(session);
    const page = await openFollowing(session, edge, name);
    await startTask(page, "example.counter", { to: 40, everyMs: 200 });
    await expect.poll(() => tabPrints.includes("tick 3"), { timeout: 30_000 }).toBe(true);
    await session.context.setOffline(true);
    // Offline the object hears nothing: at the expiry it takes over from what it received.
    await edge.printed.until((lines) => lines.length >= 3, "the object's first ticks while the tab is offline");
    const printedInTab = tabPrints.length;
    await session.context.setOffline(false);
    await edge.printed.until((lines) => lines.includes("tick 40"), "the object's tick 40");
    expect(tabPrints.length).toBe(printedInTab); // the fenced tab ran nothing after the object took over
    for (const place of [tabPrints, edge.printed.lines]) expect(new Set(place).size).toBe(place.length);
    const first = tickOf(edge.printed.lines[0]!);
    expect(first).toBeLessThanOrEqual(tickOf(tabPrints.at(-1)!) + 1);
    expect(edge.printed.lines.map(tickOf)).toEqual(Array.from({ length: 40 - first + 1 }, (_, i) => first + i));
    console.log(`offline, takeover lease: the tab printed ${tabPrints.length}, the object from tick ${first}`);
  });

  it("pinned lease: offline the tab goes on alone and finishes; nothing moves to the object (S5)", async () => {
    const name = "pinned-offline";
    const tabPrints = await recordTabPrints(session);
    const page = await openFollowing(session, edge, name);
    await page.waitForSelector('body[data-runs="here"]', { state: "attached" });
    await startTask(page, "example.counter", { to: 30, everyMs: 200 });
    await expect.poll(() => tabPrints.includes("tick 3"), { timeout: 30_000 }).toBe(true);
    await session.context.setOffline(true);
    await expect.poll(() => tabPrints.includes("tick 20"), { timeout: 30_000, message: "the tab counts on offline" }).toBe(true);
    await session.context.setOffline(false);
    expect(await waitForShownTask(page, "counted to 30")).toContain("terminal");
    expect(tabPrints).toEqual(Array.from({ length: 30 }, (_, i) => `tick ${i + 1}`));
    expect(edge.printed.lines).toEqual([]);
  });
});
