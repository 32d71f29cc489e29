import fc from "fast-check";
import { describe, expect, it } from "vitest";
import { createRegistry, defineExtension, defineTask, type TaskRecord } from "../src/index.ts";
import type { KernelTx } from "../src/session/tx.ts";
import { openSqliteStorage } from "../src/storage/sqlite/open-storage.ts";
import { byProgress } from "../src/tasks/pass.ts";
import { parkRunning, take, wakeSleeper } from "../src/tasks/transitions.ts";
import { ctx, flush, openHarness, runUntil, stallNoting } from "./support.ts";

/**
 * Decision 0112: a step stamps its state with a progress sequence (`progressed`, one more than the largest the live
 * index has seen), kept through a crash's recovery and a start; the first pass after an open ranks its candidates by
 * (restarts ascending, progressed descending — absent last —, id ascending). On a database's first crash every running
 * task has one restart, and the task that was stepping is no longer started behind every one that was not.
 */

const begun: number[] = [];
const stall = stallNoting((id) => void begun.push(id));
/** Notes its start, steps once (its stamp), then holds until stopped. */
const steps: Array<{ id: number; begunBefore: number }> = [];
const stepper = defineTask<null, { phase: "step"; n: number }, null>({
  name: "test.stepper",
  version: 1,
  initial: () => ({ phase: "step", n: 0 }),
  phases: {
    step: async (task, runtime, context) => {
      begun.push(task.id);
      const before = begun.length - 1;
      await runtime.commit(() => ({ status: "running", checkpoint: { phase: "step", n: task.state.checkpoint.n + 1 } }), context);
      steps.push({ id: task.id, begunBefore: before });
      await runtime.untilAborted();
      throw new Error("stopped");
    },
  },
  abort: async () => {},
});
const registry = () => createRegistry().install(defineExtension({ name: "test", tasks: [stall, stepper] }));
const SEED_QUERY =
  "SELECT id, kind, status, record ->> '$.restarts' AS restarts, record ->> '$.state.progressed' AS progressed FROM tasks ORDER BY id";
/** Over one recount slice (1,024): a recovery without resume stores its first slice by statement, the rest later. */
const STALLED = 1100;

/** A database that crashed with `STALLED` stalled tasks running and two steppers that stepped (the second last). */
async function crashed(): Promise<{ image: Uint8Array; stalledIds: number[]; earlier: number; later: number }> {
  const seeded = await openSqliteStorage({ vfs: "memory" });
  const { harness, clock } = await openHarness(seeded, { registry: registry() });
  const root = await harness.root(ctx);
  await root.commit((tx) => {
    for (let index = 0; index < STALLED; index++) tx.createTask(stall, null);
  }, ctx);
  harness.resume();
  await runUntil(clock, () => begun.length === STALLED);
  const stalledIds = [...begun].sort((a, b) => a - b);
  for (let made = 1; made <= 2; made++) {
    await root.commit((tx) => tx.createTask(stepper, null), ctx);
    await runUntil(clock, () => steps.length === made);
  }
  const [earlier, later] = steps.map((step) => step.id) as [number, number];
  expect(Math.max(...stalledIds)).toBeLessThan(earlier);
  return { image: await seeded.exportImage(), stalledIds, earlier, later };
}

