import { describe, expect, it } from "vitest";
import { createHost } from "../src/host/host.ts";
import type { HarnessStatus } from "../src/host/protocol.ts";
import { createRegistry, defineExtension, defineTask } from "../src/index.ts";
import { openSqliteStorage } from "../src/storage/sqlite/open-storage.ts";
import { createManualClock } from "../src/testing/clock.ts";
import { ctx, openHarness, runUntil, stallNoting } from "./support.ts";

/**
 * Decision 0128: a browser worker's host tells `ready` after the tasks its open resumed had their first turn, so the
 * ready status (with 10,000 tasks cut off, 10,000 ids and objects copied to each page) is not in front of the first
 * resumed step. It still tells what the open recovered, with the counts the open made; S4 stays exact when the tab
 * crashes between that step and the status.
 */

const STALLED = 1_500; // more than one recount slice: the open leaves their restarts owed (decision 0098)
const began: number[] = [];
const stall = stallNoting((id) => void began.push(id));
let stepped: number[] = [];
let atStep: (() => void) | undefined;
/** Steps once from phase a, then once a life from phase b (where a crash finds it), then holds. */
const committer = defineTask<null, { phase: "a" | "b"; n: number }, null>({
  name: "test.committer",
  version: 1,
  initial: () => ({ phase: "a", n: 0 }),
  phases: {
    a: async (task, runtime, context) => {
      await runtime.commit(() => ({ status: "running", checkpoint: { phase: "b", n: 1 } }), context);
      stepped.push(task.id);
    },
    b: async (task, runtime, context) => {
      const n = task.state.checkpoint.n + 1; // a new checkpoint: progress (S6 clears the count)
      await runtime.commit(() => ({ status: "running", checkpoint: { phase: "b", n } }), context);
      stepped.push(task.id);
      atStep?.();
      await runtime.untilAborted();
      throw new Error("stopped");
    },
  },
  abort: async () => {},
});
const registry = () => createRegistry().install(defineExtension({ name: "test", tasks: [stall, committer] }));
const SEED_QUERY = "SELECT id, status, record ->> '$.restarts' AS restarts FROM tasks WHERE kind = ? ORDER BY id";
const nextTurn = () => new Promise<void>((resolve) => setTimeout(resolve, 0));

/** A database where `stalled` stall tasks and (with `withCommitter`) one committer held in phase b were running at a crash. */
async function crashedImage(stalled: number, withCommitter: boolean): Promise<{ image: Uint8Array; ids: number[] }> {
  began.length = 0;
  stepped = [];
  const seeded = await openSqliteStorage({ vfs: "memory" });
  const { harness, clock } = await openHarness(seeded, { registry: registry() });
  const root = await harness.root(ctx);
  await root.commit((tx) => {
    for (let index = 0; index < stalled; index++) tx.createTask(stall, null);
    if (withCommitter) tx.createTask(committer, null);
  }, ctx);
  harness.resume();
  await runUntil(clock, () => began.length === stalled && stepped.length === (withCommitter ? 2 : 0));
  const ids = (await harness.query("SELECT id FROM tasks WHERE status = 'running' ORDER BY id")).map((row) => Number(row.id));
  return { image: await seeded.exportImage(), ids }; // the crash: never closed
}

/** The host a browser worker makes (`nextTurn`), on `image`; `statuses` hears every status as the page would. */
async function reopen(image: Uint8Array) {
  const storage = await openSqliteStorage({ vfs: "memory", image });
  const statuses: Array<HarnessStatus & { steppedBefore: number }> = [];
  began.length = 0;
  stepped = [];
  const served = createHost({
    database: "test",
    openStorage: async () => storage,
    harness: { registry: registry(), clock: createManualClock(5_000), resume: true },
    now: () => 0,
    nextTurn,
  });
  served.service.onStatus((status) => void statuses.push({ ...structuredClone(status), steppedBefore: stepped.length }));
  return { storage, served, statuses };
}

describe("the ready status after the resumed tasks' first turn (decision 0128)", () => {
  it("S4, S11: the first resumed step is stored and its caller has gone on before ready is told; ready tells every task the crash cut off with the open's counts", async () => {
    const { image, ids } = await crashedImage(STALLED, true);
    const committerId = ids.at(-1)!;
    const { storage, served, statuses } = await reopen(image);
    await served.ready; // the open has told its ready status by then
    const ready = statuses.find((status) => status.kind === "ready")!;
    // Told after the first resumed step (before decision 0128: in front of it, steppedBefore 0).
    expect(ready.steppedBefore).toBe(1);
    if (ready.kind !== "ready") throw new Error("not ready");
    expect(ready.recovered).toEqual(ids);
    expect(ready.recovery.stop).toBe("crash");
    expect(ready.recovery.tasks).toHaveLength(STALLED + 1);
    expect(ready.recovery.tasks.every((task) => task.restarts === 1)).toBe(true);
    // The committer's step (progress, S6) cleared its count before the status went out; the status keeps the open's.
    expect(ready.recovery.tasks.find((task) => task.id === committerId)).toEqual({ id: committerId, kind: "test.committer", restarts: 1 });
    expect(await storage.query(SEED_QUERY, "test.committer")).toEqual([{ id: committerId, status: "running", restarts: null }]);
  });

  it("S4, S11: a crash right after the first resumed step, before the ready status, leaves every restart counted at the next open", async () => {
    const { image, ids } = await crashedImage(STALLED, true);
    const committerId = ids.at(-1)!;
    let crashed: Promise<Uint8Array> | undefined;
    let toldBeforeCrash: boolean | undefined;
    const { storage, statuses } = await reopen(image);
    atStep = () => {
      atStep = undefined;
      toldBeforeCrash = statuses.some((status) => status.kind === "ready");
      crashed = storage.exportImage(); // the tab reloads here: the worker is gone, nothing after it runs
    };
    await runUntil(createManualClock(0), () => crashed !== undefined);
    expect(toldBeforeCrash).toBe(false);
    const third = await openSqliteStorage({ vfs: "memory", image: await crashed! });
    const { clock } = await openHarness(third, { registry: registry() }); // no resume: the crash's tasks made pending
    await runUntil(clock, () => !third.owesRestarts);
    const stalled = await third.query(SEED_QUERY, "test.stall");
    expect(stalled).toHaveLength(STALLED);
    // Two crashes, two restarts each — the first open's left owed when the second crash came (decision 0098).
    expect(stalled.every((row) => row.status === "pending" && row.restarts === 2)).toBe(true);
    // The committer stepped between the crashes (progress clears the count): one restart, the second crash's.
    expect(await third.query(SEED_QUERY, "test.committer")).toEqual([{ id: committerId, status: "pending", restarts: 1 }]);
  });

  it("a resumed task that waits (for a model, a page, a person) does not hold the ready status up (liveness guard)", async () => {
    const { image, ids } = await crashedImage(3, false);
    const { served, statuses } = await reopen(image);
    await served.ready; // the open has told its ready status by then
    const ready = statuses.find((status) => status.kind === "ready");
    expect(ready).toMatchObject({ kind: "ready", recovered: ids, recovery: { stop: "crash" } });
    expect(began).toHaveLength(3); // the stalled phases run, and never commit
  });
});
