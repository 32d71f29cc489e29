import { afterEach, beforeEach, describe, expect, it } from "vitest";
import { waitForReady, waitForTask } from "../src/testing/playwright.ts";
import "./app/api.ts";
import { type BrowserSession, startBrowser } from "./support/browser";
import { openDemo, query } from "./support/demo.ts";

let session: BrowserSession;

beforeEach(async () => {
  session = await startBrowser();
});

afterEach(async () => {
  await session.close();
});

describe("R9 in Chromium: a deep or huge input from the page is refused in the worker before anything is written", () => {
  it("R9: a 4,000-deep and a 10 MB createTask are InvalidInput on the page; a normal task runs after, and after a reload", async () => {
    const page = await openDemo(session);
    await waitForReady(page);
    const refused = await page.evaluate(async () => {
      const attempt = (input: unknown) =>
        pi.client.createTask("example.counter", input as never).then(
          () => "accepted",
          (error: Error & { limit?: string }) => `${error.name}:${error.limit}`,
        );
      let deep: unknown = 1;
      for (let i = 0; i < 4000; i++) deep = [deep];
      return [await attempt(deep), await attempt({ to: 1, pad: "x".repeat(10 * 1024 * 1024) })];
    });
    expect(refused).toEqual(["InvalidInput:maxDepth", "InvalidInput:maxBytes"]);
    expect(await query(page, "SELECT count(*) AS n FROM tasks")).toEqual([{ n: 0 }]);
    const id = await page.evaluate(() => pi.client.createTask("example.counter", { to: 1 }));
    expect((await waitForTask(page, id)).state).toMatchObject({ status: "terminal", outcome: { status: "completed" } });
    await page.reload();
    await waitForReady(page);
    expect(await query(page, "SELECT count(*) AS n FROM tasks")).toEqual([{ n: 1 }]);
    expect(await page.evaluate(() => pi.client.inspect().then((inspection) => inspection.tasks.length))).toBe(0);
  }, 120_000);
});
