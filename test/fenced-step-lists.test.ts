// Decision 0131 (issue 27, item 6): a fenced effect-free step allocates no list of its own beyond a step with no
// lease — a lone task's deferring turn keeps what it replaced in its own fields, and the log's one slice (rows
// unlimited) is the text itself. Counted by shape, not timed. The guard beside them: a deferring turn of several
// tasks (its further rows still listed) whose COMMIT fails puts every waiting row back (S1, S11).
import { createHook } from "node:async_hooks";
import fc from "fast-check";
import { describe, expect, it } from "vitest";
import { stepper } from "../bench/stepper.ts";
import { systemClock } from "../src/base/clock.ts";
import { memoryArbiter } from "../src/follow/arbiter.ts";
import { createRegistry, defineExtension, Harness } from "../src/index.ts";
import type { Batch, TaskRecord } from "../src/storage/records.ts";
import { logSlices } from "../src/storage/rows.ts";
import type { SqliteTransaction } from "../src/storage/sqlite/database.ts";
import { DeferredTaskRows, type Turn } from "../src/storage/sqlite/deferred.ts";
import { openSqliteStorage } from "../src/storage/sqlite/open-storage.ts";
import { SqliteStorage } from "../src/storage/sqlite/storage.ts";
import { openSqliteDatabase } from "../src/storage/sqlite/wasm.ts";
import { ctx } from "./support.ts";
import { taskRecord } from "./task-record.ts";

const running = (id: number, n: number) => taskRecord(id, { status: "running", checkpoint: { phase: "step", n } });
const fenced = (tasks: TaskRecord[], position: number): Batch => ({
  tasks,
  conversations: [],
  entries: [],
  submissions: [],
  documents: [],
  fence: { epoch: 1, position },
});

/** Promises a lone task's checkpoint step makes on sqlite-wasm in memory (the product's storage: it defers), fenced or not. */
async function promisesPerStep(fenced: boolean): Promise<number> {
  const registry = createRegistry().install(defineExtension({ name: "bench", tasks: [stepper] }));
  const lease = { place: "tab", arbiter: memoryArbiter({ clock: systemClock, ttlMs: 600_000 }) };
  const harness = await Harness.open(await openSqliteStorage({ vfs: "memory" }), fenced ? { registry, lease } : { registry }, ctx);
  const root = await harness.root(ctx);
  const promisesOf = async (steps: number) => {
    let promises = 0;
    const hook = createHook({ init: (_id, type) => void (type === "PROMISE" && promises++) }).enable();
    try {
      const id = await root.commit((tx) => tx.createTask(stepper, { steps }), ctx);
      expect((await harness.waitForTask(id, ctx)).state).toEqual({ status: "terminal", outcome: { status: "completed", result: steps } });
    } finally {
      hook.disable();
    }
    return promises;
  };
  await promisesOf(10); // the kind's first run out of the count
  const perStep = ((await promisesOf(300)) - (await promisesOf(100))) / 200;
  await harness.close(ctx);
  await harness.storage.close();
  return perStep;
}

describe("decision 0131: a fenced step makes no list of its own", () => {
  it("a fenced lone task's step (its task row deferred) makes no promise more than one with no lease (one more before)", async () => {
    const plain = await promisesPerStep(false);
    const fenced = await promisesPerStep(true);
    // The connection may wait one macrotask when the event loop did not turn for 50 ms (a promise now and then).
    expect(fenced).toBeLessThan(plain + 0.5);
  });

  it("a lone task's deferring turn keeps the text it replaced in the turn itself, no list", async () => {
    const db = await openSqliteDatabase({ vfs: "memory" });
    await db.exec("CREATE TABLE IF NOT EXISTS pi_durable_meta (key TEXT PRIMARY KEY, value TEXT)");
    const rows = new DeferredTaskRows(true, "lists");
    const task = running(7, 1);
    const turns: Turn[] = [];
    const step = (position: number, record: string) =>
      rows.transaction(db, (_tx: SqliteTransaction, turn) => {
        turns.push(turn!);
        return turn!.defer({ epoch: 1, position }, [{ task, record }]);
      });
    expect(await step(1, "a")).toBe(false); // the first turn does not know the file's mark yet
    expect(await step(2, "b")).toBe(true);
    expect(await step(3, "c")).toBe(true);
    expect(turns[1]).toMatchObject({ firstId: 7, firstRecord: undefined, replaced: undefined });
    expect(turns[2]).toMatchObject({ firstId: 7, firstRecord: "b", replaced: undefined });
    expect(rows.waiting).toBe(1);
    await db.close();
  });

  it("the log's one slice where rows are unlimited is the text itself; a limited row still gets slices", () => {
    const text = `{"tasks":[${"x".repeat(300)}]}`;
    expect(logSlices(text, undefined)).toBe(text);
    const slices = logSlices(text, 64 + 100);
    expect(Array.isArray(slices) && slices.join("")).toBe(text);
  });

  it("S1 S11: deferring turns of one to three tasks whose COMMIT fails put every waiting row back (reads, loads, a crash image)", async () => {
    await fc.assert(
      fc.asyncProperty(
        fc.array(fc.record({ ids: fc.subarray([1, 2, 3], { minLength: 1 }), fail: fc.boolean() }), { minLength: 1, maxLength: 12 }),
        async (steps) => {
          const inner = await openSqliteDatabase({ vfs: "memory" });
          const ctl = { fail: false };
          const db = new Proxy(inner, {
            get(target, key) {
              if (key === "transaction")
                return <T>(body: (tx: SqliteTransaction) => T) =>
                  target.transaction((tx) => {
                    const result = body(tx);
                    if (ctl.fail) throw new Error("disk I/O error at COMMIT");
                    return result;
                  });
              const value = Reflect.get(target, key, target) as unknown;
              return typeof value === "function" ? value.bind(target) : value;
            },
          });
          const storage = await SqliteStorage.open(db, "sqlite", { deferTaskRows: true });
          await storage.load();
          const ack = new Map<number, TaskRecord>([1, 2, 3].map((id) => [id, running(id, 0)]));
          await storage.apply(fenced([...ack.values()], 1));
          let position = 1;
          let n = 0;
          for (const { ids, fail } of steps) {
            const tasks = ids.map((id) => running(id, ++n));
            ctl.fail = fail;
            const applied = storage.apply(fenced(tasks, position + 1));
            if (fail) await expect(applied).rejects.toThrow("disk I/O");
            else {
              await applied;
              position++;
              for (const task of tasks) ack.set(task.id, task);
            }
            ctl.fail = false;
          }
          const image = await inner.exportImage(); // a crash now: what waits is lost with the process, the log holds it
          for (const id of [1, 2, 3]) expect((await storage.getTask(id))?.state).toEqual(ack.get(id)!.state);
          const reopened = await SqliteStorage.open(await openSqliteDatabase({ vfs: "memory", image }), "sqlite", { deferTaskRows: true });
          const state = await reopened.load();
          for (const id of [1, 2, 3]) expect(state.liveTasks.find((task) => task.id === id)?.state).toEqual(ack.get(id)!.state);
          await reopened.close();
          await storage.close();
        },
      ),
      { numRuns: 100 },
    );
  });
});
