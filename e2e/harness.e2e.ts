import type { Page } from "playwright-core";
import { describe, expect, it } from "vitest";
import { SEED_QUERY } from "../examples/counter-task.ts";
import type { TaskRecord } from "../src/storage/records.ts";
import { crashTab, harnessStatus, waitForReady, waitForTask } from "../src/testing/playwright.ts";
import "./app/api.ts";
import { browserPerTest } from "./support/browser";
import {
  armCrashPoint,
  crashPointHit,
  DEMO_DATABASE,
  openDemo,
  press,
  query,
  shownTranscript,
  startTask,
  taskRows,
  ticks,
  waitForLine,
  waitForShownTask,
  waitForStatus,
} from "./support/demo";

// The demo app's production build (web/ + worker/) in real Chromium on real (on-disk) OPFS. A reload, a
// terminated worker and a renderer crash are the crashes (the README's durability contract); assertions are on what the page
// shows and on the database through the client's read-only SQL. Each test cites the seed rule it proves.

const session = browserPerTest();

/** The seed's table row of a task (S11), with `memos` parsed. */
async function seedRow(page: Page, id: number) {
  const row = (await query(page, SEED_QUERY)).find((row) => row.id === id);
  return row && { ...row, memos: row.memos === null ? null : JSON.parse(String(row.memos)) };
}

/**
 * Starts the worker's scheduling on a page opened `?paused`, and only that: the page stays paused, so the
 * next crash opens paused again (the page's Resume button leaves paused mode and drops `?paused`).
 */
async function resumeWork(page: Page): Promise<void> {
  await page.evaluate(() => pi.client.resume());
}

/** Starts Example 12 (and resumes, for a page opened `?paused`); the worker stops right after printing `tick <n>`. */
async function runCounterUntilCrashPoint(page: Page, n: number) {
  await armCrashPoint(page, `counter:after-tick-${n}`);
  await press(page, "#counter");
  await resumeWork(page);
  const hit = await crashPointHit(page);
  await waitForLine(page, `tick ${n}`);
  return hit;
}

describe("Example 12 and the restart limit in the page", () => {
  it("S12: a reload right after tick 2 goes on with tick 3, 4, 5 and counted to 5, never tick 2 again", async () => {
    let page = await openDemo(session, "?paused");
    await waitForReady(page);
    const hit = await runCounterUntilCrashPoint(page, 2);
    expect(hit).toMatchObject({ name: "counter:after-tick-2", taskKind: "example.counter" });

    page = await crashTab(page, "reload"); // the crash: printed `tick 2`, next step not stored
    await waitForReady(page);
    // A look before anything runs again (the page opened `?paused`): the seed's query, unchanged.
    expect(await seedRow(page, hit.taskId)).toEqual({
      id: hit.taskId,
      status: "pending",
      n: 2,
      memos: { "printed-1": true, "printed-2": true },
      restarts: 1,
    });
    expect(await page.textContent("#status")).toBe(`ready (recovered task #${hit.taskId})`);
    expect(await waitForShownTask(page, `#${hit.taskId} `)).toContain("restarts 1");

    await resumeWork(page);
    expect(await waitForShownTask(page, "counted to 5")).toBe(`#${hit.taskId} example.counter: terminal completed: "counted to 5"`);
    expect(await shownTranscript(page)).toEqual(ticks(1, 5));
    // At the end: terminal, memos dropped, no restarts.
    expect(await seedRow(page, hit.taskId)).toEqual({ id: hit.taskId, status: "terminal", n: null, memos: null, restarts: null });
  });

  it("S6: five reloads in a row inside demo.stall without progress fault the task with restart_limit", async () => {
    let page = await openDemo(session);
    await waitForReady(page);
    await startTask(page, "demo.stall", {});
    for (let run = 1; run <= 5; run += 1) {
      await waitForLine(page, `stall: run ${run}`); // the phase is running: this reload counts
      page = await crashTab(page, "reload");
    }

    const report = page.locator('#reports li[data-kind="task_faulted"] .report-json');
    await report.waitFor({ state: "attached", timeout: 30_000 });
    const [task] = await taskRows(page);
    expect(JSON.parse((await report.textContent()) ?? "")).toMatchObject({
      kind: "task_faulted",
      taskId: task!.id,
      taskKind: "demo.stall",
      reason: "restart_limit",
      detail: { reason: "restart_limit", restarts: 5 },
    });
    expect(task).toMatchObject({ kind: "demo.stall", status: "terminal" });
    expect(task!.record.state).toMatchObject({
      status: "terminal",
      outcome: { status: "faulted", error: { detail: { reason: "restart_limit", restarts: 5 } } },
    });
    expect(task!.record.restarts).toBeUndefined();
    expect(await waitForShownTask(page, "demo.stall")).toContain("terminal faulted: ");
    // The phase was not run a sixth time.
    expect(await shownTranscript(page)).toEqual([1, 2, 3, 4, 5].map((run) => `stall: run ${run}`));
  });
});

