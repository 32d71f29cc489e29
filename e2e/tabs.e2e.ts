import type { Page } from "playwright-core";
import { afterEach, beforeEach, describe, expect, it } from "vitest";
import { crashTab } from "../src/testing/playwright.ts";
import { type BrowserSession, startBrowser } from "./support/browser";
import { openDemo, sendMessage, waitForReply, waitForStatus, waitForUserEntry } from "./support/demo";

// Every tab is live (issue 15, decision record 0016): three tabs of the demo app on one database. The tab
// whose worker holds the database lock leads; the others reach its worker and have the whole client API and
// the chat. When the leader goes (closed, reloaded, renderer crashed, taken over) one follower's worker opens
// the database and recovers, and the other tabs keep their views. Assertions are on what each page shows and
// on the database through the client's read-only SQL.

let session: BrowserSession;

beforeEach(async () => {
  session = await startBrowser();
});

afterEach(async () => {
  await session.close();
});

/** The tab's role as its client reports it (undefined until ready). */
function role(page: Page): Promise<string | undefined> {
  return page.evaluate(() => pi.client.role);
}

/** Waits until the page is ready in `expected` role (the role chip shows it too). */
async function waitForRole(page: Page, expected: "leader" | "follower", timeout = 30_000): Promise<void> {
  await page.waitForSelector(`body[data-status="ready"][data-role="${expected}"]`, { state: "attached", timeout });
  expect(await page.textContent("#role")).toBe(expected);
}

/** Opens the demo in a tab and waits for it to be ready in `expected` role. */
async function openTab(expected: "leader" | "follower"): Promise<Page> {
  const page = await openDemo(session);
  await waitForRole(page, expected);
  return page;
}

/** The entries of the chat as the page shows them: kind and text, in order. */
function shownChat(page: Page): Promise<string[]> {
  return page.evaluate(() =>
    [...document.querySelectorAll<HTMLElement>("#chat-log li[data-entry-id]")].map(
      (item) => `${item.dataset.kind}: ${item.querySelector(".msg-body")?.textContent ?? item.textContent}`,
    ),
  );
}

describe("leader and followers", () => {
  it("three tabs: the first leads, the others follow with the whole chat at once; a follower's message is answered in all three", async () => {
    const first = await openTab("leader");
    await sendMessage(first, "hello from the first tab");
    const hello = await waitForUserEntry(first, "hello from the first tab");
    await waitForReply(first, hello, 'You said "hello from the first tab"');

    const second = await openTab("follower");
    const third = await openTab("follower");
    // The chat so far is there as soon as the follower is ready: its first view is the leader's snapshot.
    for (const page of [second, third]) {
      const chat = await shownChat(page);
      expect(chat.some((line) => line.includes("hello from the first tab"))).toBe(true);
    }
    expect(await role(first)).toBe("leader");
    expect(await first.isEnabled("#takeover")).toBe(false);
    expect(await second.isEnabled("#takeover")).toBe(true);

    await sendMessage(second, "ping from a follower");
    for (const page of [first, second, third]) {
      const id = await waitForUserEntry(page, "ping from a follower");
      await waitForReply(page, id, 'You said "ping from a follower"');
    }
    expect(await shownChat(second)).toEqual(await shownChat(first));
    expect(await shownChat(third)).toEqual(await shownChat(first));
    // One submission, one answer: the follower's message was applied once.
    const count = await first.evaluate(async () => {
      const rows = await pi.client.query("SELECT record FROM submissions");
      return rows.filter((row) => String(row.record).includes("ping from a follower")).length;
    });
    expect(count).toBe(1);
  });

  it("a follower has the client API: status with its role, tasks, reports, read-only SQL, create with a key, abort, typed errors", async () => {
    const leader = await openTab("leader");
    const follower = await openTab("follower");
    const result = await follower.evaluate(async () => {
      const client = pi.client;
      const errorOf = (promise: Promise<unknown>) =>
        promise.then(
          () => "resolved",
          (error: Error) => error.name,
        );
      const status = client.status;
      const graphs: number[] = [];
      const stopTasks = await client.watchTasks((inspection) => graphs.push(inspection.tasks.length));
      const reports: string[] = [];
      const stopReports = await client.onReport((report) => reports.push(report.kind));
      const id = await client.createTask("example.counter", { to: 2 }, { key: "follower-count" });
      const again = await client.createTask("example.counter", { to: 2 }, { key: "follower-count" });
      const done = await client.waitForTask(id);
      const conflict = await errorOf(client.createTask("example.counter", { to: 3 }, { key: "follower-count" }));
      const unknown = await errorOf(client.createTask("no.such.kind", {}));
      const stall = await client.createTask("demo.stall", {});
      const aborted = await client.abortTask(stall);
      const stalled = await client.waitForTask(stall);
      const rows = await client.query("SELECT count(*) AS n FROM tasks WHERE kind = ?", "example.counter");
      const write = await errorOf(client.query("DELETE FROM tasks"));
      const conversations = await client.listConversations();
      const image = await client.exportDatabase();
      stopTasks();
      stopReports();
      return {
        role: status.kind === "ready" ? status.role : undefined,
        same: again === id,
        outcome: done.state,
        conflict,
        unknown,
        aborted,
        stalled: stalled.state,
        rows,
        write,
        conversations: conversations.length,
        header: new TextDecoder().decode(image.subarray(0, 15)),
        graphs: graphs.length,
      };
    });
    expect(result).toMatchObject({
      role: "follower",
      same: true,
      outcome: { status: "terminal", outcome: { status: "completed", result: "counted to 2" } },
      conflict: "TaskKeyConflict",
      unknown: "UnknownTaskKind",
      aborted: "marked",
      stalled: { status: "terminal", outcome: { status: "aborted" } },
      rows: [{ n: 1 }],
      write: "QueryNotReadOnly",
      conversations: 1,
      header: "SQLite format 3",
    });
    expect(result.graphs).toBeGreaterThan(0);
    // The leader saw the same tasks: one database.
    const kinds = await leader.evaluate(async () => (await pi.client.query("SELECT kind FROM tasks ORDER BY id")).map((row) => row.kind));
    expect(kinds).toEqual(["example.counter", "demo.stall"]);
  });
});

describe("hand-over", () => {
  it("reloading the leader hands the database to a follower; the reloaded tab follows with the whole chat", async () => {
    const first = await openTab("leader");
    const second = await openTab("follower");
    const third = await openTab("follower");
    await sendMessage(third, "before the reload");
    const id = await waitForUserEntry(first, "before the reload");
    await waitForReply(first, id, 'You said "before the reload"');

    await session.reload(first);
    await waitForRole(second, "leader"); // the first in the lock's queue
    await waitForRole(third, "follower");
    await waitForRole(first, "follower");
    for (const page of [first, second, third]) await waitForReply(page, id, 'You said "before the reload"');
    expect(await shownChat(first)).toEqual(await shownChat(second));
    expect(await shownChat(third)).toEqual(await shownChat(second));
  });

  it("a renderer crash of the leader hands the database to a follower", async () => {
    const first = await openTab("leader");
    const second = await openTab("follower");
    await sendMessage(first, "before the crash");
    const id = await waitForUserEntry(second, "before the crash");
    await waitForReply(second, id, 'You said "before the crash"');
    const reopened = session.track(await crashTab(first, "renderer"));
    await waitForRole(second, "leader");
    await waitForStatus(reopened, "ready");
    await waitForRole(reopened, "follower");
    await waitForReply(reopened, id, 'You said "before the crash"');
  });
});
