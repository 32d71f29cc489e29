import type { Page } from "playwright-core";
import { describe, expect, it } from "vitest";
import type { Json } from "../src/index.ts";
import { ASK_PERSON } from "../worker/protocol.ts";
import { browserPerTest } from "./support/browser";
import { query, toolCard, waitForStatus } from "./support/demo";
import { edgePerTest } from "./support/edge";
import { openFollowing } from "./support/follow";

// Page tools while the object runs (issue 27 item 5, decision 0044), in real Chromium against a real workerd: the
// tab leaves, the object holds the lease and runs a turn that calls the demo's page tool `ask_person`; the demo page
// opened with `?follow=` follows the object read-only, shows the call's question on its card (claimed at the object
// over the worker's follow link) and the pick is the call's result, committed once by the object. A reload of the
// following tab while it asks is the crash of the page that runs it: the claim goes with its follow socket (unsafe:
// interrupted, once), and the reloaded tab answers the next call.

const session = browserPerTest();
const edge = edgePerTest();

/** `POST /rpc` of object `name` (no page: nothing here provides the page tool). */
async function rpc(name: string, method: string, ...args: Json[]): Promise<Json> {
  const url = `${edge.socketUrl(name).replace(/^ws/, "http")}/rpc`;
  const response = await fetch(url, {
    method: "POST",
    headers: { "content-type": "application/json" },
    body: JSON.stringify({ method, args }),
  });
  const body = (await response.json()) as { value?: Json; error?: Json };
  if (!response.ok) throw new Error(`${method}: ${JSON.stringify(body.error)}`);
  return body.value ?? null;
}

/** The ask_person results in the object's own harness, in order: `[text, code]`. */
async function objectResults(name: string, conversationId: number): Promise<Array<[string, string | null]>> {
  const page = (await rpc(name, "conversationEntries", conversationId, Number.MAX_SAFE_INTEGER, 200)) as {
    entries: Array<{ kind: string; payload: { message: { toolName: string; content: Array<{ text?: string }> }; code?: string } }>;
  };
  return page.entries
    .filter((entry) => entry.kind === "pi.tool-result" && entry.payload.message.toolName === ASK_PERSON.tool)
    .map((entry) => [entry.payload.message.content[0]?.text ?? "", entry.payload.code ?? null]);
}

/** The ask_person results in the tab's copy: the same rows once the object's commits arrived. */
async function copyResults(page: Page): Promise<string[]> {
  const rows = await query(
    page,
    "SELECT record ->> '$.payload.message.content[0].text' AS text FROM entries WHERE kind = 'pi.tool-result' AND record ->> '$.payload.message.toolName' = ? ORDER BY id",
    ASK_PERSON.tool,
  );
  return rows.map((row) => String(row.text));
}

async function asks(page: Page): Promise<number> {
  return toolCard(page, ASK_PERSON.tool).locator(".ask").count();
}

describe("page tools while the object runs (Chromium + workerd)", () => {
  it("§4c S8: a tab that follows the running object answers its page call once; a reload while it asks ends that call interrupted, once, and the reloaded tab answers the next", async () => {
    const name = "follow-page-tools";
    // The tab runs first, then leaves: the object takes the lease and runs what comes next.
    const first = await openFollowing(session, edge, name);
    await first.waitForSelector('body[data-runs="here"]', { state: "attached" });
    await first.close();
    await expect
      .poll(async () => ((await rpc(name, "status").catch(() => null)) as { runs?: string } | null)?.runs, { timeout: 30_000 })
      .toBe("here");
    const conversationId = Number(await rpc(name, "rootConversation"));

    // The tab comes back: read-only, following the object.
    const page = await openFollowing(session, edge, name);
    await page.waitForSelector('body[data-runs="elsewhere"]', { state: "attached" });
    const asked = Number(await rpc(name, "submit", conversationId, { type: "input", content: ASK_PERSON.input, requestId: "first" }));
    // The following tab claimed the call at the object and asks the question on its card.
    await toolCard(page, ASK_PERSON.tool).locator(".ask").waitFor({ timeout: 30_000 });
    expect(await toolCard(page, ASK_PERSON.tool).locator(".ask-question").textContent()).toBe(ASK_PERSON.question);

    // Reloaded while it asks: its follow socket closes with its worker, the object releases the claim.
    await session.reload(page);
    await waitForStatus(page, "ready");
    await page.waitForSelector('body[data-runs="elsewhere"]', { state: "attached" });
    expect(await rpc(name, "waitForSubmission", asked)).toMatchObject({ status: "done" });
    expect(await objectResults(name, conversationId)).toEqual([[expect.stringContaining("interrupted"), "interrupted"]]);
    await expect.poll(() => copyResults(page), { timeout: 30_000 }).toHaveLength(1);
    expect(await asks(page)).toBe(0); // never asked again

    // The next call: the reloaded tab asks and the pick is its one result.
    const again = Number(await rpc(name, "submit", conversationId, { type: "input", content: ASK_PERSON.input, requestId: "second" }));
    const card = toolCard(page, ASK_PERSON.tool);
    await card.locator(".ask").waitFor({ timeout: 30_000 });
    await card.locator('.ask-choice[data-choice="red"]').click();
    expect(await rpc(name, "waitForSubmission", again)).toMatchObject({ status: "done" });
    const results = await objectResults(name, conversationId);
    expect(results).toHaveLength(2);
    expect(results[1]).toEqual(["red", null]);
    await expect.poll(() => copyResults(page), { timeout: 30_000 }).toEqual([results[0]![0], "red"]);
    await expect.poll(() => asks(page)).toBe(0);
  });
});
