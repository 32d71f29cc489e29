import { describe, expect, it } from "vitest";
import { watchCommits } from "../src/browser/commit-watch.ts";
import { type Batch, createRegistry, defineExtension, defineTask, type Storage } from "../src/index.ts";
import { openSqliteStorage } from "../src/storage/sqlite/open-storage.ts";
import { CHECKPOINT_HOLD_LIMIT, Connection } from "../src/storage/sqlite/wasm/connection.ts";
import { loadSqlite } from "../src/storage/sqlite/wasm/module.ts";
import { createManualClock } from "../src/testing/clock.ts";
import { ctx, flush, openHarness, runUntil, stall } from "./support.ts";

/** One step (a checkpoint commit), then it holds its invocation. */
const once = defineTask<null, { phase: "step" | "after" }, null>({
  name: "test.once",
  version: 1,
  initial: () => ({ phase: "step" }),
  phases: {
    step: async (_task, runtime, context) => runtime.commit(() => ({ status: "running", checkpoint: { phase: "after" } }), context),
    after: (_task, runtime) => new Promise<void>((resolve) => runtime.signal.addEventListener("abort", () => resolve())),
  },
  abort: async () => {},
});

const registry = () => createRegistry().install(defineExtension({ name: "test", tasks: [stall, once] }));

/** What the harness asked of its storage, in order: each batch stored, each hold and each release. */
type Event = { kind: "hold" | "release" } | { kind: "apply"; batch: Batch };

async function watched(image: Uint8Array): Promise<{ storage: Storage; events: Event[] }> {
  const storage = await openSqliteStorage({ vfs: "memory", image });
  const events: Event[] = [];
  const apply = storage.apply.bind(storage);
  storage.apply = (batch) => {
    events.push({ kind: "apply", batch: structuredClone(batch) });
    return apply(batch);
  };
  Object.assign(storage, {
    holdCheckpoints: () => {
      events.push({ kind: "hold" });
      return () => events.push({ kind: "release" });
    },
  });
  return { storage, events };
}

/** A crash with `stalled` tasks running and, with `stepper`, one that has not yet taken its step. */
async function crashed(stalled: number, stepper: boolean): Promise<Uint8Array> {
  const storage = await openSqliteStorage({ vfs: "memory" });
  const { harness, clock } = await openHarness(storage, { registry: registry() });
  const root = await harness.root(ctx);
  await root.commit((tx) => {
    for (let index = 0; index < stalled; index++) tx.createTask(stall, null);
  }, ctx);
  harness.resume();
  await runUntil(clock, async () => (await harness.inspect(ctx)).tasks.every((task) => task.record.state.status === "running"));
  if (stepper) await root.commit((tx) => tx.createTask(once, null), ctx); // created, not yet run: it steps after the reload
  return storage.exportImage(); // the process dies here
}

const index = (events: Event[], found: (event: Event) => boolean) => events.findIndex(found);
const stepStored = (event: Event) =>
  event.kind === "apply" && event.batch.tasks.some((task) => task.state.status === "running" && task.state.checkpoint.phase === "after");

