import { describe, expect, it } from "vitest";
import { harnessWorker } from "../src/testing/playwright.ts";
import { browserPerTest } from "./support/browser";
import { openDemo, waitForStatus } from "./support/demo.ts";

const session = browserPerTest();

describe("the page client tells a dead worker from a busy one", () => {
  it("a call pending when the worker dies by itself rejects with WorkerGone instead of hanging", async () => {
    const page = await openDemo(session);
    await waitForStatus(page, "ready");
    // A task that never ends, and a wait on it that can only end by the worker's death.
    const id = await page.evaluate(() => pi.client.createTask("demo.stall", {}));
    const pending = page.evaluate(async (id) => {
      try {
        await pi.client.waitForTask(id);
        return "resolved";
      } catch (error) {
        return (error as Error).name;
      }
    }, id);
    const worker = await harnessWorker(page);
    // The worker stops itself (as a crash would): the page did not terminate it, so only the life lock tells.
    await worker.evaluate(() => (globalThis as unknown as { close(): void }).close()).catch(() => {});
    expect(await pending).toBe("WorkerGone");
    await waitForStatus(page, "failed"); // the page is told, without calling anything
    expect(await page.evaluate(() => pi.client.status)).toMatchObject({ kind: "failed", error: { name: "WorkerGone" } });
    expect(
      await page.evaluate(() =>
        pi.client.query("SELECT 1 AS one").then(
          () => "answered",
          (error: Error) => error.name,
        ),
      ),
    ).toBe("WorkerGone");
  });

  it("an uncaught exception inside a live worker does not cut the page off from it", async () => {
    const page = await openDemo(session);
    await waitForStatus(page, "ready");
    const worker = await harnessWorker(page);
    await worker.evaluate(() => {
      setTimeout(() => {
        throw new Error("an extension's stray exception");
      }, 0);
    });
    await page.waitForTimeout(200); // let the error event reach the page
    expect(await page.evaluate(() => pi.client.query("SELECT 1 AS one"))).toEqual([{ one: 1 }]);
  });
});
