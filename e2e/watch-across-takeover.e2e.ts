import type { Page } from "playwright-core";
import { describe, expect, it } from "vitest";
import { harnessStatus } from "../src/testing/playwright.ts";
import { browserPerTest } from "./support/browser";
import { openDemo } from "./support/demo";

// Decision 0140 (issue 27): a conversation view in a tab whose database another tab takes over goes on — live from
// the tab that took it while that one has it, then on this tab's own worker once the other lets go and the worker
// opens the database again — each entry once, in order, never `lost`. In a browser page the tabs' endpoint moves the
// view (it passes on the code before 0140 too: coverage of the take-over-and-back path no e2e had); the host's own
// move of its views across the takeover is pinned in process (test/watch-across-takeover.test.ts).

const session = browserPerTest();

declare global {
  /** The page's view: each state's entry ids, the marks it shows, and what `lost` told. */
  var e2eView: { ids: number[][]; marks: () => string[]; lost: string[] } | undefined;
}

async function waitForRole(page: Page, expected: "leader" | "follower", timeout = 30_000): Promise<void> {
  await page.waitForSelector(`body[data-status="ready"][data-role="${expected}"]`, { state: "attached", timeout });
}

async function openTab(expected: "leader" | "follower"): Promise<Page> {
  const page = await openDemo(session);
  await waitForRole(page, expected);
  return page;
}

/** Writes an entry naming `mark` into the conversation, through whichever tab holds the database. */
function mark(page: Page, conversationId: number, text: string): Promise<unknown> {
  return page.evaluate(([id, text]) => pi.client.submit(id, { type: "write", entry: { kind: "e2e.mark", data: { mark: text } } }), [
    conversationId,
    text,
  ] as const);
}

const shownMarks = (page: Page) => page.evaluate(() => globalThis.e2eView!.marks());
const lastIds = (page: Page) => page.evaluate(() => globalThis.e2eView!.ids.at(-1) ?? []);

describe("a conversation view across a takeover and back (Chromium, decision 0140)", () => {
  it("S5, S9: the view of the tab taken over shows the other tab's writes live, then goes on on its own worker once the database comes back — each entry once, in order, the fresh view's, never lost", async () => {
    const a = await openTab("leader");
    const conversationId = await a.evaluate(() => pi.client.createConversation());
    await mark(a, conversationId, "a-1");
    await mark(a, conversationId, "a-2");
    await a.evaluate(async (id) => {
      const view = await pi.client.openConversation(id);
      const record = {
        ids: [] as number[][],
        lost: [] as string[],
        marks: () =>
          view.state.entries
            .filter((entry) => entry.kind === "e2e.mark")
            .map((entry) => /"mark":"([^"]+)"/.exec(JSON.stringify(entry))?.[1] ?? "?"),
      };
      view.onLost((error) => void record.lost.push(error.name));
      view.subscribe((state) => void record.ids.push(state.entries.map((entry) => entry.id)));
      globalThis.e2eView = record;
    }, conversationId);
    expect(await shownMarks(a)).toEqual(["a-1", "a-2"]);

    const b = await openTab("follower");
    await b.click("#takeover");
    await waitForRole(b, "leader");
    await waitForRole(a, "follower");
    expect((await harnessStatus(a)).kind).toBe("waiting-for-lock"); // its own worker queued again behind b
    await mark(b, conversationId, "b-1");
    await mark(b, conversationId, "b-2");
    await expect.poll(() => shownMarks(a), { timeout: 30_000 }).toEqual(["a-1", "a-2", "b-1", "b-2"]);

    await b.close(); // b lets go: a's worker opens the database again
    await waitForRole(a, "leader");
    expect((await harnessStatus(a)).kind).toBe("ready");
    await mark(a, conversationId, "a-3");
    await expect.poll(() => shownMarks(a), { timeout: 30_000 }).toEqual(["a-1", "a-2", "b-1", "b-2", "a-3"]);

    const ids = await lastIds(a);
    expect(ids).toEqual([...new Set(ids)].sort((x, y) => x - y));
    const fresh = await a.evaluate(async (id) => {
      const view = await pi.client.openConversation(id);
      const entries = view.state.entries.map((entry) => entry.id);
      view.close();
      return entries;
    }, conversationId);
    expect(ids).toEqual(fresh);
    expect(await a.evaluate(() => globalThis.e2eView!.lost)).toEqual([]);
  });
});
