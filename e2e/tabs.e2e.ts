import type { Page } from "playwright-core";
import { describe, expect, it } from "vitest";
import { crashTab, harnessStatus, waitForReady, waitForTask } from "../src/testing/playwright.ts";
import { STORY } from "../worker/offline-model.ts";
import { PROBE } from "../worker/protocol.ts";
import { browserPerTest } from "./support/browser";
import { openDemo, sendMessage, toolCard, waitForReply, waitForStatus, waitForUserEntry } from "./support/demo";

// Every tab is live (issue 15, decision record 0017): three tabs of the demo app on one database. The tab
// whose worker holds the database lock leads; the others reach its worker and have the whole client API and
// the chat. When the leader goes (closed, reloaded, renderer crashed, taken over) one follower's worker opens
// the database and recovers, and the other tabs keep their views. Assertions are on what each page shows and
// on the database through the client's read-only SQL.

const session = browserPerTest();

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
  it("the testing helpers waitForReady and waitForTask work in a follower tab (its own worker waits for the lock; its client is ready)", async () => {
    const leader = await openDemo(session);
    await waitForReady(leader, 30_000);
    expect(await role(leader)).toBe("leader");
    const follower = await openDemo(session);
    await waitForReady(follower, 15_000);
    expect(await role(follower)).toBe("follower");
    // Its own worker is not the one that is open: it still waits for the database lock (the old helper waited on it).
    expect((await harnessStatus(follower)).kind).toBe("waiting-for-lock");
    // waitForTask in the follower tab sees a task the leader tab made (through the follower's client).
    const id = await leader.evaluate(() => pi.client.createTask("example.counter", { to: 2 }));
    const done = await waitForTask(follower, (task) => task.id === id && task.state.status === "terminal", 15_000);
    expect(done.state).toMatchObject({ status: "terminal", outcome: { status: "completed" } });
  });

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

  it("a renderer crash of the leader hands the database to a follower; the other follower keeps its view", async () => {
    const first = await openTab("leader");
    const second = await openTab("follower");
    const third = await openTab("follower");
    await sendMessage(first, "before the crash");
    const id = await waitForUserEntry(second, "before the crash");
    await waitForReply(second, id, 'You said "before the crash"');
    const reopened = session.track(await crashTab(first, "renderer"));
    await waitForRole(second, "leader");
    await waitForRole(third, "follower");
    await waitForStatus(reopened, "ready");
    await waitForRole(reopened, "follower");
    for (const page of [third, reopened]) await waitForReply(page, id, 'You said "before the crash"');
    expect(await shownChat(third)).toEqual(await shownChat(second));
    expect(await shownChat(reopened)).toEqual(await shownChat(second));
  });

  it("closing the leader mid-answer: a follower takes over, recovers, and both remaining tabs show the answer told again", async () => {
    const first = await openTab("leader");
    const second = await openTab("follower");
    const third = await openTab("follower");
    await sendMessage(third, "story");
    const id = await waitForUserEntry(third, "story");
    // The partial answer streams into every tab (live frames, not durable yet).
    for (const page of [second, third])
      await page.waitForFunction(() => (document.querySelector('[data-live="generation"] .msg-body')?.textContent ?? "").length > 0);
    await first.close();

    await waitForRole(second, "leader");
    await waitForRole(third, "follower");
    for (const page of [second, third]) expect(await waitForReply(page, id, STORY)).toContain(STORY);
    expect(await shownChat(third)).toEqual(await shownChat(second));
    const stories = await second.evaluate(async () => (await pi.client.query("SELECT count(*) AS n FROM submissions")).at(0)?.n);
    expect(stories).toBe(1); // submitted once, answered after the recovery
  });

  it("closing the leader mid-tool: the new leader records the tool as interrupted, in every remaining tab", async () => {
    const first = await openTab("leader");
    const second = await openTab("follower");
    const third = await openTab("follower");
    await sendMessage(second, PROBE.input);
    for (const page of [second, third]) {
      const card = toolCard(page, PROBE.tool);
      await card.and(page.locator('[data-status="running"]')).waitFor({ timeout: 30_000 });
    }
    await first.close();

    await waitForRole(second, "leader");
    for (const page of [second, third]) {
      const card = toolCard(page, PROBE.tool);
      await card.and(page.locator('[data-code="interrupted"]')).waitFor({ timeout: 30_000 });
      expect(await waitForReply(page, Number(await card.getAttribute("data-entry-id")), "interrupted")).toContain(PROBE.tool);
    }
    expect(await shownChat(third)).toEqual(await shownChat(second));
  });
});

/**
 * Keeps four lanes of write submissions going from the page, each naming its tab and number, until `stop`
 * (to a conversation no tab shows: the load is the submissions, not the rendering of thousands of entries).
 * Each records its outcome, and whether the tab's status left "ready" while it was in flight (it spanned the
 * hand-over).
 */