describe("crashes other than a reload, and a clean close", () => {
  it("S4: a terminated worker recovers like a reload (restart counted, work continues, nothing printed twice)", async () => {
    const page = await openDemo(session, "?paused");
    await waitForReady(page);
    const hit = await runCounterUntilCrashPoint(page, 2);
    const pending = page.evaluate(
      (id) =>
        pi.client.waitForTask(id).then(
          () => "settled",
          (error: Error) => error.name,
        ),
      hit.taskId,
    );

    // Crash 1: the worker dies by itself (the page cannot tell); the page's crash control starts a new one.
    await crashTab(page, "terminate-worker");
    await press(page, "#restart-worker");
    expect(await pending).toBe("WorkerGone");
    await waitForStatus(page, "ready"); // the page's status is the new worker's from the click on
    expect(await seedRow(page, hit.taskId)).toMatchObject({ status: "pending", n: 2, restarts: 1 });
    expect(await page.textContent("#status")).toBe(`ready (recovered task #${hit.taskId})`);

    // Crash 2: worker.terminate() on a live worker stopped right after tick 3.
    await armCrashPoint(page, "counter:after-tick-3");
    await resumeWork(page);
    await crashPointHit(page);
    await waitForLine(page, "tick 3");
    await press(page, "#restart-worker");
    await waitForStatus(page, "ready");
    expect(await seedRow(page, hit.taskId)).toMatchObject({ status: "pending", n: 3, memos: { "printed-3": true }, restarts: 1 });

    await resumeWork(page);
    const done = await waitForTask(page, (task) => task.id === hit.taskId && task.state.status === "terminal");
    expect(done.state).toEqual({ status: "terminal", outcome: { status: "completed", result: "counted to 5" } });
    await waitForShownTask(page, "counted to 5");
    expect(await shownTranscript(page)).toEqual(ticks(1, 5));
  });

  it("S4: a renderer crash (CDP Page.crash) recovers like a reload", async () => {
    let page = await openDemo(session, "?paused");
    await waitForReady(page);
    const hit = await runCounterUntilCrashPoint(page, 2);

    page = session.track(await crashTab(page, "renderer"));
    await waitForReady(page);
    expect(await seedRow(page, hit.taskId)).toMatchObject({ status: "pending", n: 2, restarts: 1 });

    await resumeWork(page);
    await waitForShownTask(page, "counted to 5");
    expect(await shownTranscript(page)).toEqual(ticks(1, 5));
  });

  it("S4: a clean close() and reopen counts no restart; a crash afterwards does", async () => {
    let page = await openDemo(session);
    await waitForReady(page);
    await startTask(page, "demo.stall", {});
    await waitForLine(page, "stall: run 1");

    await press(page, "#close");
    await waitForStatus(page, "closed");
    expect(await page.textContent("#status")).toBe("closed (close)");

    await page.goto(`${page.url()}?paused`); // reopen, looking first
    await waitForReady(page);
    expect(await harnessStatus(page)).toMatchObject({ kind: "ready", recovered: [] });
    const [task] = await taskRows(page);
    expect(task).toMatchObject({ kind: "demo.stall", status: "pending" });
    expect(task!.record.restarts).toBeUndefined();

    await resumeWork(page);
    await expect.poll(async () => (await shownTranscript(page)).length, { timeout: 20_000 }).toBe(2);
    expect(await shownTranscript(page)).toEqual(["stall: run 1", "stall: run 1"]); // not "run 2": no restart counted

    page = await crashTab(page, "reload"); // still `?paused`
    await waitForReady(page);
    expect((await taskRows(page))[0]!.record.restarts).toBe(1);
    await resumeWork(page);
    await expect.poll(async () => (await shownTranscript(page)).length, { timeout: 20_000 }).toBe(3);
    expect(await shownTranscript(page)).toEqual(["stall: run 1", "stall: run 1", "stall: run 2"]);
  });
});

