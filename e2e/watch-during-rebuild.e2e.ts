import { describe, expect, it } from "vitest";
import { browserPerTest } from "./support/browser";
import { query, startTask } from "./support/demo";
import { edgePerTest } from "./support/edge";
import { openFollowing, recordTabPrints } from "./support/follow";

// Decision 0142 (0134's "Not done": only the take-back had an e2e). A conversation watch (`useChat`,
// `openConversation`) asked while the tab's copy is rebuilt from the object's snapshot (decisions 0047, 0053) starts on
// the copy still open — the browser's rebuild keeps it open until the snapshot is fetched (`closesCopy`) — and moves to
// the rebuilt copy when the host opens it. Before 0134 it waited for that reopen. The rebuild is held in the middle
// (the object loses every snapshot part after the first), so the order is exact: the watch is answered before the
// host's status says it opens again (`opening`), with no wall-clock bound.

const session = browserPerTest();
const edge = edgePerTest();

declare global {
  /** The page's statuses and the watch's answer, in the order the page saw them; each view it rendered (entry ids). */
  var e2eRebuildWatch: { events: string[]; views: number[][]; lost?: string } | undefined;
}

describe("a conversation watch during a rebuild from the object's snapshot (Chromium + workerd, decision 0142)", () => {
  it("S5: a watch asked while a forked tab's rebuild is held in the middle is answered on the open copy before the host opens again; released, it moves to the rebuilt copy — never lost, no entry twice", async () => {
    const name = "trimshort-watch-rebuild"; // a 3 s lease, the log's last 4 transactions kept
    const tabPrints = await recordTabPrints(session);
    const page = await openFollowing(session, edge, name);
    await page.waitForSelector('body[data-runs="here"]', { state: "attached" });
    // The watched conversation, with an entry (asked now: `rootConversation` waits for a reopen under way, a rebuild's).
    const conversationId = await page.evaluate(async () => {
      const id = await pi.client.rootConversation();
      await pi.client.submit(id, { type: "write", entry: { kind: "app.note", data: { text: "before the fork" } } });
      return id;
    });
    // Over 1 MB in the copy: the object's snapshot goes in several parts, so holding the parts holds the rebuild.
    for (const pad of ["a", "b"]) await startTask(page, "example.counter", { to: 1, everyMs: 10, pad: pad.repeat(600_000) });
    await expect
      .poll(async () => (await query(page, "SELECT COUNT(*) AS n FROM tasks WHERE status = 'terminal'"))[0]?.n, { timeout: 30_000 })
      .toBe(2);
    await startTask(page, "example.counter", { to: 120, everyMs: 200 });
    await expect.poll(() => tabPrints.includes("tick 3"), { timeout: 30_000 }).toBe(true);
    // Offline past the lease: the object takes over and counts on; the tab's copy forks.
    await session.context.setOffline(true);
    await edge.printed.until(
      (lines) => lines.filter((line) => line.startsWith("tick")).length >= 10,
      "the object's ticks after it took over",
    );
    await edge.arm(name, "hold-snapshot-parts");
    await session.context.setOffline(false);
    // Back online the fenced tab keeps its fork, opens read-only and rebuilds: held in the middle of the snapshot.
    await page.waitForSelector('body[data-forks="1"]', { state: "attached", timeout: 30_000 });
    await edge.printed.until((lines) => lines.includes("held snapshot part"), "the rebuild held in the middle");

    await page.evaluate((conversationId) => {
      const state: NonNullable<typeof globalThis.e2eRebuildWatch> = (globalThis.e2eRebuildWatch = { events: [], views: [] });
      pi.client.onStatus((status) => void state.events.push(status.kind));
      state.events.push("asked");
      const watched = pi.client.watchConversation(
        conversationId,
        (view) => void state.views.push(view.entries.map((entry) => entry.id)),
        (error) => void (state.lost = String(error)),
      );
      Promise.resolve(watched).then(
        () => void state.events.push("answered"),
        (error: unknown) => void (state.lost = String(error)),
      );
    }, conversationId);
    const state = () => page.evaluate(() => globalThis.e2eRebuildWatch!);
    const seen = async () => JSON.stringify({ ...(await state()), object: edge.printed.lines.filter((l) => !l.startsWith("tick")) });

    // Answered while the rebuild is held: before the host opens the rebuilt copy (its status `opening`). Before 0134 the
    // watch waited for that reopen, which comes only when the held fetch fails or is released.
    await expect
      .poll(async () => (await state()).events.some((event) => event === "answered" || event === "opening") || (await state()).lost, {
        timeout: 60_000,
        message: "the watch answered, or the host opened again",
      })
      .toBeTruthy();
    const held = await state();
    const after = held.events.slice(held.events.indexOf("asked"));
    expect(after.includes("answered") && !after.slice(0, after.indexOf("answered")).includes("opening"), await seen()).toBe(true);
    expect(held.lost, await seen()).toBeUndefined();
    expect(held.views.length, "the copy's view rendered").toBeGreaterThan(0);
    const viewsWhileHeld = held.views.length;

    // Released: the rebuild finishes, the host opens the rebuilt copy, and the watch moves there.
    await edge.arm(name, "none");
    const tail = async () => (await state()).events.slice((await state()).events.indexOf("answered"));
    await expect
      .poll(async () => (await tail()).includes("opening") && (await tail()).at(-1) === "ready", {
        timeout: 90_000,
        message: "the host opened the rebuilt copy",
      })
      .toBe(true);
    await page.waitForSelector('body[data-runs="elsewhere"]', { state: "attached", timeout: 30_000 });
    await expect
      .poll(async () => (await state()).views.length, { timeout: 30_000, message: "the watch rendered on the rebuilt copy" })
      .toBeGreaterThan(viewsWhileHeld);
    expect((await state()).lost, await seen()).toBeUndefined();
    for (const ids of (await state()).views) expect(ids, await seen()).toEqual([...new Set(ids)].sort((a, b) => a - b)); // no entry twice
    // The watch's last view is the rebuilt copy's: the same entries a fresh view of it shows.
    const fresh = await page.evaluate(async (conversationId) => {
      const view = await pi.client.openConversation(conversationId);
      const ids = view.state.entries.map((entry) => entry.id);
      view.close();
      return ids;
    }, conversationId);
    expect((await state()).views.at(-1), await seen()).toEqual(fresh);
    console.log(`watch during rebuild: ${await seen()}`);
  }, 240_000);
});
