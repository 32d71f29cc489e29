import { describe, expect, it } from "vitest";
import type { HarnessClient } from "../src/browser/client.ts";
import "./app/host-api.ts";
import { browserPerTest } from "./support/browser";

// Decision 0144 in Chromium: two tabs of the e2e page on one database. The first leads (its worker has no hook: it lets
// every tab by). The second tab's worker refuses its own page the status (`pageHook: "refuse"`) and, with
// `pageRefuses`, other methods too; other tabs are let by. The second page follows the leader; each of its
// subscriptions is decided by its own worker's door first, as this page's, and only what that door lets by is carried
// to the leader. Before, they went to the leader as another tab's: let by whatever the page's own door said, and a
// first watch before any call failed "not open (status: waiting-for-lock)".

const session = browserPerTest();

declare global {
  interface Window {
    client: HarnessClient;
    updates: number;
  }
}

describe("a tab refused its own status, following the leading tab", () => {
  it("is refused the watch its own worker's door refuses it (NotAuthorized), and let by the ones that door lets by", async () => {
    const leader = await session.newPage();
    const conversation = await leader.evaluate(async () => {
      window.client = window.hostE2e.connect();
      await window.client.ready();
      return window.client.createConversation();
    });
    const page = await session.newPage();
    const seen = await page.evaluate(async (conversation) => {
      const answer = (promise: Promise<unknown>) =>
        promise.then(
          () => "ok",
          (error: Error) => `${error.name}: ${error.message}`,
        );
      window.client = window.hostE2e.connect({ pageHook: "refuse", pageRefuses: ["watchConversation"] });
      const refused = await answer(window.client.ready());
      await window.client.createConversation(); // let by its own door: the page follows the leader
      window.updates = 0;
      const watch = await answer(window.client.watchConversationUpdates(conversation, () => void window.updates++));
      const tasks = await answer(window.client.watchTasks(() => {}));
      const listed = (await window.client.listConversations()).map((one) => one.id);
      return { refused, watch, tasks, listed };
    }, conversation);
    expect(seen.refused).toMatch(/^NotAuthorized/);
    expect(seen.watch).toMatch(/^NotAuthorized: .*watchConversation/);
    expect(seen.tasks).toBe("ok");
    expect(seen.listed).toContain(conversation); // its calls reach the leader's database
    await new Promise((resolve) => setTimeout(resolve, 300));
    expect(await page.evaluate(() => window.updates)).toBe(0);
  }, 60_000);

  it("has its first watch, before any call, carried to the leader once its own door lets it by, and rendered there", async () => {
    const leader = await session.newPage();
    const conversation = await leader.evaluate(async () => {
      window.client = window.hostE2e.connect();
      await window.client.ready();
      return window.client.createConversation();
    });
    const page = await session.newPage();
    const watch = await page.evaluate(async (conversation) => {
      const answer = (promise: Promise<unknown>) =>
        promise.then(
          () => "ok",
          (error: Error) => `${error.name}: ${error.message}`,
        );
      window.client = window.hostE2e.connect({ pageHook: "refuse" });
      await answer(window.client.ready());
      window.updates = 0;
      return answer(window.client.watchConversationUpdates(conversation, () => void window.updates++));
    }, conversation);
    expect(watch).toBe("ok");
    await page.waitForFunction(() => window.updates > 0, undefined, { timeout: 10_000 });
  }, 60_000);
});
