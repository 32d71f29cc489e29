import type { Page } from "playwright-core";
import { describe, expect, it } from "vitest";
import type { SubmissionOutcome, ToolResultEntryPayload } from "../src/index.ts";
import "./app/host-api.ts";
import { browserPerTest } from "./support/browser";

// Page tools in Chromium (decision 0028): e2e/app/page-tools-worker.ts declares ask_unsafe and ask_safe, the
// page provides them. A reload while the page runs one is the tab's crash: its worker (and its claim) goes with
// it. Unsafe: the model gets an interrupted result and the page never runs it again; safe: the reloaded page
// runs it again and the model gets that answer.

declare global {
  // Test-side state kept in the page between evaluate calls.
  var e2eRuns: Array<{ tool: string; attempt: number }>;
  var e2eClient: import("../src/browser/client.ts").HarnessClient;
}

const session = browserPerTest();

/** Connects, provides both tools (`hang`: runs never finish, else each answers "green"); the conversation id. */
async function providing(page: Page, hang: boolean): Promise<number> {
  return page.evaluate(async (hangs) => {
    globalThis.e2eRuns = [];
    const client = window.hostE2e.connectPageTools();
    globalThis.e2eClient = client;
    await client.ready();
    const conversationId = await client.rootConversation({ model: "faux/faux-1" });
    const run = (tool: string) => (_args: unknown, call: { attempt: number }) => {
      globalThis.e2eRuns.push({ tool, attempt: call.attempt });
      return hangs ? new Promise<string>(() => {}) : "green";
    };
    await client.providePageTools(conversationId, { ask_unsafe: run("ask_unsafe"), ask_safe: run("ask_safe") });
    return conversationId;
  }, hang);
}

async function runs(page: Page): Promise<Array<{ tool: string; attempt: number }>> {
  return page.evaluate(() => globalThis.e2eRuns);
}

async function reloadMidRun(page: Page, input: string): Promise<number> {
  const conversationId = await providing(page, true);
  const submissionId = await page.evaluate(
    ({ id, content }) => globalThis.e2eClient.submit(id, { type: "input", content, requestId: `q-${content}` }),
    { id: conversationId, content: input },
  );
  await expect.poll(() => runs(page), { timeout: 20_000 }).toHaveLength(1);
  await page.reload(); // the tab's crash: its worker dies with it, mid-run
  await page.waitForSelector("body[data-ready]", { state: "attached" });
  return submissionId;
}

async function outcome(page: Page, submissionId: number): Promise<{ outcome: SubmissionOutcome; result: ToolResultEntryPayload }> {
  return page.evaluate(async (id) => {
    const client = globalThis.e2eClient;
    const settled = await client.waitForSubmission(id);
    const view = await client.openConversation(await client.rootConversation());
    const entry = view.state.entries.find((candidate) => candidate.kind === "pi.tool-result");
    view.close();
    return { outcome: settled, result: entry?.payload as unknown as ToolResultEntryPayload };
  }, submissionId);
}

const texts = (result: ToolResultEntryPayload) => result.message.content.map((item) => ("text" in item ? item.text : "")).join("");

describe("page tools across a reload (decision 0028, S8)", () => {
  it("§4c S8: an unsafe page tool interrupted by a reload: the model reads an interrupted result, the reloaded page never runs it", async () => {
    const page = await session.newPage();
    const submissionId = await reloadMidRun(page, "please ask unsafe");
    await providing(page, false);
    const { outcome: settled, result } = await outcome(page, submissionId);
    expect(settled).toMatchObject({ status: "done", answer: { text: expect.stringContaining("was interrupted while a page ran it") } });
    expect(result.code).toBe("interrupted");
    expect(texts(result)).toContain("Tool ask_unsafe was interrupted while a page ran it");
    expect(await runs(page)).toEqual([]);
    const late = await page.evaluate(
      async (id) => await globalThis.e2eClient.answerPageCall(id, "call-ask_unsafe", "x", "late").catch((error: Error) => error.name),
      await page.evaluate(() => globalThis.e2eClient.rootConversation()),
    );
    expect(late).toBe("PageCallEnded");
  });

  it("§4c S8: a safe page tool interrupted by a reload runs again in the reloaded page (attempt 2); the model reads its answer", async () => {
    const page = await session.newPage();
    const submissionId = await reloadMidRun(page, "please ask safe");
    await providing(page, false);
    const { outcome: settled, result } = await outcome(page, submissionId);
    expect(settled).toMatchObject({ status: "done", answer: { text: "the page said: green" } });
    expect(result.code).toBeUndefined();
    expect(texts(result)).toBe("green");
    expect(await runs(page)).toEqual([{ tool: "ask_safe", attempt: 2 }]);
  });
});
