import { describe, expect, it } from "vitest";
import { silentTab } from "./leave-early-copy-support.ts";
import { flush, settled } from "./support.ts";

// Decision 0127 (issue 27's remaining seam after 0125): every page call waited for a reopen under way (`whenOpen`).
// runHere's take-back (a link call bounded at 15 s, then the follower's whenHolds) and a rebuild (its snapshot's link
// calls) held every read although the read-only copy that could answer them was open. Reads now answer from the copy
// open; writes wait for the reopen as decision 0053 says.

/** Every read the page has, asked of the copy with the task's id and the root conversation's. */
function askReads(service: Awaited<ReturnType<typeof silentTab>>["host"]["service"], taskId: number, conversationId: number) {
  return {
    query: settled(service.query("SELECT count(*) AS n FROM tasks"), "ok"),
    listConversations: settled(service.listConversations(), "ok"),
    getTask: settled(service.getTask(taskId), "ok"),
    conversationEntries: settled(service.conversationEntries(conversationId, 1_000_000, 10), "ok"),
    pendingApprovals: settled(service.pendingApprovals(conversationId), "ok"),
    inspect: settled(service.inspect(), "ok"),
    forks: settled(service.forks(), "ok"),
    exportDatabase: settled(service.exportDatabase(), "ok"),
  };
}

function outcomes(asked: Record<string, { outcome?: string }>) {
  return Object.fromEntries(Object.entries(asked).map(([name, state]) => [name, state.outcome]));
}

/** A tab whose leave the object took (link delivering): its copy follows the object, read-only. */
async function followingTab(hooks: Parameters<typeof silentTab>[0] = {}) {
  const t = await silentTab(hooks);
  expect(await t.pagehide()).toBe("taken");
  for (let i = 0; i < 8; i++) await t.step(250);
  await expect.poll(() => t.host.service.status()).toMatchObject({ kind: "ready", runs: "elsewhere" });
  const taskId = (await t.host.service.query("SELECT id FROM tasks"))[0]!.id as number;
  const conversationId = (await t.host.service.listConversations())[0]!.id;
  return { ...t, taskId, conversationId };
}

const ALL_OK = {
  query: "ok",
  listConversations: "ok",
  getTask: "ok",
  conversationEntries: "ok",
  pendingApprovals: "ok",
  inspect: "ok",
  forks: "ok",
  exportDatabase: "ok",
};

describe("reads answer from the open copy while the host switches it (decision 0127)", () => {
  it("S5: runHere() over a link gone silent: every read answers from the read-only copy while writes wait for the take-back, which ends at the link's bound", async () => {
    const t = await followingTab();
    const s = t.host.service;
    t.silence(); // the handBack call is lost
    const runHere = settled(s.runHere(), "ok");
    await flush(8);
    const write = settled(s.createConversation(), "ok");
    const asked = askReads(s, t.taskId, t.conversationId);
    await flush(16);
    // Before: every read waited for the take-back (the reopen queue), unanswered until the call's 15 s timeout.
    expect(outcomes(asked)).toEqual(ALL_OK);
    expect(runHere.outcome).toBeUndefined();
    expect(write.outcome).toBeUndefined(); // a write waits for the reopen (decision 0053)
    const rows = await t.storage.query("SELECT count(*) AS n FROM tasks");
    expect(await s.query("SELECT count(*) AS n FROM tasks")).toEqual(rows);
    // The link's bound: the take-back fails, the copy stays read-only, and the write is answered (refused: no lease).
    for (let i = 0; i < 20 && runHere.outcome === undefined; i++) await t.step(1_000);
    expect(runHere.outcome).toBeDefined();
    expect(runHere.outcome).not.toBe("ok");
    await expect.poll(() => write.outcome).toBeDefined();
    expect(s.status()).toMatchObject({ kind: "ready", runs: "elsewhere" });
    t.restore();
    await t.close();
  });

  it("S5: runHere() that takes the lease back: reads asked through the take-back and the writable open all answer, none HarnessClosed, then the harness runs here", async () => {
    const t = await followingTab();
    const s = t.host.service;
    const runHere = settled(s.runHere(), "ok");
    const asked: Array<Record<string, { outcome?: string; error?: unknown }>> = [];
    for (let i = 0; i < 40 && runHere.outcome === undefined; i++) {
      asked.push(askReads(s, t.taskId, t.conversationId));
      await flush(1);
      if (i % 4 === 3) await t.step(50);
    }
    expect(runHere.outcome).toBe("ok");
    await flush(16);
    for (const reads of asked) expect(outcomes(reads)).toEqual(ALL_OK);
    expect(s.status()).toMatchObject({ kind: "ready", runs: "here" });
    await t.close();
  });

  it("S5: a rebuild over a link gone silent: every read answers from the copy while the snapshot is asked, writes wait, and the rebuild ends at the link's bound", async () => {
    let rebuild: (() => void) | undefined;
    const t = await followingTab({ rebuildAsked: (listener) => void (rebuild = listener) });
    const s = t.host.service;
    const statuses: string[] = [];
    s.onStatus((status) => void statuses.push(status.kind));
    t.silence(); // the snapshot's call is lost
    rebuild!();
    await flush(8);
    const write = settled(s.createConversation(), "ok");
    const asked = askReads(s, t.taskId, t.conversationId);
    await flush(16);
    // Before: the copy was closed before the snapshot was asked, and every read waited for the call's 15 s timeout.
    expect(outcomes(asked)).toEqual(ALL_OK);
    expect(write.outcome).toBeUndefined();
    expect(statuses).toEqual(["ready"]); // the copy is not closed yet
    // The snapshot's call times out (15 s): the copy, unchanged, is opened again read-only (no lease asked) and the
    // write is answered there (refused: no lease).
    for (let i = 0; i < 20 && write.outcome === undefined; i++) await t.step(1_000);
    expect(write.outcome).toBeDefined();
    expect(statuses).toEqual(["ready", "opening", "recovering", "ready"]); // one open, read-only
    expect(s.status()).toMatchObject({ kind: "ready", runs: "elsewhere" });
    const after = askReads(s, t.taskId, t.conversationId);
    await flush(16);
    expect(outcomes(after)).toEqual(ALL_OK);
    t.restore();
    await t.close();
  });

  it("S5: rootConversation() with nothing to configure is a read: asked during a rebuild over a silent link it answers the root's id from the copy at once (before: only at the link's 15 s bound); with an agent it may write and waits (0147)", async () => {
    let rebuild: (() => void) | undefined;
    const t = await followingTab({ rebuildAsked: (listener) => void (rebuild = listener) });
    const s = t.host.service;
    const root = await s.rootConversation();
    t.silence(); // the snapshot's call is lost
    rebuild!();
    await flush(8);
    const asked = settled(s.rootConversation(), "ok");
    const configuring = settled(s.rootConversation({ instructions: "be brief" }), "ok");
    await flush(16);
    expect(asked.outcome).toBe("ok");
    expect(await s.rootConversation()).toBe(root);
    expect(configuring.outcome).toBeUndefined(); // a write waits for the reopen (decision 0053)
    for (let i = 0; i < 20 && configuring.outcome === undefined; i++) await t.step(1_000);
    expect(configuring.outcome).toBeDefined();
    t.restore();
    await t.close();
  });
});