describe("the progress stamp ranks the first pass after a crash (decision 0112)", () => {
  it.each([
    ["resume (they stay running)", true],
    ["no resume (pending, restarts counted in slices)", false],
  ])(
    "S4, S11: at a first crash (every count 1), the task that stepped last starts first, then the earlier one, then the stalled ones in id order — %s",
    async (_name, resume) => {
      begun.length = 0;
      steps.length = 0;
      const { image, stalledIds, earlier, later } = await crashed();
      const before = await (await openSqliteStorage({ vfs: "memory", image })).query(SEED_QUERY);
      const stamp = (rows: Array<Record<string, unknown>>, id: number) => rows.find((row) => row.id === id)!.progressed as number;
      // S11: the seed's query shows the stamps: the later stepper's is the larger; a task that never stepped has none.
      expect(stamp(before, later)).toBeGreaterThan(stamp(before, earlier));
      expect(before.filter((row) => row.kind === "test.stall").every((row) => row.progressed === null)).toBe(true);

      begun.length = 0;
      steps.length = 0;
      const storage = await openSqliteStorage({ vfs: "memory", image });
      const { harness, clock } = await openHarness(storage, { registry: registry(), resume, settings: { restartLimit: 10 } });
      expect(begun).toEqual([]);
      if (!resume) harness.resume();
      await runUntil(clock, () => steps.length === 2 && begun.length === STALLED + 2);
      // Before: id order, the steppers started after all 1,100 (their first step stored with 1,100 stalled phases begun).
      expect(begun).toEqual([later, earlier, ...stalledIds]);
      expect(steps.find((step) => step.id === later)!.begunBefore).toBe(0);
      expect(Math.max(...steps.map((step) => step.begunBefore))).toBeLessThan(256);
      // S4/S11: once the open's slices are stored, the seed's query shows every restart once; the new steps' stamps
      // follow the largest one stored (the later stepper stepped first again).
      await runUntil(clock, () => !storage.owesRestarts);
      const after = await storage.query(SEED_QUERY);
      expect(after.filter((row) => row.kind === "test.stall").map((row) => [row.id, row.status, row.restarts])).toEqual(
        stalledIds.map((id) => [id, "running", 1]),
      );
      expect(stamp(after, later)).toBe(stamp(before, later) + 1);
      expect(stamp(after, earlier)).toBe(stamp(before, later) + 2);
      // The mirror is what is stored.
      const mirror = new Map((await harness.inspect(ctx)).tasks.map((task) => [task.record.id, task.record]));
      for (const row of await storage.query("SELECT id, record FROM tasks WHERE status <> 'terminal'"))
        expect(row.record).toBe(JSON.stringify(mirror.get(Number(row.id))));
      await harness.close(ctx);
    },
  );

  it.each([
    ["one statement", 3],
    ["in slices", 1100],
  ])(
    "S4, B3: the recovery keeps a safe-integer stamp in the pending state and drops any other value, the stored text the mirror's JSON — %s",
    async (_name, extra) => {
      // A kind not registered at the reopen: its tasks stay pending as the recovery left them.
      const gone = defineTask<null, { phase: "step"; n: number }, null>({ ...stepper, name: "test.gone" });
      const seeded = await openSqliteStorage({ vfs: "memory" });
      const withGone = () => createRegistry().install(defineExtension({ name: "test", tasks: [stall, stepper, gone] }));
      const { harness, clock } = await openHarness(seeded, { registry: withGone() });
      const root = await harness.root(ctx);
      const stamps = [
        "7",
        "-5",
        "9007199254740991",
        "9007199254740992",
        "1152921504606846976",
        "1.5",
        "1e3",
        '"8"',
        "null",
        "true",
        '{"n":1}',
        "[]",
      ];
      begun.length = 0;
      steps.length = 0;
      await root.commit((tx) => {
        for (let index = 0; index < extra; index++) tx.createTask(stall, null);
        for (let index = 0; index < stamps.length; index++) tx.createTask(gone, null);
      }, ctx);
      harness.resume();
      await runUntil(clock, () => steps.length === stamps.length && begun.length === extra + stamps.length);
      const ids = steps.map((step) => step.id).sort((a, b) => a - b);
      await seeded.database.transaction((tx) => {
        for (const [at, id] of ids.entries())
          tx.run("UPDATE tasks SET record = json_set(record, '$.state.progressed', json(?)) WHERE id = ?", stamps[at]!, id);
      });
      const image = await seeded.exportImage();

      const storage = await openSqliteStorage({ vfs: "memory", image });
      const reopened = await openHarness(storage, {
        registry: createRegistry().install(defineExtension({ name: "test", tasks: [stall] })),
      });
      await runUntil(reopened.clock, () => !storage.owesRestarts);
      const mirror = new Map((await reopened.harness.inspect(ctx)).tasks.map((task) => [task.record.id, task.record]));
      const rows = await storage.query(`SELECT id, record FROM tasks WHERE id IN (${ids.join(",")}) ORDER BY id`);
      const kept = [7, -5, 9007199254740991, undefined, undefined, undefined, 1000, undefined, undefined, undefined, undefined, undefined];
      rows.forEach((row, at) => {
        const record = mirror.get(Number(row.id))!;
        expect(record.state).toEqual({
          status: "pending",
          checkpoint: { phase: "step", n: 1 },
          ...(kept[at] === undefined ? {} : { progressed: kept[at] }),
        });
        expect(record.restarts).toBe(1);
        expect(row.record).toBe(JSON.stringify(record));
      });
      await reopened.harness.close(ctx);
    },
  );
});

