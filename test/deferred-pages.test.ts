import { describe, expect, it } from "vitest";
import { stepper as loneStepper } from "../bench/stepper.ts";
import { createRegistry, defineExtension } from "../src/index.ts";
import type { SqliteDatabase } from "../src/storage/sqlite/database.ts";
import { openSqliteStorage } from "../src/storage/sqlite/open-storage.ts";
import { SqliteStorage } from "../src/storage/sqlite/storage.ts";
import { openSqliteDatabase } from "../src/storage/sqlite/wasm.ts";
import { stepped } from "./sqlite-support.ts";
import { ctx, openHarness, runUntil } from "./support.ts";

// Decision 0086 (issue 27, "zero added latency for effect-free steps"): on OPFS a commit costs one WAL frame per page
// it dirties. Counted here without a WAL: the database's image after each commit against the one before, page by
// page, each changed page named by its b-tree (dbstat). Load-independent: the same pages whatever the machine does.

/**
 * Pages each table's b-tree had changed over `run`'s commits (page 1 as "page 1"), and the commits. Nothing is freed
 * during a run (no trim), so each page's owner at the end is its owner when it changed.
 */
async function pagesDirtied(db: SqliteDatabase, storage: SqliteStorage, run: () => Promise<void>) {
  const size = Number((await db.get("PRAGMA page_size"))!.page_size);
  const dirtied: number[] = [];
  let commits = 0;
  // Page 1's change counter and version-valid-for move at every commit of a rollback journal, not in WAL.
  const image = async () => {
    const bytes = Buffer.from(await db.exportImage());
    bytes.fill(0, 24, 28).fill(0, 92, 100);
    return bytes;
  };
  let before = await image();
  const apply = storage.apply.bind(storage);
  storage.apply = async (batch) => {
    await apply(batch);
    const after = await image();
    for (let page = 0; page * size < after.length; page++) {
      const start = page * size;
      if (before.length < start + size || !after.subarray(start, start + size).equals(before.subarray(start, start + size)))
        dirtied.push(page + 1);
    }
    before = after;
    commits++;
  };
  await run();
  storage.apply = apply;
  const owners = new Map((await db.all("SELECT pageno, name FROM dbstat")).map((row) => [Number(row.pageno), String(row.name)]));
  const pages = new Map<string, number>();
  for (const page of dirtied) {
    const name = page === 1 ? "page 1" : (owners.get(page) ?? "free");
    pages.set(name, (pages.get(name) ?? 0) + 1);
  }
  return { pages, commits, perCommit: (name: string) => (pages.get(name) ?? 0) / commits };
}

const STEPS = 600;
const LONE_STEPS = 40;

describe("0086: the pages a fenced effect-free step dirties", () => {
  it("S4: 600 fenced steps of one task dirty the log's pages and next to nothing else: the task's and the mark's pages once in 100 steps or less (decision 0081: about once in 11)", async () => {
    const db = await openSqliteDatabase({ vfs: "memory" });
    const storage = await SqliteStorage.open(db, "deferring", { deferTaskRows: true });
    await storage.load();
    await storage.apply(stepped(1, 0, 1, 1));
    const counted = await pagesDirtied(db, storage, async () => {
      for (let n = 1; n <= STEPS; n++) await storage.apply(stepped(1, n, n + 1, 1));
    });
    expect(counted.commits).toBe(STEPS);
    // Every step appends its log row: the log's last leaf, once per commit (more when the leaf splits).
    expect(counted.perCommit("pi_durable_log")).toBeGreaterThanOrEqual(1);
    // Decision 0081 wrote the task's page once per 32 steps and the mark's page twice (0.094 a step); now the task's
    // page once per 256 and the mark's once (written at the first deferring step, kept after).
    expect(counted.perCommit("tasks")).toBeLessThanOrEqual(0.01);
    expect(counted.perCommit("pi_durable_meta")).toBeLessThanOrEqual(0.01);
    // What else a step dirties is the log's growth: a new leaf's parent and page 1 (the file's size) at a split.
    const others = [...counted.pages].filter(([name]) => !["pi_durable_log", "tasks", "pi_durable_meta", "page 1"].includes(name));
    expect(others).toEqual([]);
    expect(counted.perCommit("page 1")).toBeLessThan(0.1);
    await db.close();
  });
});

describe("0091: the pages a lone step dirties on the product's storage", () => {
  it("S3/S11: a task's steps with no lease on a deferring storage (openSqliteStorage's) dirty the task's leaf alone, once a step, as a raw single-row commit does (one WAL frame on OPFS); the live index only at its two status changes", async () => {
    const storage = await openSqliteStorage({ vfs: "memory" });
    const db = storage.database;
    const registry = createRegistry().install(defineExtension({ name: "t", tasks: [loneStepper] }));
    const { harness, clock } = await openHarness(storage, { registry });
    const root = await harness.root(ctx);
    const id = await root.commit((tx) => tx.createTask(loneStepper, { steps: LONE_STEPS + 1 }), ctx);
    let done = false;
    const counted = await pagesDirtied(db, storage, async () => {
      harness.resume();
      void harness.waitForTask(id, ctx).then(() => {
        done = true;
      });
      await runUntil(clock, () => done);
    });
    // Its start (pending → running), LONE_STEPS steps keeping it running, and its last step (→ terminal).
    expect(counted.commits).toBe(LONE_STEPS + 2);
    // Every commit changed the task's leaf and nothing else but the live index at its two status changes: no mark (a
    // lease-less write keeps none), no log row, no page 1.
    expect(Object.fromEntries(counted.pages)).toEqual({ tasks: LONE_STEPS + 2, tasks_live: 2 });
    await harness.close(ctx);
    await storage.close();
  });
});