describe("the open's checkpoint comes after the first resumed step (decision 0033)", () => {
  it("S4: the recovery commit is stored under a hold that the first task step ends, with every restart counted", async () => {
    const { storage, events } = await watched(await crashed(20, true));
    const { harness, clock } = await openHarness(storage, { registry: registry(), clock: createManualClock(5_000) });
    const recovery = index(events, (event) => event.kind === "apply");
    expect(index(events, (event) => event.kind === "hold")).toBeLessThan(recovery);
    expect(events.some((event) => event.kind === "release")).toBe(false);
    harness.resume();
    await runUntil(clock, () => events.some(stepStored));
    await flush();
    const step = index(events, stepStored);
    const release = index(events, (event) => event.kind === "release");
    // The reservation passes (every task to running) are stored under the hold too; it ends after the step.
    expect(release).toBeGreaterThan(step);
    expect(events.filter((event) => event.kind === "hold")).toHaveLength(1);
    const rows = await harness.query("SELECT record ->> '$.restarts' AS restarts FROM tasks WHERE kind = 'test.stall'");
    expect(rows).toHaveLength(20);
    expect(rows.every((row) => row.restarts === 1)).toBe(true);
    await harness.close(ctx);
  });

  it("S4: a browser worker with crash points on (its storage behind the commit watch) holds too, and ends the hold after the first step", async () => {
    // Before, watchCommits passed no holdCheckpoints on: the hold of decision 0033 never happened in such a worker.
    const { storage, events } = await watched(await crashed(5, true));
    const { harness, clock } = await openHarness(watchCommits(storage), { registry: registry(), clock: createManualClock(5_000) });
    expect(events.map((event) => event.kind).slice(0, 2)).toEqual(["hold", "apply"]);
    harness.resume();
    await runUntil(clock, () => events.some(stepStored));
    await flush();
    expect(index(events, (event) => event.kind === "release")).toBeGreaterThan(index(events, stepStored));
    await harness.close(ctx);
  });

  it("S4: an open with nothing running holds nothing; a close ends a hold that no step ended", async () => {
    const quiet = await watched(await crashed(0, true));
    const first = await openHarness(quiet.storage, { registry: registry() });
    expect(quiet.events.filter((event) => event.kind !== "apply")).toEqual([]);
    await first.harness.close(ctx);

    const stalled = await watched(await crashed(3, false));
    const second = await openHarness(stalled.storage, { registry: registry() });
    expect(stalled.events.filter((event) => event.kind !== "apply")).toEqual([{ kind: "hold" }]);
    await second.harness.close(ctx);
    expect(stalled.events.filter((event) => event.kind !== "apply")).toEqual([{ kind: "hold" }, { kind: "release" }]);
  });
});

describe("a WAL connection's checkpoint hold", () => {
  async function connection(): Promise<Connection> {
    const sqlite3 = await loadSqlite();
    const db = new sqlite3.oo1.DB(":memory:", "c");
    const opened = new Connection(sqlite3, db, { readOnly: false, label: "test", release: undefined, wal: true });
    await opened.exec("CREATE TABLE t (id INTEGER PRIMARY KEY, v TEXT)");
    return opened;
  }
  const autocheckpoint = async (db: Connection) => Number((await db.get("PRAGMA wal_autocheckpoint"))?.wal_autocheckpoint);

  it("turns the automatic checkpoint off until released, then restores it after the event loop turns", async () => {
    const db = await connection();
    expect(await autocheckpoint(db)).toBe(1000);
    const release = db.holdCheckpoints();
    expect(await autocheckpoint(db)).toBe(0);
    release();
    release(); // a second release changes nothing
    expect(await autocheckpoint(db)).toBe(1000);
    await db.close();
  });

  it("ends by itself after CHECKPOINT_HOLD_LIMIT write transactions, so the log stays bounded", async () => {
    const db = await connection();
    db.holdCheckpoints();
    for (let n = 0; n < CHECKPOINT_HOLD_LIMIT - 1; n++) await db.transaction((tx) => tx.run("INSERT INTO t (v) VALUES (?)", String(n)));
    expect(await autocheckpoint(db)).toBe(0);
    await db.transaction((tx) => tx.run("INSERT INTO t (v) VALUES ('last')"));
    expect(await autocheckpoint(db)).toBe(1000);
    expect(db.holdCheckpoints()).toBeTypeOf("function"); // a new hold may be taken
    expect(await autocheckpoint(db)).toBe(0);
    await db.close();
  });

  it("is a no-op where the file has no write-ahead log", async () => {
    const sqlite3 = await loadSqlite();
    const db = new Connection(sqlite3, new sqlite3.oo1.DB(":memory:", "c"), { readOnly: false, label: "test", release: undefined });
    db.holdCheckpoints();
    expect(await autocheckpoint(db)).toBe(1000);
    await db.close();
  });
});
