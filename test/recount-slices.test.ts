import fc from "fast-check";
import { describe, expect, it, vi } from "vitest";
import { SLICES_AFTER_MS } from "../src/harness-lifecycle.ts";
import { createRegistry, DatabaseCorrupt, defineExtension, defineTask } from "../src/index.ts";
import { openSqliteStorage } from "../src/storage/sqlite/open-storage.ts";
import { OwedRecount, RECOUNT_SLICE } from "../src/storage/sqlite/recount-owed.ts";
import type { SqliteStorage } from "../src/storage/sqlite/storage.ts";
import { emptyBatch, sampleTask } from "../src/testing/index.ts";
import { ctx, flush, openHarness, runUntil, stall } from "./support.ts";

/**
 * Makes progress once each time it runs, after `before` (n + 1: a committed state change clears `restarts`, S6), then
 * holds.
 */
const counting = (name: string, before: () => Promise<void> = async () => {}) =>
  defineTask<null, { phase: "tick"; n: number }, null>({
    name,
    version: 1,
    initial: () => ({ phase: "tick", n: 0 }),
    phases: {
      tick: async (task, runtime, context) => {
        await before();
        const n = (task.state as { checkpoint: { n: number } }).checkpoint.n + 1;
        await runtime.commit(() => ({ status: "running", checkpoint: { phase: "tick", n } }), context);
        await new Promise<void>((resolve) => runtime.signal.addEventListener("abort", () => resolve()));
      },
    },
    abort: async () => {},
  });
const tick = counting("test.tick");
/** Steps once (n + 1) when the test opens its gate, then holds: a first resumed step the test times. */
let gate: { open: () => void; opened: Promise<void> } = newGate();
function newGate(): { open: () => void; opened: Promise<void> } {
  let open!: () => void;
  const opened = new Promise<void>((resolve) => (open = resolve));
  return { open, opened };
}
const gated = counting("test.gated", () => gate.opened);
const registry = () => createRegistry().install(defineExtension({ name: "test", tasks: [stall, tick, gated] }));
const SEED_QUERY =
  "SELECT id, status, record ->> '$.state.checkpoint.phase' AS phase, record ->> '$.state.checkpoint.n' AS n, record ->> '$.restarts' AS restarts FROM tasks";
type SeedRow = { id: number; status: string; phase: string; n: number | null; restarts: number | null };
const seed = async (storage: SqliteStorage) =>
  ((await storage.query(SEED_QUERY)) as SeedRow[]).filter((row) => row.phase !== null && row.id > 1);

/** A crash image with `count` tasks running, every `every`-th a tick task (each has stepped once: n = 1). */
async function crashed(count: number, every: number, last: typeof tick = tick): Promise<Uint8Array> {
  const storage = await openSqliteStorage({ vfs: "memory" });
  const { harness, clock } = await openHarness(storage, { registry: registry() });
  const root = await harness.root(ctx);
  await root.commit((tx) => {
    for (let index = 0; index < count; index++)
      tx.createTask(index % every === every - 1 ? (index === count - 1 ? last : tick) : stall, null);
  }, ctx);
  // Running, not yet run: each task's invocation is reserved (stored running) and the process dies at once.
  harness.resume();
  await runUntil(clock, async () => (await harness.query("SELECT count(*) AS n FROM tasks WHERE status = 'running'"))[0]!.n === count);
  const rows = await seed(storage);
  // The ticks may have made their progress already; the image is taken as it stands.
  expect(rows).toHaveLength(count);
  return storage.exportImage();
}

/**
 * What an image means, read without the code under test: its rows, with what the opens owed (the metadata row
 * `recount_owed`, a list of windows: a running row in a window's (after, through] and not in its written owes it one
 * restart) applied — restarts + one per window, pending unless every such window kept it running.
 */
async function truth(image: Uint8Array): Promise<SeedRow[]> {
  const storage = await openSqliteStorage({ vfs: "memory", image, readOnly: true });
  const meta = await storage.query("SELECT value FROM main.pi_durable_meta WHERE key = 'recount_owed'");
  const windows = meta[0]
    ? (JSON.parse(String(meta[0].value)) as Array<{ after: number; through: number; keepRunning: boolean; written: number[] }>)
    : [];
  const rows = await seed(storage);
  await storage.close();
  return rows.map((row) => {
    if (row.status !== "running") return row;
    const owing = windows.filter((w) => row.id > w.after && row.id <= w.through && !w.written.includes(row.id));
    if (owing.length === 0) return row;
    const status = owing.every((w) => w.keepRunning) ? "running" : "pending";
    return { ...row, status, restarts: (row.restarts ?? 0) + owing.length };
  });
}