describe("a commit of the same state is not progress (decision 0112, S6)", () => {
  it("S4, S6: after a crash, a commit of the state the task already has keeps its restarts and the stamp of its last progress; the next new state clears the count and is stamped later", async () => {
    let release: () => void = () => {};
    const held = () => new Promise<void>((resolve) => void (release = resolve));
    const committed: string[] = [];
    const repeater = defineTask<null, { phase: "a"; n: number }, null>({
      name: "test.repeater",
      version: 1,
      initial: () => ({ phase: "a", n: 0 }),
      phases: {
        a: async (task, runtime, context) => {
          const n = Math.max(task.state.checkpoint.n, 1);
          await runtime.commit(() => ({ status: "running", checkpoint: { phase: "a", n } }), context);
          committed.push(`same ${n}`);
          await held();
          await runtime.commit(() => ({ status: "running", checkpoint: { phase: "a", n: n + 1 } }), context);
          committed.push(`next ${n + 1}`);
          await runtime.untilAborted();
          throw new Error("stopped");
        },
      },
      abort: async () => {},
    });
    const repeaterRegistry = () => createRegistry().install(defineExtension({ name: "test", tasks: [repeater] }));
    const seeded = await openSqliteStorage({ vfs: "memory" });
    const first = await openHarness(seeded, { registry: repeaterRegistry() });
    const id = await (await first.harness.root(ctx)).commit((tx) => tx.createTask(repeater, null), ctx);
    first.harness.resume();
    await runUntil(first.clock, () => committed.length === 1); // {n: 1}: progress, stamped
    const stamped = (await first.harness.getTask(id, ctx))!;
    const stamp = (stamped.state as { progressed?: number }).progressed!;
    expect(stamp).toEqual(expect.any(Number));

    committed.length = 0;
    const storage = await openSqliteStorage({ vfs: "memory", image: await seeded.exportImage() }); // the crash
    const { harness, clock } = await openHarness(storage, { registry: repeaterRegistry(), resume: true });
    await runUntil(clock, () => committed.length === 1); // {n: 1} again: the same state
    const same = (await harness.getTask(id, ctx))!;
    expect(same.restarts).toBe(1);
    expect(same.state).toEqual({ status: "running", checkpoint: { phase: "a", n: 1 }, progressed: stamp });
    release();
    await runUntil(clock, () => committed.length === 2);
    const next = (await harness.getTask(id, ctx))!;
    expect(next.restarts).toBeUndefined();
    expect((next.state as { progressed?: number }).progressed).toBeGreaterThan(stamp);
    await harness.close(ctx);
  });
});

