import { describe, expect, it } from "vitest";
import {
  type Batch,
  DEFAULT_SETTINGS,
  DurableError,
  defineExtension,
  defineTask,
  MemoryStorage,
  type Storage,
  StorageQuotaExceeded,
} from "../src/index.ts";
import { GROUP_LIMIT, Session } from "../src/session/session.ts";
import { isStorageFailure } from "../src/session/storage-failure.ts";
import type { KernelTx } from "../src/session/tx.ts";
import { createManualClock } from "../src/testing/clock.ts";
import { ctx, flush, holdApplies, openHarness, runUntil } from "./support.ts";

/**
 * A MemoryStorage whose `apply` is counted, can be held (the transaction in flight) and can refuse (quota).
 * Every other method is the storage's own.
 */
function recording(): MemoryStorage & { batches: Batch[]; hold(): () => void; refuseNext(times?: number): void } {
  const base = new MemoryStorage() as MemoryStorage & { batches: Batch[] };
  const apply = base.apply.bind(base);
  base.batches = [];
  base.apply = async (batch: Batch) => {
    base.batches.push(structuredClone(batch));
    return apply(batch);
  };
  // A refusal is decided before the hold; a batch is recorded once the hold lets it through.
  const storage = holdApplies(base) as MemoryStorage & { batches: Batch[]; hold(): () => void; refuseNext(times?: number): void };
  const held = storage.apply.bind(storage);
  let refusals = 0;
  storage.refuseNext = (times = 1) => void (refusals = times);
  storage.apply = async (batch: Batch) => {
    if (refusals > 0) {
      refusals--;
      throw new StorageQuotaExceeded("The origin's storage quota is exhausted.");
    }
    return held(batch);
  };
  return storage;
}

const COUNTER = { scope: "test", key: "counter" } as const;
const count = (tx: KernelTx) => (tx.document(COUNTER.scope, COUNTER.key) as number | undefined) ?? 0;
const increment = (tx: KernelTx) => {
  const next = count(tx) + 1;
  tx.setDocument(COUNTER.scope, COUNTER.key, next);
  return next;
};

async function session(storage: Storage = recording()) {
  return Session.open(storage, createManualClock(1_000), false, DEFAULT_SETTINGS.limits);
}