describe("one owner per database", () => {
  it("S4/§4: a second tab follows the first (and says so) while the first lives, then takes over when the first closes", async () => {
    const first = await openDemo(session);
    await waitForReady(first);
    const second = await openDemo(session);
    // Its worker waits for the database; the page works through the first tab's worker meanwhile.
    await second.waitForSelector('body[data-status="ready"][data-role="follower"]', { state: "attached" });
    expect(await second.textContent("#follower-banner-text")).toContain("this tab works through it");
    expect(await second.isEnabled("#takeover")).toBe(true);
    await second.evaluate(() => {
      (globalThis as { seen?: string[] }).seen = [];
      pi.client.onStatus((status) => (globalThis as unknown as { seen: string[] }).seen.push(status.kind));
    });

    // The first tab works while the second follows; it stops right after tick 3 and then goes away.
    const hit = await runCounterUntilCrashPoint(first, 3);
    // One database lock held (the first tab's worker), the second tab's request for the same lock pending.
    // (Each worker also holds a life lock of its own, which its page queues for: that is how a page learns
    // its worker died; a follower's page holds one the leader's worker queues for; and each worker holds the tabs'
    // leader mark named after its id, decision 0141.)
    const all = await first.evaluate(() => navigator.locks.query());
    const isDatabaseLock = (lock: { name?: string }) =>
      !lock.name?.startsWith("pi-durable-web:worker-life:") &&
      !lock.name?.startsWith("pi-durable-web:tab:") &&
      !lock.name?.startsWith("pi-durable-web:tabs:");
    const held = (all.held ?? []).filter(isDatabaseLock);
    expect(held).toHaveLength(1);
    expect((all.pending ?? []).filter(isDatabaseLock).map((lock) => lock.name)).toEqual([held[0]!.name]);
    expect(await second.evaluate(() => (globalThis as unknown as { seen: string[] }).seen)).toEqual(["ready"]);
    await first.close(); // a closed tab is a crash for the task it was running

    await second.waitForSelector('body[data-status="ready"][data-role="leader"]', { state: "attached" });
    // (It may say "waiting-for-lock" for a moment: between the leader's death and its own worker's open.)
    const seen = await second.evaluate(() => (globalThis as unknown as { seen: string[] }).seen);
    expect(seen.filter((kind) => kind !== "waiting-for-lock")).toEqual(["ready", "opening", "recovering", "ready"]);
    expect(await second.textContent("#status")).toBe(`ready (recovered task #${hit.taskId})`);
    await waitForShownTask(second, "counted to 5");
    expect(await shownTranscript(second)).toEqual(ticks(1, 5));
    expect((await taskRows(second)).map((task) => [task.kind, task.status])).toEqual([["example.counter", "terminal"]]);
  });

  it("§4: 'take over here' closes the owner cleanly, opens the database in the asking tab, and the old owner follows; nothing lost or duplicated", async () => {
    const first = await openDemo(session);
    await waitForReady(first);
    await startTask(first, "demo.stall", {}); // never finishes: the takeover surely happens mid-work
    await waitForLine(first, "stall: run 1");
    // Example 12 stopped at a crash point: a clean close must end the stop, not wait for it forever.
    await runCounterUntilCrashPoint(first, 3);

    const second = await openDemo(session);
    await second.waitForSelector('body[data-status="ready"][data-role="follower"]', { state: "attached" });
    await second.click("#takeover");
    await second.waitForSelector('body[data-status="ready"][data-role="leader"]', { state: "attached" });
    await first.waitForSelector('body[data-status="ready"][data-role="follower"]', { state: "attached" });
    expect(await harnessStatus(second)).toMatchObject({ kind: "ready", recovered: [] }); // a handover, not a crash

    await waitForShownTask(second, "counted to 5");
    const lines = await shownTranscript(second);
    // The stall phase ran once per owner without a restart counted; every tick exactly once, in order.
    expect(lines.filter((line) => line.startsWith("stall"))).toEqual(["stall: run 1", "stall: run 1"]);
    expect(lines.filter((line) => line.startsWith("tick"))).toEqual(ticks(1, 5));
    const rows = await taskRows(second);
    expect(rows.map((task) => [task.kind, task.status, task.record.restarts])).toEqual([
      ["demo.stall", "running", undefined],
      ["example.counter", "terminal", undefined],
    ]);
  });
});