describe("what is not progress keeps the stamp; only the first pass ranks by it (decision 0112)", () => {
  it("S4, S6: a start, a close and a person's wake keep the stamp of the task's last step (each a transition alone)", () => {
    const stamped = (state: TaskRecord["state"]): TaskRecord =>
      ({ id: 7, kind: "test.stepper", version: 1, input: null, state, createdAt: 1 }) as unknown as TaskRecord;
    const put: TaskRecord[] = [];
    const sleeping = stamped({ status: "sleeping", checkpoint: { phase: "approval" }, progressed: 41 } as TaskRecord["state"]);
    const running = stamped({ status: "running", checkpoint: { phase: "step" }, progressed: 42 } as TaskRecord["state"]);
    const pending = stamped({ status: "pending", checkpoint: { phase: "step" }, progressed: 43 } as TaskRecord["state"]);
    const tx = {
      task: (id: number) => (id === 7 ? sleeping : undefined),
      liveTasks: () => [running],
      putTask: (record: TaskRecord) => void put.push(record),
    } as unknown as KernelTx;
    take(tx, pending, pending, { phase: "step" }, 5);
    parkRunning(tx, new Set());
    expect(wakeSleeper(tx, 7, "approval")).toBe(true);
    expect(put.map((record) => record.state)).toEqual([
      { status: "running", checkpoint: { phase: "step" }, progressed: 43 },
      { status: "pending", checkpoint: { phase: "step" }, progressed: 42 },
      { status: "pending", checkpoint: { phase: "approval" }, progressed: 41 },
    ]);
  });

  it("S4, S6: a task started after a crash that has not stepped again keeps its stamp, so at the next crash (every count 2) it starts first again", async () => {
    begun.length = 0;
    steps.length = 0;
    /** Steps once, the first time it runs; after that it only holds. */
    const once = defineTask<null, { phase: "step"; n: number }, null>({
      name: "test.once",
      version: 1,
      initial: () => ({ phase: "step", n: 0 }),
      phases: {
        step: async (task, runtime, context) => {
          begun.push(task.id);
          if (task.state.checkpoint.n === 0) {
            await runtime.commit(() => ({ status: "running", checkpoint: { phase: "step", n: 1 } }), context);
            steps.push({ id: task.id, begunBefore: 0 });
          }
          await runtime.untilAborted();
          throw new Error("stopped");
        },
      },
      abort: async () => {},
    });
    const onceRegistry = () => createRegistry().install(defineExtension({ name: "test", tasks: [stall, once] }));
    const seeded = await openSqliteStorage({ vfs: "memory" });
    const first = await openHarness(seeded, { registry: onceRegistry() });
    const root = await first.harness.root(ctx);
    await root.commit((tx) => {
      for (let index = 0; index < 600; index++) tx.createTask(stall, null);
    }, ctx);
    const hot = await root.commit((tx) => tx.createTask(once, null), ctx);
    first.harness.resume();
    await runUntil(first.clock, () => steps.length === 1 && begun.length === 601);
    const stamp = async (storage: { query(sql: string): Promise<Array<Record<string, unknown>>> }) =>
      (
        await storage.query(
          `SELECT status, record ->> '$.state.progressed' AS p, record ->> '$.restarts' AS r FROM tasks WHERE id = ${hot}`,
        )
      )[0];
    const stepped = (await stamp(seeded))!.p as number;
    expect(stepped).toEqual(expect.any(Number));

    // The first crash; the reopen makes every task pending (restarts 1) and starts them all: the hot one does not step.
    begun.length = 0;
    const again = await openSqliteStorage({ vfs: "memory", image: await seeded.exportImage() });
    const second = await openHarness(again, { registry: onceRegistry(), settings: { restartLimit: 10 } });
    second.harness.resume();
    await runUntil(second.clock, () => begun.length === 601 && !again.owesRestarts);
    expect(begun[0]).toBe(hot);
    expect(await stamp(again)).toEqual({ status: "running", p: stepped, r: 1 });

    // The second crash: every count 2, the started hot task's stamp kept, so it starts first again.
    begun.length = 0;
    const third = await openSqliteStorage({ vfs: "memory", image: await again.exportImage() });
    const reopened = await openHarness(third, { registry: onceRegistry(), resume: true, settings: { restartLimit: 10 } });
    await runUntil(reopened.clock, () => begun.length === 601);
    expect(begun[0]).toBe(hot);
    expect(steps).toHaveLength(1);
    await reopened.harness.close(ctx);
  });

  it("0109, S4: a later pass with no rest and equal counts starts its candidates by id, not by stamp (two sleepers due together: the one stamped later has the larger id)", async () => {
    const woke: number[] = [];
    const sleeper = defineTask<null, { phase: "sleep" } | { phase: "woke" }, null>({
      name: "test.sleeper",
      version: 1,
      initial: () => ({ phase: "sleep" }),
      phases: {
        sleep: async (_task, runtime, context) => {
          await runtime.commit(() => ({ status: "sleeping", until: 1_000_000_000, checkpoint: { phase: "woke" } }), context);
        },
        woke: async (task, runtime) => {
          woke.push(task.id);
          await runtime.untilAborted();
          throw new Error("stopped");
        },
      },
      abort: async () => {},
    });
    const storage = await openSqliteStorage({ vfs: "memory" });
    const { harness, clock } = await openHarness(storage, {
      registry: createRegistry().install(defineExtension({ name: "test", tasks: [sleeper] })),
    });
    const root = await harness.root(ctx);
    harness.resume();
    // No clock moves until both sleep (a move could wake the first alone).
    const asleep = async (id: number) => {
      for (let round = 0; round < 200 && (await harness.getTask(id, ctx))!.state.status !== "sleeping"; round++) await flush(2);
      expect((await harness.getTask(id, ctx))!.state.status).toBe("sleeping");
    };
    const low = await root.commit((tx) => tx.createTask(sleeper, null), ctx);
    await asleep(low);
    const high = await root.commit((tx) => tx.createTask(sleeper, null), ctx);
    await asleep(high);
    const progressOf = async (id: number) => ((await harness.getTask(id, ctx))!.state as { progressed: number }).progressed;
    expect(await progressOf(high)).toBeGreaterThan(await progressOf(low));
    clock.advance(1_000_000_000);
    await runUntil(clock, () => woke.length === 2);
    expect(woke).toEqual([low, high]);
    await harness.close(ctx);
  });
});

