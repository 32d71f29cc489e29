import { describe, expect, it } from "vitest";
import "./app/host-api.ts";
import { browserPerTest } from "./support/browser";

// The worker/page boundary in Chromium (e2e/app/harness-worker.ts serves a harness with serveHarness): errors
// arrive as the library's own classes, and every subscription can end, leaving the worker no listener.

const session = browserPerTest();

describe("errors cross the worker boundary as the library's classes", () => {
  it("instanceof ReadOnlySession, UnknownTaskKind and QueryNotReadOnly hold on the page, with name, message and fields", async () => {
    const page = await session.newPage();
    const seen = await page.evaluate(async () => {
      const { connect, errors } = window.hostE2e;
      const client = connect();
      await client.ready();
      const describe = (error: unknown) => ({
        name: (error as Error).name,
        message: (error as Error).message,
        durable: error instanceof errors.DurableError,
        error: error instanceof Error,
      });
      const readOnly = await client.call("resumeReadOnly").catch((error: unknown) => error);
      const unknownKind = await client.createTask("no.such.kind", {}).catch((error: unknown) => error);
      const write = await client.query("DELETE FROM tasks").catch((error: unknown) => error);
      return {
        readOnly: { ...describe(readOnly), is: readOnly instanceof errors.ReadOnlySession },
        unknownKind: {
          ...describe(unknownKind),
          is: unknownKind instanceof errors.UnknownTaskKind,
          kind: (unknownKind as { kind?: string }).kind,
        },
        write: { ...describe(write), is: write instanceof errors.QueryNotReadOnly },
      };
    });
    expect(seen.readOnly).toMatchObject({ is: true, durable: true, error: true, name: "ReadOnlySession" });
    expect(seen.readOnly.message).toContain("resume() is not allowed");
    expect(seen.unknownKind).toMatchObject({ is: true, durable: true, name: "UnknownTaskKind", kind: "no.such.kind" });
    expect(seen.unknownKind.message).toMatch(/Installed: .*example\.counter/);
    expect(seen.write).toMatchObject({ is: true, durable: true, name: "QueryNotReadOnly" });
  });

  it("crashPoints: false refuses armCrashPoint with CrashPointsOff on the page; on by default it stops there", async () => {
    const page = await session.newPage();
    const seen = await page.evaluate(async () => {
      const { connect, errors } = window.hostE2e;
      const off = connect({ crashPoints: false });
      await off.ready();
      const refused = await off.armCrashPoint("counter:after-tick-1").catch((error: unknown) => error);
      await off.close();
      const on = connect();
      await on.ready();
      const hit = on.armCrashPoint("counter:after-tick-1");
      const id = await on.createTask("example.counter", { to: 2 });
      return { refused: refused instanceof errors.CrashPointsOff, name: (refused as Error).name, hit: await hit, id };
    });
    expect(seen).toMatchObject({ refused: true, name: "CrashPointsOff", hit: { name: "counter:after-tick-1", taskId: seen.id } });
  });
});

describe("unsubscribe across the worker boundary", () => {
  it("after 1,000 subscribe/unsubscribe cycles of onReport, watchTasks and watchConversation the worker holds no listener of them", async () => {
    const page = await session.newPage();
    const counts = await page.evaluate(async () => {
      const client = window.hostE2e.connect();
      await client.ready();
      const conversation = await client.rootConversation();
      const baseline = await client.call<number>("listeners");
      const subscribe = () =>
        Promise.all([client.onReport(() => {}), client.watchTasks(() => {}), client.watchConversation(conversation, () => {})]);
      const held = await subscribe();
      const whileSubscribed = await client.call<number>("listeners");
      for (const stop of held) stop();
      for (let cycle = 0; cycle < 999; cycle += 1) for (const stop of await subscribe()) stop();
      // Unsubscribing is a message like any other: a call made after it is answered after it.
      const after = await client.call<number>("listeners");
      return { baseline, whileSubscribed, after };
    });
    expect(counts.whileSubscribed).toBe(counts.baseline + 3);
    expect(counts.after).toBe(counts.baseline);
  });

  it("an unsubscribed watchTasks listener is not called for later commits", async () => {
    const page = await session.newPage();
    const seen = await page.evaluate(async () => {
      const client = window.hostE2e.connect();
      await client.ready();
      let stopped = 0;
      let live = 0;
      const stop = await client.watchTasks(() => (stopped += 1));
      await client.watchTasks(() => (live += 1));
      stop();
      const before = stopped;
      await client.waitForTask(await client.createTask("example.counter", { to: 1 }));
      await new Promise((resolve) => setTimeout(resolve, 100)); // lets a (wrong) late push arrive
      return { before, stopped, live };
    });
    expect(seen.stopped).toBe(seen.before);
    expect(seen.live).toBeGreaterThan(0);
  });
});

describe("S4 at a real reload with 10,000 tasks running (decisions 0043, 0092)", () => {
  it("S4, S11: every reload counts each running task's restart once, in the seed's query, on OPFS, also a reload between the open's slices", async () => {
    const page = await session.newPage();
    const restarts = () =>
      page.evaluate(async () => {
        const client = window.hostE2e.connect();
        await client.ready();
        const rows = await client.query(
          "SELECT status, record ->> '$.restarts' AS restarts, count(*) AS n FROM tasks WHERE kind = 'example.stall' GROUP BY 1, 2",
        );
        return rows;
      });
    await page.evaluate(async () => {
      const client = window.hostE2e.connect();
      await client.ready();
      await client.call("stall", 10_000);
      // Wait until every one holds its invocation (stored running), then the reload cuts them all.
      for (;;) {
        const [row] = await client.query("SELECT count(*) AS n FROM tasks WHERE kind = 'example.stall' AND status = 'running'");
        if (row?.n === 10_000) break;
        await new Promise((resolve) => setTimeout(resolve, 100));
      }
    });
    // Decision 0092: the open counts the first slice and owes the rest, counted in slices after it (the owed row goes).
    const ready = (settled: boolean) =>
      page.evaluate(async (settled) => {
        const client = window.hostE2e.connect();
        await client.ready();
        for (let polls = 0; settled && polls < 600; polls++) {
          const [row] = await client.query("SELECT count(*) AS n FROM pi_durable_meta WHERE key = 'recount_owed'");
          if (row?.n === 0) return;
          await new Promise((resolve) => setTimeout(resolve, 50));
        }
      }, settled);
    for (const reload of [1, 2, 3]) {
      await page.reload();
      // Reload 2 is cut as soon as the open is ready, while restarts may still be owed: reload 3 counts them too.
      await ready(reload !== 2);
      if (reload === 2) continue;
      // The worker resumes on its own: each task is running again, its restart counted once per reload.
      expect(await restarts()).toEqual([{ status: "running", restarts: reload, n: 10_000 }]);
    }
  }, 180_000);
});