describe("group commit (decision 0026): commits ready in the same turn share one transaction", () => {
  it("a lone commit goes at once, alone; the commits that became ready while it was stored go together next", async () => {
    const storage = recording();
    const s = await session(storage);
    const release = storage.hold();
    const first = s.commit(increment, undefined, { group: true });
    await flush(1);
    // The first commit found the line idle and is in its transaction now, alone.
    expect(s.documents.size).toBe(0);
    const rest = Array.from({ length: 5 }, () => s.commit(increment, undefined, { group: true }));
    release();
    expect(await first).toBe(1);
    expect(await Promise.all(rest)).toEqual([2, 3, 4, 5, 6]);
    expect(storage.batches.map((batch) => batch.documents.length)).toEqual([1, 1]);
    expect(storage.batches[1]!.documents[0]!.value).toBe(6);
    expect(await storage.getDocument(COUNTER.scope, COUNTER.key)).toBe(6);
  });

  it("nothing of a group is shown before its transaction is stored: the mirror, listeners and results wait for it", async () => {
    const storage = recording();
    const s = await session(storage);
    const heard: number[] = [];
    s.subscribe(({ batch }) => heard.push(batch.documents.length));
    const release = storage.hold();
    const settled: number[] = [];
    const commits = Array.from({ length: 3 }, () => s.commit(increment, undefined, { group: true }).then((n) => settled.push(n)));
    await flush(3);
    expect(s.documents.size).toBe(0);
    expect(heard).toEqual([]);
    expect(settled).toEqual([]);
    release();
    await Promise.all(commits);
    expect(settled).toEqual([1, 2, 3]);
    // Listeners hear each commit of the group on its own, in order.
    expect(heard).toEqual([1, 1, 1]);
    expect(storage.batches).toHaveLength(1);
  });

  it("a commit whose callback or checks fail fails alone and stages nothing; the next one builds on the ones that passed", async () => {
    const storage = recording();
    const s = await session(storage);
    const release = storage.hold();
    const lead = s.commit(increment, undefined, { group: true });
    await flush(1);
    const a = s.commit(increment, undefined, { group: true });
    const throwing = s.commit(
      (tx) => {
        increment(tx);
        throw new DurableError("the callback refuses");
      },
      undefined,
      { group: true },
    );
    const checked = s.commit(
      (tx) => {
        increment(tx);
        tx.check(async () => {
          throw new DurableError("the check refuses");
        });
      },
      undefined,
      { group: true },
    );
    const b = s.commit(increment, undefined, { group: true });
    release();
    expect(await lead).toBe(1);
    await expect(throwing).rejects.toThrow("the callback refuses");
    await expect(checked).rejects.toThrow("the check refuses");
    expect(await a).toBe(2);
    expect(await b).toBe(3);
    expect(storage.batches).toHaveLength(2);
    expect(await storage.getDocument(COUNTER.scope, COUNTER.key)).toBe(3);
    expect(s.documents.get(`${COUNTER.scope}\u0000${COUNTER.key}`)?.value).toBe(3);
  });

  it("a refused group is decided again one commit at a time: a refusal storage repeats refuses each commit alone and writes nothing; each is stored once when retried, one at a time first", async () => {
    const storage = recording();
    const s = await session(storage);
    const release = storage.hold();
    const lead = s.commit(increment, undefined, { group: true });
    await flush(1);
    storage.refuseNext(5); // the group's transaction, then each of its four commits alone
    const group = Array.from({ length: 4 }, () => s.commit(increment, undefined, { group: true }).catch((error: unknown) => error));
    release();
    expect(await lead).toBe(1);
    const errors = await Promise.all(group);
    expect(errors.every((error) => error instanceof StorageQuotaExceeded && isStorageFailure(error))).toBe(true);
    expect(s.documents.get(`${COUNTER.scope}\u0000${COUNTER.key}`)?.value).toBe(1);
    expect(await storage.getDocument(COUNTER.scope, COUNTER.key)).toBe(1);
    // The callers retry (as after any refusal). After a refused group the next turn stores its commits one at a
    // time (one of them may be what storage cannot take) until one is stored; then the rest go together again.
    let unblock!: () => void;
    const blocked = s.read(() => new Promise<void>((resolve) => (unblock = resolve)));
    const retries = Array.from({ length: 4 }, () => s.commit(increment, undefined, { group: true }));
    await flush(1);
    unblock();
    await blocked;
    expect(await Promise.all(retries)).toEqual([2, 3, 4, 5]);
    expect(storage.batches.map((batch) => batch.documents[0]!.value)).toEqual([1, 2, 5]);
    const release2 = storage.hold();
    const lead2 = s.commit(increment, undefined, { group: true });
    await flush(1);
    const grouped = Array.from({ length: 4 }, () => s.commit(increment, undefined, { group: true }));
    release2();
    expect(await Promise.all([lead2, ...grouped])).toEqual([6, 7, 8, 9, 10]);
    expect(storage.batches.map((batch) => batch.documents[0]!.value)).toEqual([1, 2, 5, 6, 10]);
    expect(await storage.getDocument(COUNTER.scope, COUNTER.key)).toBe(10);
  });

  it("a group storage refuses once is stored without a commit refused: its commits are decided again alone, each stored once", async () => {
    const storage = recording();
    const s = await session(storage);
    const release = storage.hold();
    const lead = s.commit(increment, undefined, { group: true });
    await flush(1);
    storage.refuseNext(1);
    const group = Array.from({ length: 4 }, () => s.commit(increment, undefined, { group: true }));
    release();
    expect(await Promise.all([lead, ...group])).toEqual([1, 2, 3, 4, 5]);
    // The first goes alone after the refusal; once one is stored, the rest go together again.
    expect(storage.batches.map((batch) => batch.documents[0]!.value)).toEqual([1, 2, 5]);
    expect(await storage.getDocument(COUNTER.scope, COUNTER.key)).toBe(5);
  });

  it("a commit that is not groupable keeps its place: groupable commits after it wait for it", async () => {
    const storage = recording();
    const s = await session(storage);
    const release = storage.hold();
    const order: string[] = [];
    const lead = s.commit(increment, undefined, { group: true });
    await flush(1);
    const a = s.commit((tx) => order.push(`a${increment(tx)}`), undefined, { group: true });
    const solo = s.commit((tx) => order.push(`solo${increment(tx)}`));
    const b = s.commit((tx) => order.push(`b${increment(tx)}`), undefined, { group: true });
    const read = s.read(() => order.push("read"));
    const c = s.commit((tx) => order.push(`c${increment(tx)}`), undefined, { group: true });
    release();
    await Promise.all([lead, a, solo, b, read, c]);
    expect(order).toEqual(["a2", "solo3", "b4", "read", "c5"]);
  });

  it(`a group carries at most ${GROUP_LIMIT} commits`, async () => {
    const storage = recording();
    const s = await session(storage);
    const release = storage.hold();
    const lead = s.commit(increment, undefined, { group: true });
    await flush(1);
    const rest = Array.from({ length: GROUP_LIMIT + 3 }, () => s.commit(increment, undefined, { group: true }));
    release();
    await Promise.all([lead, ...rest]);
    expect(storage.batches).toHaveLength(3);
    expect(await storage.getDocument(COUNTER.scope, COUNTER.key)).toBe(GROUP_LIMIT + 4);
  });
});

