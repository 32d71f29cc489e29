import { afterEach, describe, expect, it, vi } from "vitest";
import { createRegistry, defineExtension, type Storage, type TaskRecord } from "../src/index.ts";
import { LiveIndex } from "../src/tasks/live-index.ts";
import { backends, ctx, openHarness, runUntil, stallNoting } from "./support.ts";

/**
 * Decision 0054: without a lease the open's recovery (S4) is stored on the records the load just parsed, before the
 * session's mirror is built: no second copy of every live task, no publication of the recovery commit observed task
 * by task. Every rule of S4 stays: one commit, stored before any task runs, every restart counted in the seed's query.
 */

/** The tasks whose phase began, by id. */
const begun = new Set<number>();
/** Holds its invocation until it is stopped: the live work a crash leaves `running`. */
const stall = stallNoting((id) => void begun.add(id));
const registry = () => createRegistry().install(defineExtension({ name: "test", tasks: [stall] }));
const SEED_QUERY = "SELECT id, status, record ->> '$.restarts' AS restarts FROM tasks WHERE kind = 'test.stall' ORDER BY id";

/** Each stall task's stored status and restart count, in id order: the seed's query (S11) where there is SQL. */
async function stored(storage: Storage): Promise<Array<[unknown, unknown]>> {
  if (storage.label === "memory")
    return (await storage.listTasks())
      .filter((task) => task.kind === "test.stall")
      .sort((a, b) => a.id - b.id)
      .map((task) => [task.state.status, task.restarts ?? null]);
  return (await storage.query(SEED_QUERY)).map((row) => [row.status, row.restarts]);
}

/** The records `storage.load()` hands the session, as it hands them (the same objects). */
function captureLoad(storage: Storage): TaskRecord[] {
  const captured: TaskRecord[] = [];
  const load = storage.load.bind(storage);
  storage.load = async () => {
    const state = await load();
    captured.push(...state.liveTasks);
    return state;
  };
  return captured;
}

afterEach(() => vi.restoreAllMocks());

describe.each(backends)("the open's recovery on the loaded records (decision 0054) — $name", (backend) => {
  async function crashedWithRunning(count: number): Promise<Uint8Array> {
    const storage = await backend.create();
    const { harness, clock } = await openHarness(storage, { registry: registry() });
    const root = await harness.root(ctx);
    await root.commit((tx) => {
      for (let index = 0; index < count; index++) tx.createTask(stall, null);
    }, ctx);
    begun.clear();
    harness.resume();
    await runUntil(clock, () => begun.size === count);
    return storage.exportImage(); // the crash: never closed
  }

  it("S4: each restart is counted on the record the load parsed, which becomes the mirror's (frozen), not on a second copy", async () => {
    const image = await crashedWithRunning(200);
    for (const resume of [true, false]) {
      const storage = await backend.fromImage(image);
      const loaded = captureLoad(storage);
      const { harness } = await openHarness(storage, { registry: registry(), resume });
      expect(loaded).toHaveLength(200);
      // Before, the recovery built a copy of each running record with restarts + 1: the loaded ones kept no count.
      expect(loaded.every((task) => task.restarts === 1 && Object.isFrozen(task) && Object.isFrozen(task.state))).toBe(true);
      expect(new Set(loaded.map((task) => task.state.status))).toEqual(new Set([resume ? "running" : "pending"]));
      // S11: the seed's query shows the same, and the recovery names every one.
      expect(await stored(storage)).toEqual(loaded.map(() => [resume ? "running" : "pending", 1]));
      expect(harness.recovery.tasks.map((task) => task.id)).toEqual(loaded.map((task) => task.id));
      expect(harness.recovery.tasks.every((task) => task.restarts === 1)).toBe(true);
      expect((await harness.inspect(ctx)).tasks.map((task) => task.record)).toEqual(loaded.map((task) => JSON.parse(JSON.stringify(task))));
      await harness.close(ctx);
    }
  });

  it("S4: the recovery commit is not observed task by task — each live task is indexed once at open, then runs", async () => {
    const image = await crashedWithRunning(300);
    const storage = await backend.fromImage(image);
    const indexed = vi.spyOn(LiveIndex.prototype, "index");
    begun.clear();
    const { harness, clock } = await openHarness(storage, { registry: registry(), resume: true });
    // Before: once when the scheduler was built and once more when it heard the recovery commit (600).
    expect(indexed).toHaveBeenCalledTimes(300);
    expect(await stored(storage)).toEqual(Array.from({ length: 300 }, () => ["running", 1]));
    // They run again (the scheduler found them without the commit's publication), and a close parks them.
    await runUntil(clock, () => begun.size === 300);
    await harness.close(ctx);
    // A close counts nothing (S4).
    expect(await stored(await backend.fromImage(await storage.exportImage()))).toEqual(Array.from({ length: 300 }, () => ["pending", 1]));
  });
});

describe("the open parses its live tasks as it reads them (decision 0054)", () => {
  it("B4: every live task is parsed piece by piece, never from an array of row texts; a damaged one still refuses a writable open with nothing written", async () => {
    const { openSqliteStorage } = await import("../src/storage/sqlite/open-storage.ts");
    const seeded = await openSqliteStorage({ vfs: "memory" });
    const { harness, clock } = await openHarness(seeded, { registry: registry() });
    const root = await harness.root(ctx);
    await root.commit((tx) => {
      for (let index = 0; index < 50; index++) tx.createTask(stall, null);
    }, ctx);
    begun.clear();
    harness.resume();
    await runUntil(clock, () => begun.size === 50);
    const image = await seeded.exportImage();

    const storage = await openSqliteStorage({ vfs: "memory", image });
    const all = vi.spyOn(storage.database, "all");
    const get = vi.spyOn(storage.database, "get");
    const loaded = captureLoad(storage);
    const parsed = vi.spyOn(JSON, "parse");
    const opened = await openHarness(storage, { registry: registry() });
    // Before 0054, the live rows came back from one `all` as an array of every row's text, parsed after. Since 0110 they
    // come in one row, one text, cut into pieces and parsed one by one.
    expect(all.mock.calls.some(([sql]) => String(sql).includes("tasks_live"))).toBe(false);
    expect(get.mock.calls.filter(([sql]) => String(sql).includes("tasks_live"))).toHaveLength(1);
    const texts = parsed.mock.calls.map(([text]) => text).filter((text) => text.includes('"kind"'));
    parsed.mockRestore();
    expect(texts.length).toBeGreaterThanOrEqual(50);
    expect(texts.every((text) => text.startsWith("{") && !text.includes("\u001e"))).toBe(true);
    expect(loaded.map((task) => [task.state.status, task.restarts])).toEqual(loaded.map(() => ["pending", 1]));
    await opened.harness.close(ctx);

    const damaged = await openSqliteStorage({ vfs: "memory", image });
    await damaged.database.run("UPDATE tasks SET record = '{broken' WHERE id = (SELECT max(id) FROM tasks WHERE status = 'running')");
    const before = await damaged.exportImage();
    await expect(openHarness(damaged, { registry: registry() })).rejects.toThrow(/damaged/);
    expect(await damaged.exportImage()).toEqual(before);
  });
});