describe("S4's recount in slices (decision 0092)", () => {
  it("S4, S6, S11: with 3,000 running, the recovery commit records them owed (decision 0098: none counted in front when they stay running); the hot task (largest id) steps before the rest is counted; then the seed's query shows every restart counted", async () => {
    const image = await crashed(3_000, 3_000); // the one tick task is the largest id, as the bench's hot task
    const storage = await openSqliteStorage({ vfs: "memory", image });
    const { harness, clock } = await openHarness(storage, { registry: registry(), resume: true });
    // The mirror has every restart counted before any task runs (what S6 reads).
    const inspected = (await harness.inspect(ctx)).tasks.map((task) => task.record);
    expect(inspected.filter((task) => task.kind !== "test.tick" && task.restarts === 1).length).toBe(2_999);
    // The hot task's step is stored while restarts are still owed: it was not queued behind them (fails on the old
    // code, where the open's one commit counted all 3,000 before anything ran).
    await runUntil(clock, async () => (await seed(storage)).some((row) => row.n === 2), 50);
    const during = await seed(storage);
    expect(storage.owesRestarts).toBe(true);
    expect(during.filter((row) => row.restarts === null).length).toBeGreaterThan(0);
    expect(during.find((row) => row.phase === "tick")!.restarts).toBeNull(); // progress cleared its restart (S6)
    await runUntil(clock, () => !storage.owesRestarts);
    const after = await seed(storage);
    expect(after.filter((row) => row.phase === "stall").every((row) => row.status === "running" && row.restarts === 1)).toBe(true);
    expect(after.filter((row) => row.phase === "stall")).toHaveLength(2_999);
    expect(after.find((row) => row.phase === "tick")).toMatchObject({ n: 2, restarts: null }); // not counted again
    await harness.close(ctx);
  }, 60_000);

  it("S4, S11 (decision 0098): an open that keeps its tasks running counts none in front and no slice is stored before the first resumed step, however many timers fire; once it is stored the slices count the rest", async () => {
    gate = newGate();
    const image = await crashed(2_500, 2_500, gated); // the gated task is the largest id, as the bench's hot task
    const storage = await openSqliteStorage({ vfs: "memory", image });
    const { harness, clock } = await openHarness(storage, { registry: registry(), resume: true });
    const counted = async () => (await seed(storage)).filter((row) => row.phase === "stall" && row.restarts === 1).length;
    // Timers fire (well short of the fallback) while the hot task has not stepped: the open's first slice only.
    for (let turn = 0; turn < 20; turn++) {
      clock.advance(5);
      await flush(2);
    }
    expect(await counted()).toBe(0); // fails on decision 0092's timers (every slice stored by now) and first slice
    expect(storage.owesRestarts).toBe(true);
    gate.open();
    await runUntil(clock, () => !storage.owesRestarts);
    expect(await counted()).toBe(2_499);
    expect((await seed(storage)).find((row) => row.phase === "tick")).toMatchObject({ n: 1, restarts: null });
    await harness.close(ctx);
  }, 60_000);

  it("S4 (decision 0104): the recovery commit of an open that keeps 2,500 tasks running asks no row whether it is owed; the slices count them all", async () => {
    const image = await crashed(2_500, 2_500);
    const storage = await openSqliteStorage({ vfs: "memory", image });
    const owes = vi.spyOn(OwedRecount.prototype, "owes");
    try {
      const { harness, clock } = await openHarness(storage, { registry: registry(), resume: true });
      expect(owes).not.toHaveBeenCalled(); // fails on the old code: once for each of the 2,500 rows
      owes.mockRestore();
      await runUntil(clock, () => !storage.owesRestarts);
      expect((await seed(storage)).filter((row) => row.phase === "stall" && row.restarts === 1)).toHaveLength(2_499);
      await harness.close(ctx);
    } finally {
      owes.mockRestore();
    }
  }, 60_000);

  it("S4, S11 (decision 0098): an open that finds a crashed open's slices unstored (each kept its tasks running) keeps them owed instead of storing them in front of its first step; its slices then count both", async () => {
    gate = newGate();
    const storage = await openSqliteStorage({ vfs: "memory", image: await crashed(2_500, 2_500, gated) });
    await openHarness(storage, { registry: registry(), resume: true }); // crashes before any slice
    const image = await storage.exportImage();
    const next = await openSqliteStorage({ vfs: "memory", image });
    const { harness, clock } = await openHarness(next, { registry: registry(), resume: true });
    const stalls = async () => (await seed(next)).filter((row) => row.phase === "stall");
    clock.advance(5);
    await flush(5);
    // Nothing was counted in front: every row still as the first crash left it (fails on decision 0092's settlement,
    // which stored +1 on all of them in the recovery commit, and its first slice).
    expect((await stalls()).filter((row) => row.restarts === null)).toHaveLength(2_499);
    expect(
      (await harness.inspect(ctx)).tasks.filter((task) => task.record.kind === "test.stall" && task.record.restarts === 2),
    ).toHaveLength(2_499);
    gate.open();
    await runUntil(clock, () => !next.owesRestarts);
    expect((await stalls()).every((row) => row.restarts === 2 && row.status === "running")).toBe(true);
    await harness.close(ctx);
  }, 60_000);

  it("S4, S11 (decisions 0098, 0116): opens that find a crashed open's window with a written row, then two equal windows, keep them owed (nothing counted in front) and count each crash once", async () => {
    gate = newGate();
    gate.open(); // the last task steps at each open: its row is written, so every window lists it
    const meta = async (storage: SqliteStorage) =>
      JSON.parse(String((await storage.query("SELECT value FROM main.pi_durable_meta WHERE key = 'recount_owed'"))[0]!.value)) as {
        written: number[];
      }[];
    const stallRows = async (storage: SqliteStorage) => (await seed(storage)).filter((row) => row.phase === "stall");
    let storage = await openSqliteStorage({ vfs: "memory", image: await crashed(2_500, 2_500, gated) });
    await openHarness(storage, { registry: registry(), resume: true });
    for (const windows of [1, 2]) {
      // The open before stepped its gated task (its row written in its window) and crashed before any slice.
      await flush(10);
      const found = await meta(storage);
      expect(found).toHaveLength(windows);
      expect(found.every((window) => window.written.length === 1)).toBe(true); // the second time: two equal windows
      storage = await openSqliteStorage({ vfs: "memory", image: await storage.exportImage() });
      const { harness, clock } = await openHarness(storage, { registry: registry(), resume: true });
      await flush(5);
      // Kept: every stall row still as the first crash left it (fails when the kept windows' count disagrees with
      // the load's: the recovery then settles them in front, restarts stored on every row).
      expect((await stallRows(storage)).filter((row) => row.restarts === null)).toHaveLength(2_499);
      expect(await meta(storage)).toHaveLength(windows + 1);
      if (windows === 2) {
        await runUntil(clock, () => !storage.owesRestarts);
        expect((await stallRows(storage)).every((row) => row.restarts === 3 && row.status === "running")).toBe(true);
        await harness.close(ctx);
      }
    }
  }, 60_000);

  it("S4, S11 (decision 0098): with no task step, the slices start SLICES_AFTER_MS after the open", async () => {
    const storage = await openSqliteStorage({ vfs: "memory", image: await crashed(2_500, 1_000_000) });
    const { harness, clock } = await openHarness(storage, { registry: registry() }); // not resumed: nothing steps
    const counted = async () => (await seed(storage)).filter((row) => row.restarts === 1).length;
    clock.advance(SLICES_AFTER_MS - 1);
    await flush(5);
    expect(await counted()).toBe(RECOUNT_SLICE);
    clock.advance(1);
    await runUntil(clock, () => !storage.owesRestarts);
    expect(await counted()).toBe(2_500);
    await harness.close(ctx);
  }, 60_000);

  it("S4, S5: a read-only open between slices shows every restart counted (inspect), raw SQL the stored rows, and changes nothing; a writable open counts them too", async () => {
    const storage = await openSqliteStorage({ vfs: "memory", image: await crashed(2_500, 1_000_000) });
    await openHarness(storage, { registry: registry(), resume: true }); // crashes before any slice
    const image = await storage.exportImage();
    const readOnly = await openSqliteStorage({ vfs: "memory", image, readOnly: true });
    const { harness } = await openHarness(readOnly, { registry: registry(), readOnly: true });
    const records = (await harness.inspect(ctx)).tasks.map((task) => task.record).filter((task) => task.kind === "test.stall");
    expect(records).toHaveLength(2_500);
    expect(records.every((task) => task.restarts === 1 && task.state.status === "running")).toBe(true);
    const raw = await seed(readOnly);
    expect(raw.filter((row) => row.restarts === 1)).toHaveLength(0); // kept running: nothing counted in front (0098)
    expect(await readOnly.exportImage()).toEqual(image);
    // The next writable open (without resume) keeps what the crashed one owed beside its own: pending, 2.
    const writable = await openSqliteStorage({ vfs: "memory", image });
    const next = await openHarness(writable, { registry: registry() });
    await runUntil(next.clock, () => !writable.owesRestarts);
    const rows = (await seed(writable)).filter((row) => row.phase === "stall");
    expect(rows.every((row) => row.status === "pending" && row.restarts === 2)).toBe(true);
    // And a status column that says what each record says (an owed row's status is rewritten with its record).
    const mismatched = await writable.query("SELECT count(*) AS n FROM tasks WHERE status <> record ->> '$.state.status'");
    expect(mismatched[0]!.n).toBe(0);
    await next.harness.close(ctx);
  }, 60_000);

  it("S4, S11 (decision 0112): a slice that makes its rows pending leaves the storage knowing their stored status, so a later start of such a row stores status 'running' too, not a running record over a 'pending' column", async () => {
    const first = await openSqliteStorage({ vfs: "memory" });
    const ids = Array.from({ length: RECOUNT_SLICE + 76 }, (_, at) => at + 10);
    await first.apply({
      ...emptyBatch(),
      nextId: ids.at(-1)! + 1,
      rootConversationId: 1,
      conversations: [{ id: 1, createdAt: 5 }],
      tasks: ids.map((id) => sampleTask(id, "running")),
    });
    const storage = await openSqliteStorage({ vfs: "memory", image: await first.exportImage() });
    const { liveTasks } = await storage.load();
    const recovered = liveTasks.map((task) => ({
      ...task,
      state: { status: "pending" as const, checkpoint: (task.state as { checkpoint: { phase: string } }).checkpoint },
      restarts: 1,
    }));
    await storage.apply({ ...emptyBatch(), tasks: recovered, recount: { keepRunning: false } });
    expect(storage.owesRestarts).toBe(true);
    while (await storage.recountSlice!()) {}
    const last = recovered.at(-1)!;
    await storage.apply({ ...emptyBatch(), tasks: [{ ...last, state: { status: "running", checkpoint: last.state.checkpoint } }] });
    expect(await storage.query(`SELECT status, record ->> '$.state.status' AS state FROM tasks WHERE id = ${last.id}`)).toEqual([
      { status: "running", state: "running" },
    ]);
    expect(await storage.query("SELECT count(*) AS n FROM tasks WHERE status <> record ->> '$.state.status'")).toEqual([{ n: 0 }]);
  });

  it("B4: a damaged owed-restarts row refuses the open before anything is written", async () => {
    const storage = await openSqliteStorage({ vfs: "memory", image: await crashed(1_100, 1_000_000) });
    await openHarness(storage, { registry: registry(), resume: true });
    await storage.database.run(`UPDATE pi_durable_meta SET value = '{"after": 1' WHERE key = 'recount_owed'`);
    const image = await storage.exportImage();
    const reopened = await openSqliteStorage({ vfs: "memory", image });
    await expect(openHarness(reopened, { registry: registry(), resume: true })).rejects.toBeInstanceOf(DatabaseCorrupt);
    expect(await reopened.exportImage()).toEqual(image);
  }, 60_000);

  it("S4: a crash anywhere between slices, task steps and a reopen counts each task's restart exactly once per crash, never twice, never lost (fast-check)", async () => {
    const COUNT = 2_400; // three slices
    const EVERY = 400; // six tick tasks, in every slice
    const base = await crashed(COUNT, EVERY);
    const opens = fc.record({ keepRunning: fc.boolean(), turns: fc.nat(6), early: fc.boolean() });
    await fc.assert(
      fc.asyncProperty(fc.array(opens, { minLength: 1, maxLength: 3 }), async (plan) => {
        let image = base;
        // Expected restarts per task; statuses come from each crash image, read by `truth` (the owed row applied).
        let rows = await truth(image);
        const restarts = new Map(rows.map((row) => [row.id, row.restarts ?? 0]));
        for (const { keepRunning, turns, early } of plan) {
          const storage = await openSqliteStorage({ vfs: "memory", image });
          const { clock } = await openHarness(storage, { registry: registry(), resume: keepRunning });
          for (const row of rows) if (row.status === "running") restarts.set(row.id, restarts.get(row.id)! + 1);
          if (!early) {
            await flush(3);
            for (let turn = 0; turn < turns && storage.owesRestarts; turn++) {
              clock.next();
              await flush(2);
            }
          }
          image = await storage.exportImage(); // the crash
          const before = new Map(rows.map((row) => [row.id, row.n]));
          rows = await truth(image);
          // A tick's progress stored before the crash cleared its restarts (S6).
          for (const row of rows) if (row.n !== null && row.n !== before.get(row.id)) restarts.set(row.id, 0);
        }
        // The last open runs its slices to the end: the seed's query then shows the expected count of every task.
        const storage = await openSqliteStorage({ vfs: "memory", image });
        const { harness, clock } = await openHarness(storage, { registry: registry() });
        for (const row of rows) if (row.status === "running") restarts.set(row.id, restarts.get(row.id)! + 1);
        await runUntil(clock, () => !storage.owesRestarts);
        const last = await seed(storage);
        expect(last).toHaveLength(COUNT);
        for (const row of last) expect([row.id, row.restarts ?? 0]).toEqual([row.id, restarts.get(row.id)]);
        expect(last.every((row) => row.status === "pending")).toBe(true);
        await harness.close(ctx);
      }),
      { numRuns: 8, seed: 92 },
    );
  }, 120_000);
});