const stepper = defineTask<{ steps: number }, { phase: "step"; n: number }, number>({
  name: "test.stepper",
  version: 1,
  initial: () => ({ phase: "step", n: 0 }),
  phases: {
    step: async (task, runtime, context) => {
      const n = task.state.checkpoint.n + 1;
      await runtime.commit(
        () =>
          n >= task.input.steps
            ? { status: "terminal", outcome: { status: "completed", result: n } }
            : { status: "running", checkpoint: { phase: "step", n } },
        context,
      );
    },
  },
  abort: async () => {},
});

/** Writes two memos at once (not awaiting the first), then ends with both: two commits of one task in a group. */
const twoMemos = defineTask<Record<string, never>, { phase: "memo" }, string>({
  name: "test.two-memos",
  version: 1,
  initial: () => ({ phase: "memo" }),
  phases: {
    memo: async (_task, runtime, context) => {
      await Promise.all([runtime.memo("a", 1, context), runtime.memo("b", 2, context)]);
      const a = await runtime.memo("a", context);
      const b = await runtime.memo("b", context);
      await runtime.commit(() => ({ status: "terminal", outcome: { status: "completed", result: `${a},${b}` } }), context);
    },
  },
  abort: async () => {},
});

describe("group commit through tasks", () => {
  it("S3: parallel tasks step in far fewer transactions than steps, and each task's steps stay in order", async () => {
    const storage = recording();
    const registry = (await import("../src/index.ts")).createRegistry().install(defineExtension({ name: "t", tasks: [stepper] }));
    const { harness, clock } = await openHarness(storage, { registry });
    const root = await harness.root(ctx);
    const ids = await root.commit((tx) => Array.from({ length: 20 }, () => tx.createTask(stepper, { steps: 10 })), ctx);
    const before = storage.batches.length;
    harness.resume();
    const done = Promise.all(ids.map((id) => harness.waitForTask(id, ctx)));
    let finished = false;
    void done.then(() => (finished = true));
    await runUntil(clock, () => finished);
    const records = await done;
    expect(records.map((record) => record.state)).toEqual(
      ids.map(() => ({ status: "terminal", outcome: { status: "completed", result: 10 } })),
    );
    const transactions = storage.batches.length - before;
    expect(transactions).toBeLessThan(200 / 4);
    // Each task's checkpoints arrive in order, one step at a time.
    for (const id of ids) {
      const steps = storage.batches.flatMap((batch) => batch.tasks.filter((task) => task.id === id && task.state.status === "running"));
      const ns = steps.map((task) => (task.state as unknown as { checkpoint: { n: number } }).checkpoint.n).filter((n) => n > 0);
      expect(ns).toEqual([1, 2, 3, 4, 5, 6, 7, 8, 9]);
    }
    await harness.close(ctx);
  });

  it("S3: two commits of one task in the same group: the second sees the first (both memos kept)", async () => {
    const storage = recording();
    const registry = (await import("../src/index.ts")).createRegistry().install(defineExtension({ name: "t", tasks: [twoMemos] }));
    const { harness, clock } = await openHarness(storage, { registry });
    const root = await harness.root(ctx);
    const id = await root.commit((tx) => tx.createTask(twoMemos, {}), ctx);
    harness.resume();
    let record: Awaited<ReturnType<typeof harness.waitForTask>> | undefined;
    void harness.waitForTask(id, ctx).then((r) => (record = r));
    await runUntil(clock, () => record !== undefined);
    expect(record!.state).toEqual({ status: "terminal", outcome: { status: "completed", result: "1,2" } });
    expect(storage.batches.some((batch) => batch.tasks.some((task) => task.id === id && task.memos?.a === 1 && task.memos?.b === 2))).toBe(
      true,
    );
    await harness.close(ctx);
  });
});