async function startSubmitting(page: Page, tab: string, conversationId: number): Promise<void> {
  await page.evaluate(
    async ([tab, conversationId]) => {
      const state = { stop: false, started: 0, outcomes: [] as string[], spanned: 0, epoch: 0, lanes: [] as Promise<void>[] };
      (globalThis as { e2eSubmits?: typeof state }).e2eSubmits = state;
      pi.client.onStatus((status) => {
        if (status.kind !== "ready") state.epoch += 1;
      });
      const lane = async (): Promise<void> => {
        while (!state.stop) {
          const i = state.started++;
          const epoch = state.epoch;
          state.outcomes[i] = await pi.client
            .submit(conversationId, { type: "write", entry: { kind: "e2e.mark", data: { mark: `${tab}-${i}` } } })
            .then(
              () => "ok",
              (error: Error) => error.name,
            );
          if (state.epoch !== epoch) state.spanned += 1;
        }
      };
      state.lanes = [lane(), lane(), lane(), lane()];
    },
    [tab, conversationId] as const,
  );
}

/** Stops the page's submissions once they are all answered; returns how they ended. */
function stopSubmitting(page: Page): Promise<{ marks: string[]; outcomes: string[]; spanned: number }> {
  return page.evaluate(async () => {
    const state = (globalThis as unknown as { e2eSubmits: { stop: boolean; outcomes: string[]; spanned: number; lanes: Promise<void>[] } })
      .e2eSubmits;
    state.stop = true;
    await Promise.all(state.lanes);
    return { marks: state.outcomes.map((_, i) => i), outcomes: state.outcomes, spanned: state.spanned } as never;
  });
}

function started(page: Page): Promise<number> {
  return page.evaluate(() => (globalThis as unknown as { e2eSubmits: { started: number } }).e2eSubmits.started);
}

/** How often each mark was applied, by the database. */
async function appliedMarks(page: Page): Promise<Record<string, number>> {
  const rows = await page.evaluate(() => pi.client.query("SELECT record FROM entries WHERE kind = 'e2e.mark'"));
  const applied: Record<string, number> = {};
  for (const row of rows) {
    const mark = /"mark":"([^"]+)"/.exec(String(row.record))?.[1] ?? "none";
    applied[mark] = (applied[mark] ?? 0) + 1;
  }
  return applied;
}

describe("exactly once across a hand-over", () => {
  /** Every submission of every tab resolved, and the database applied each exactly once. */
  async function expectEachOnce(tabs: Record<string, Page>, reader: Page): Promise<void> {
    const expected: string[] = [];
    let spanned = 0;
    for (const [name, page] of Object.entries(tabs)) {
      const ended = await stopSubmitting(page);
      expect(ended.outcomes.filter((outcome) => outcome !== "ok")).toEqual([]);
      expected.push(...ended.outcomes.map((_, i) => `${name}-${i}`));
      spanned += ended.spanned;
    }
    expect(spanned).toBeGreaterThan(0); // some were in flight while the database moved
    const applied = await appliedMarks(reader);
    expect(Object.keys(applied).sort()).toEqual(expected.sort());
    expect(Object.entries(applied).filter(([, n]) => n !== 1)).toEqual([]);
  }

  it("concurrent submissions from all three tabs while one takes over: every one resolves and is applied exactly once; the old leader follows", async () => {
    const tabs = { a: await openTab("leader"), b: await openTab("follower"), c: await openTab("follower") };
    const conversation = await tabs[Object.keys(tabs)[0] as keyof typeof tabs].evaluate(() => pi.client.createConversation());
    for (const [name, page] of Object.entries(tabs)) await startSubmitting(page, name, conversation);
    for (const page of Object.values(tabs)) await expect.poll(() => started(page), { timeout: 30_000 }).toBeGreaterThan(8);
    await tabs.c.click("#takeover");

    await waitForRole(tabs.c, "leader");
    await waitForRole(tabs.a, "follower");
    for (const page of Object.values(tabs)) {
      const before = await started(page);
      await expect.poll(() => started(page), { timeout: 30_000 }).toBeGreaterThan(before + 4); // going on after it
    }
    await expectEachOnce(tabs, tabs.a);
  });

  it("concurrent submissions from the followers while the leader closes: every one resolves and is applied exactly once", async () => {
    const first = await openTab("leader");
    const tabs = { b: await openTab("follower"), c: await openTab("follower") };
    const conversation = await tabs[Object.keys(tabs)[0] as keyof typeof tabs].evaluate(() => pi.client.createConversation());
    for (const [name, page] of Object.entries(tabs)) await startSubmitting(page, name, conversation);
    for (const page of Object.values(tabs)) await expect.poll(() => started(page), { timeout: 30_000 }).toBeGreaterThan(8);
    await first.close();

    await waitForRole(tabs.b, "leader");
    await waitForRole(tabs.c, "follower");
    for (const page of Object.values(tabs)) {
      const before = await started(page);
      await expect.poll(() => started(page), { timeout: 30_000 }).toBeGreaterThan(before + 4);
    }
    await expectEachOnce(tabs, tabs.c);
  });
});
