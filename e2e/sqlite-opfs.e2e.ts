import type { Page } from "playwright-core";
import { describe, expect, it } from "vitest";
import type { OpenOptions } from "./app/api.ts";
import { browserPerTest } from "./support/browser";

// The opfs-sahpool backend of src/storage/sqlite/wasm.ts in real Chromium on real (on-disk) OPFS, with
// the page reload, worker.terminate() and a damaged file as the events that matter (docs/decisions/0001).

const DB_PATH = "/pi-durable.sqlite3";

const session = browserPerTest();

/** Opens the database in the page's worker; an open error comes back as `{ name, message }`. */
async function openDatabase(page: Page, options: OpenOptions = {}) {
  return page.evaluate(async (options) => {
    try {
      return { ok: true as const, info: await window.e2e.api.open(options) };
    } catch (error) {
      const { name, message } = error as Error;
      return { ok: false as const, name, message };
    }
  }, options);
}

async function openOk(page: Page, options: OpenOptions = {}) {
  const result = await openDatabase(page, options);
  if (!result.ok) throw new Error(`open failed: ${result.name}: ${result.message}`);
  return result.info;
}

describe("opfs-sahpool database in Chromium", () => {
  it("S11: the storage conformance cases pass on SqliteStorage over OPFS (the same cases as MemoryStorage and SQLite in memory)", async () => {
    const page = await session.newPage();
    const results = await page.evaluate(() => window.e2e.api.conformance());
    expect(results.length).toBeGreaterThanOrEqual(6);
    expect(results.filter((result) => result.error !== undefined)).toEqual([]);
  });

  it("keeps every committed row across a reload in the middle of writing; integrity_check is ok", async () => {
    const page = await session.newPage();
    const info = await openOk(page);
    expect(info).toMatchObject({ journalMode: "wal", lockingMode: "exclusive" });
    expect(await page.evaluate(() => window.e2e.api.insert(300, 200))).toBe(300);

    await page.evaluate(() => window.e2e.api.startWriting());
    await expect.poll(() => page.evaluate(() => window.e2e.api.written()), { timeout: 20_000 }).toBeGreaterThanOrEqual(50);
    const acknowledged = await page.evaluate(() => window.e2e.api.written());
    await session.reload(page); // the crash: nothing is closed, the loop is mid-transaction

    const reopened = await openOk(page);
    const stats = await page.evaluate(() => window.e2e.api.stats());
    // Every commit the page saw is there; a few more may have landed between the last look and the reload.
    expect(stats.count).toBeGreaterThanOrEqual(300 + acknowledged);
    expect(stats.count).toBeLessThan(300 + acknowledged + 1000);
    expect([stats.minId, stats.maxId]).toEqual([1, stats.count]); // no holes, no half-written row
    expect(await page.evaluate(() => window.e2e.api.integrityCheck())).toEqual(["ok"]);
    // The WAL image export is the committed state (frames not yet checkpointed included).
    expect(await page.evaluate(() => window.e2e.api.exportAndCount())).toMatchObject({ count: stats.count, header: "SQLite format 3" });
    console.log(
      `reload: ${acknowledged} acknowledged loop commits, ${stats.count - 300} found; reopen took ${reopened.openMs.toFixed(0)} ms`,
    );
  });

  it("holds the automatic checkpoint while asked (decision 0033): the log keeps every frame, then checkpoints again once released", async () => {
    const page = await session.newPage();
    await openOk(page);
    await page.evaluate(() => window.e2e.api.holdCheckpoints());
    // 200 transactions of a 40 kB row (overflow pages): far past wal_autocheckpoint's 1,000 frames.
    await page.evaluate(() => window.e2e.api.insert(200, 40_000));
    const held = await page.evaluate(async () => {
      const start = performance.now();
      const frames = await window.e2e.api.walFrames(); // PASSIVE: checkpoints every held frame
      return { frames, ms: performance.now() - start };
    });
    expect(held.frames).toBeGreaterThan(1000);
    console.log(`checkpoint of ${held.frames} held frames: ${held.ms.toFixed(1)} ms (the piece a hold moves past the first step)`);
    await page.evaluate(() => window.e2e.api.releaseCheckpoints());
    await page.evaluate(() => window.e2e.api.insert(50, 40_000));
    expect(await page.evaluate(() => window.e2e.api.walFrames())).toBeLessThan(1000);
    expect(await page.evaluate(() => window.e2e.api.stats())).toMatchObject({ count: 250 });
    expect(await page.evaluate(() => window.e2e.api.integrityCheck())).toEqual(["ok"]);
  });

  it("leaves no trace of a transaction that was open (and spilling pages) when the page reloaded", async () => {
    const page = await session.newPage();
    await openOk(page);
    await page.evaluate(() => window.e2e.api.insert(2000, 200));
    const walBefore = await page.evaluate((path) => window.e2e.api.poolFileDigest(`${path}-wal`), DB_PATH);

    await page.evaluate(() => window.e2e.api.holdOpenTransaction(500));
    const walDuring = await page.evaluate((path) => window.e2e.api.poolFileDigest(`${path}-wal`), DB_PATH);
    expect(walDuring.sha256).not.toBe(walBefore.sha256); // uncommitted pages really reached the file
    await session.reload(page);

    await openOk(page);
    expect(await page.evaluate(() => window.e2e.api.stats())).toEqual({ count: 2000, minId: 1, maxId: 2000, uncommitted: 0 });
    expect(await page.evaluate(() => window.e2e.api.integrityCheck())).toEqual(["ok"]);
  });

  it("0088/S5: a read-only open of a file whose task rows are behind its log (a crash under a lease) shows the last step and leaves the file byte for byte", async () => {
    const page = await session.newPage();
    const result = await page.evaluate(() => window.e2e.api.readOnlyBehindLog("/behind-log.sqlite3", 5));
    expect(result.mark).toBe("1"); // the file's rows are behind: the creation at position 1 is the last one written
    expect(result.seen).toEqual([{ id: 1, n: 5 }]);
    expect(result.after).toBe(result.before);
  });

  it("refuses a damaged database with DatabaseCorrupt and neither deletes nor replaces the file", async () => {
    const page = await session.newPage();
    await openOk(page);
    await page.evaluate(() => window.e2e.api.insert(400, 200));
    await page.evaluate(() => window.e2e.api.close());
    const damaged = await page.evaluate((path) => window.e2e.api.damage(path), DB_PATH);

    for (const attempt of ["same page", "after a reload"]) {
      if (attempt === "after a reload") await session.reload(page);
      const result = await openDatabase(page);
      expect(result.ok, attempt).toBe(false);
      if (result.ok) continue;
      expect(result.message).toContain(`"${DB_PATH}" in the OPFS pool`);
      expect(result.message).toMatch(/damaged|integrity check/);
      expect(result.message).toContain("left exactly as found");
      expect(await page.evaluate(() => window.e2e.api.poolFiles())).toContain(DB_PATH);
      expect(await page.evaluate((path) => window.e2e.api.poolFileDigest(path), DB_PATH)).toEqual(damaged);
      // The class name must survive the production build: callers match on `name`.
      expect(result.name).toBe("DatabaseCorrupt");
    }
  });

  it("recovers every committed row in a new worker after worker.terminate()", async () => {
    const page = await session.newPage();
    await openOk(page);
    await page.evaluate(() => window.e2e.api.insert(500, 100));
    await page.evaluate(() => window.e2e.api.holdOpenTransaction(100));
    // terminate() kills the worker without running any cleanup; its access handles are released by the
    // browser asynchronously, which is what the open's retry loop is for.
    await page.evaluate(() => window.e2e.restartWorker());

    const info = await openOk(page);
    expect(await page.evaluate(() => window.e2e.api.stats())).toEqual({ count: 500, minId: 1, maxId: 500, uncommitted: 0 });
    expect(await page.evaluate(() => window.e2e.api.integrityCheck())).toEqual(["ok"]);
    console.log(`terminate: reopen in the new worker took ${info.openMs.toFixed(0)} ms`);
  });

  it("makes a second tab wait for the pool, then take over with every row when the first tab closes", async () => {
    const first = await session.newPage();
    await openOk(first);
    await first.evaluate(() => window.e2e.api.insert(142, 100));

    // While the first tab's worker holds the pool's access handles, a bounded wait ends in DatabaseLocked…
    // The wait is told by the attempts it made, not by a clock: a loaded machine stretches every duration.
    const second = await session.newPage();
    const refused = await openDatabase(second, { maxWaitMs: 1000 });
    expect(refused).toMatchObject({ ok: false, name: "DatabaseLocked", message: expect.stringContaining("held by another tab") });
    const attempts = Number(/over (\d+) attempts/.exec(refused.ok ? "" : refused.message)?.[1]);
    expect(attempts).toBeGreaterThan(1);

    // …and a longer one succeeds once the owner is gone. Every failed install attempt in between must keep
    // the pool's files (preserveOnInitFailure): the library default would have deleted them.
    const waiting = openDatabase(second, { maxWaitMs: 20_000 });
    await new Promise((resolve) => setTimeout(resolve, 500));
    await first.close();
    expect(await waiting).toMatchObject({ ok: true });
    expect(await second.evaluate(() => window.e2e.api.stats())).toEqual({ count: 142, minId: 1, maxId: 142, uncommitted: 0 });
    expect(await second.evaluate(() => window.e2e.api.integrityCheck())).toEqual(["ok"]);
  });

  it("rejects a commit that exceeds the storage quota with StorageQuotaExceeded and rolls it back", async () => {
    const page = await session.newPage();
    await openOk(page);
    await page.evaluate(() => window.e2e.api.insert(10, 1000));
    const cdp = await session.context.newCDPSession(page);
    const origin = new URL(page.url()).origin;
    const { usage } = await page.evaluate(() => navigator.storage.estimate());
    await cdp.send("Storage.overrideQuotaForOrigin", { origin, quotaSize: (usage ?? 0) + 2_000_000 });

    const outcome = await page.evaluate(async () => {
      for (let committed = 0; committed < 1000; committed += 1) {
        try {
          await window.e2e.api.insert(1, 100_000);
        } catch (error) {
          return { committed, message: (error as Error).message };
        }
      }
      return { committed: 1000, message: "no error" };
    });
    expect(outcome.message).toMatch(/storage quota for this site is exhausted.*rolled back/);
    expect(outcome.committed).toBeGreaterThan(0);
    const afterFailure = await page.evaluate(() => window.e2e.api.stats());
    expect(afterFailure).toEqual({ count: 10 + outcome.committed, minId: 1, maxId: 10 + outcome.committed, uncommitted: 0 });
    expect(await page.evaluate(() => window.e2e.api.integrityCheck())).toEqual(["ok"]);

    await cdp.send("Storage.overrideQuotaForOrigin", { origin }); // back to the real quota
    await page.evaluate(() => window.e2e.api.insert(1, 100_000));
    expect((await page.evaluate(() => window.e2e.api.stats())).count).toBe(afterFailure.count + 1);
  });
});