describe("committed data and bad input", () => {
  it("S4/§4: committed task creations survive a reload, the uncommitted ones leave no trace; integrity_check is ok", async () => {
    let page = await openDemo(session, "?paused"); // nothing runs: rows stay as created
    await waitForReady(page);
    const PAD = 100_000;
    await page.evaluate((pad) => {
      const state: { sent: number; acked: Array<[number, number]> } = { sent: 0, acked: [] };
      (globalThis as { e2eCreations?: typeof state }).e2eCreations = state;
      const input = (seq: number) => ({ to: 5, seq, pad: "x".repeat(pad) });
      // Keep several creations queued on the worker's commit line, so the reload cuts some of them.
      const createOne = (): void => {
        const seq = state.sent++;
        pi.client.createTask("example.counter", input(seq)).then(
          (id) => {
            state.acked.push([seq, id]);
            createOne();
          },
          () => {},
        );
      };
      for (let lane = 0; lane < 8; lane += 1) createOne();
    }, PAD);
    const acknowledged = () =>
      page.evaluate(() => (globalThis as unknown as { e2eCreations: { acked: Array<[number, number]> } }).e2eCreations.acked);
    await expect.poll(async () => (await acknowledged()).length, { timeout: 20_000 }).toBeGreaterThanOrEqual(40);
    const acked = await acknowledged();
    page = await crashTab(page, "reload");
    await waitForReady(page);

    // Each record carries its 100 KB pad; the rows together are more than a page query may return (4 MiB by
    // default), so the records come without it and the pad's length beside them.
    const rows = (
      await query(
        page,
        "SELECT id, kind, status, json_remove(record, '$.input.pad') AS record, length(record ->> '$.input.pad') AS pad FROM tasks ORDER BY id",
      )
    ).map((row) => ({
      id: Number(row.id),
      status: String(row.status),
      pad: Number(row.pad),
      record: JSON.parse(String(row.record)) as TaskRecord,
    }));
    const seqs = rows.map((row) => (row.record.input as { seq: number }).seq);
    // Commits land in order, so what survived is a prefix of what was sent: no holes, nothing twice.
    expect(seqs).toEqual(Array.from({ length: rows.length }, (_, index) => index));
    for (const [seq, id] of acked) expect(rows[seq]?.id).toBe(id);
    for (const row of rows) {
      expect(row.record).toMatchObject({
        id: row.id,
        kind: "example.counter",
        state: { status: "pending", checkpoint: { phase: "tick", n: 1 } },
      });
      expect(row.status).toBe("pending");
      expect(row.pad).toBe(PAD);
    }
    expect(await query(page, "PRAGMA integrity_check")).toEqual([{ integrity_check: "ok" }]);
    // Ids are not reused after the crash.
    const next = await page.evaluate(() => pi.client.createTask("example.counter", { to: 1 }));
    expect(next).toBeGreaterThan(Math.max(...rows.map((row) => row.id)));
    console.log(`creations: ${acked.length} acknowledged before the reload, ${rows.length} found after it`);
  });

  it("bad input: an unknown task kind comes back to the page as UnknownTaskKind and creates nothing", async () => {
    const page = await openDemo(session);
    await waitForReady(page);
    await startTask(page, "nope", { to: 1 });
    const shown = page.locator('#errors li[data-name="UnknownTaskKind"] .error-text');
    await shown.waitFor({ state: "attached" });
    expect(await shown.textContent()).toMatch(
      /^UnknownTaskKind: No task kind "nope" is installed in the worker\. Installed: .*example\.counter/,
    );

    const caught = await page.evaluate(() =>
      pi.client.createTask("nope", {}).then(
        () => undefined,
        (error: Error) => ({ name: error.name, message: error.message, isError: error instanceof Error }),
      ),
    );
    expect(caught).toMatchObject({ name: "UnknownTaskKind", message: expect.stringContaining('"nope"'), isError: true });
    expect(await query(page, "SELECT count(*) AS n FROM tasks")).toEqual([{ n: 0 }]);
    expect(await page.getAttribute("body", "data-status")).toBe("ready");
  });

  it("§4: a damaged database file fails with DatabaseCorrupt on the page and is neither deleted nor replaced", async () => {
    let demo = await openDemo(session);
    await waitForReady(demo);
    await press(demo, "#counter");
    await waitForShownTask(demo, "counted to 5");
    await press(demo, "#close"); // releases the pool's files for the test page below
    await waitForStatus(demo, "closed");
    await demo.close();

    // Damage the file through a test-only page on the same origin (raw pool access, importDb).
    const tool = await session.newPage();
    const damaged = await tool.evaluate((path) => window.e2e.api.damage(path), DEMO_DATABASE);
    await tool.close();

    for (const attempt of ["open", "reload"]) {
      if (attempt === "open") demo = await openDemo(session);
      else await session.reload(demo);
      await waitForStatus(demo, "failed");
      const status = (await demo.textContent("#status")) ?? "";
      expect(status, attempt).toMatch(/^failed: DatabaseCorrupt: /);
      expect(status, attempt).toContain(`"${DEMO_DATABASE}" in the OPFS pool`);
      expect(status, attempt).toContain("left exactly as found");
    }
    await demo.close();

    const inspector = await session.newPage();
    expect(await inspector.evaluate(() => window.e2e.api.poolFiles())).toContain(DEMO_DATABASE);
    expect(await inspector.evaluate((path) => window.e2e.api.poolFileDigest(path), DEMO_DATABASE)).toEqual(damaged);
  });
});