describe("byProgress (decision 0112)", () => {
  it("orders ascending ids by (restarts, −progressed with absent last, id), and returns the same list when every key is equal", () => {
    const count = fc.oneof(fc.constant(undefined), fc.nat(3), fc.constant(Number.NaN), fc.constant("2"));
    const stamp = fc.oneof(
      fc.constant(undefined),
      fc.integer({ min: -3, max: 5 }),
      fc.constantFrom(Number.MAX_SAFE_INTEGER, -0, 1.5, 2 ** 60, Number.NaN, Number.POSITIVE_INFINITY, null, "4"),
    );
    fc.assert(
      fc.property(
        fc.uniqueArray(fc.integer({ min: 1, max: 2 ** 40 }), { maxLength: 60 }),
        fc.array(fc.tuple(count, stamp), { minLength: 60, maxLength: 60 }),
        (unsorted, keys) => {
          const ids = [...unsorted].sort((a, b) => a - b);
          const records = new Map(
            ids.map((id, at) => {
              const [restarts, progressed] = keys[at]!;
              return [id, { id, restarts, state: { status: "running", checkpoint: { phase: "p" }, progressed } } as unknown as TaskRecord];
            }),
          );
          const tx = { task: (id: number) => records.get(id) } as unknown as KernelTx;
          const restartsOf = (id: number) => {
            const value = records.get(id)!.restarts as unknown;
            return typeof value === "number" && Number.isFinite(value) ? value : 0;
          };
          const stampOf = (id: number) => {
            const value = (records.get(id)!.state as { progressed?: unknown }).progressed;
            return typeof value === "number" && Number.isSafeInteger(value) ? value : undefined;
          };
          const expected = [...ids].sort((a, b) => {
            const sa = stampOf(a);
            const sb = stampOf(b);
            if (restartsOf(a) !== restartsOf(b)) return restartsOf(a) - restartsOf(b);
            if (sa !== sb) return sa === undefined ? 1 : sb === undefined ? -1 : sb - sa;
            return a - b;
          });
          const ordered = byProgress(tx, ids);
          expect(ordered).toEqual(expected);
          if (new Set(ids.map((id) => `${restartsOf(id)}/${stampOf(id)}`)).size <= 1) expect(ordered).toBe(ids);
        },
      ),
      { numRuns: 200, seed: 112 },
    );
  });
});
