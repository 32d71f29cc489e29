import { describe, expect, it } from "vitest";
import { browserPerTest } from "./support/browser";
import { armCrashPoint, crashPointHit, openDemo, startTask, taskRows, ticks, waitForShownTask, waitForStatus } from "./support/demo";
import { edgePerTest } from "./support/edge";

// The demo page against a real local Durable Object (workerd, e2e/edge/worker.ts) in real Chromium: the
// infrastructure the follow tests stand on (e2e/support/edge.ts). The object's crash is real: `ctx.abort()`
// inside it, and an eviction is workerd stopped and started on the same storage. Ticks are printed through a
// service binding into this process, so what the object did survives what it forgot.

const session = browserPerTest();
const edge = edgePerTest();

async function openOnObject(name: string) {
  const page = await openDemo(session, `?edge=${encodeURIComponent(edge.socketUrl(name))}`);
  await waitForStatus(page, "ready");
  return page;
}

describe("a page on a local Durable Object (Chromium + workerd)", () => {
  it("ctx.abort() at a crash point: the object recovers the running task, counts the restart and never prints a tick twice (S4, S12)", async () => {
    const page = await openOnObject("abort");
    await armCrashPoint(page, "counter:after-tick-3");
    await startTask(page, "example.counter", { to: 6 });
    await crashPointHit(page);
    await edge.abort("abort");
    // The page's socket comes back to the object's next instance, whose open counted the restart.
    await page.waitForFunction(() => /recovered task #\d+/.test(document.querySelector("#status")?.textContent ?? ""), undefined, {
      timeout: 30_000,
    });
    expect(await waitForShownTask(page, "counted to 6")).toContain("terminal");
    await edge.printed.until((lines) => lines.length >= 6, "six ticks");
    expect(edge.printed.lines).toEqual(ticks(1, 6));
    const [row] = (await taskRows(page)).filter((task) => task.kind === "example.counter");
    expect(row?.record.state).toMatchObject({ status: "terminal", outcome: { status: "completed", result: "counted to 6" } });
  });

  it("the page closes and workerd restarts on the same storage (an eviction): the object's alarm carries the task to its end (S4, S12)", async () => {
    const page = await openOnObject("evicted");
    await startTask(page, "example.counter", { to: 40 });
    await edge.printed.until((lines) => lines.includes("tick 2"), "tick 2");
    await page.close();
    await edge.restart();
    expect(edge.printed.lines).not.toContain("tick 40"); // the eviction cut the task in its middle
    await edge.printed.until((lines) => lines.includes("tick 40"), "tick 40");
    // Ticks the eviction cut between memo and print are lost, never repeated (S3: memo before the side effect).
    expect(new Set(edge.printed.lines).size).toBe(edge.printed.lines.length);
    const again = await openOnObject("evicted");
    expect(await waitForShownTask(again, "counted to 40")).toContain("terminal");
  });
});
