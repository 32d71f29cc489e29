import fc from "fast-check";
import { describe, expect, it } from "vitest";
import { counterTask } from "../examples/counter-task.ts";
import { waitFor } from "../src/base/context.ts";
import { type LeaseArbiter, memoryArbiter } from "../src/follow/arbiter.ts";
import {
  type Batch,
  createRegistry,
  DurableError,
  defineExtension,
  defineTask,
  HarnessClosed,
  LeaseNotHeld,
  ReadOnlySession,
  StaleEpoch,
  type Storage,
} from "../src/index.ts";
import type { LogMark } from "../src/storage/records.ts";
import type { SqliteStorage } from "../src/storage/sqlite/storage.ts";
import { createManualClock } from "../src/testing/clock.ts";
import { backends, ctx, flush, openHarness, runUntil, sqliteMemoryBackend } from "./support.ts";

/** A task that commits `steps` running checkpoints, then completes: one groupable commit per step. */
const stepper = defineTask<{ steps: number }, { phase: "step"; n: number }, number>({
  name: "test.stepper",
  version: 1,
  initial: () => ({ phase: "step", n: 0 }),
  phases: {
    step: async (task, runtime, context) => {
      const n = task.state.checkpoint.n + 1;
      await runtime.commit(
        () =>
          n < task.input.steps
            ? { status: "running", checkpoint: { phase: "step", n } }
            : { status: "terminal", outcome: { status: "completed", result: n } },
        context,
      );
    },
  },
  abort: async (_task, runtime, context) => {
    await runtime.commit(() => ({ status: "terminal", outcome: { status: "aborted" } }), context);
  },
});

/** A task whose phase runs until it is signalled: it is `running` whenever its place stops. */
const waiter = defineTask<null, { phase: "wait" }, null>({
  name: "test.waiter",
  version: 1,
  initial: () => ({ phase: "wait" }),
  phases: { wait: (_task, _runtime, context) => waitFor(new Promise<never>(() => {}), context) },
  abort: async (_task, runtime, context) => {
    await runtime.commit(() => ({ status: "terminal", outcome: { status: "aborted" } }), context);
  },
});

/** Gates the `test.slow` phase: an external effect in flight that does not stop when it is signalled. */
let slowGate: Promise<void> = Promise.resolve();
/** A task whose phase awaits `slowGate` whatever its signal says, then commits its next checkpoint. */
const slow = defineTask<null, { phase: "effect" | "after" }, null>({
  name: "test.slow",
  version: 1,
  initial: () => ({ phase: "effect" }),
  phases: {
    effect: async (_task, runtime, context) => {
      await slowGate;
      await runtime.commit(() => ({ status: "running", checkpoint: { phase: "after" } }), context);
    },
    after: (_task, _runtime, context) => waitFor(new Promise<never>(() => {}), context),
  },
  abort: async (_task, runtime, context) => {
    await runtime.commit(() => ({ status: "terminal", outcome: { status: "aborted" } }), context);
  },
});

const registry = () => createRegistry().install(defineExtension({ name: "test", tasks: [stepper, waiter, slow, counterTask(() => {})] }));

async function epochsOf(storage: Storage): Promise<unknown> {
  return (storage as SqliteStorage).query("SELECT epoch, start FROM pi_durable_epochs ORDER BY epoch");
}

for (const backend of backends) {
  describe(`the fenced log (decision 0029) on ${backend.name}`, () => {
    it("each transaction under a lease gets the next position and the lease's epoch, stored with it; a group shares one position", async () => {
      const storage = await backend.create();
      const clock = createManualClock(1_000);
      const arbiter = memoryArbiter({ clock });
      const { harness } = await openHarness(storage, { registry: registry(), clock, lease: { place: "tab", arbiter } });
      const logged: LogMark[] = [];
      let commits = 0;
      harness.onLog((batch) => logged.push(batch.fence));
      harness.onCommit(() => void commits++);
      const root = await harness.root(ctx);
      const ids = await root.commit((tx) => Array.from({ length: 20 }, () => tx.createTask(stepper, { steps: 4 })), ctx);
      harness.resume();
      await runUntil(clock, () => harness.quiet);
      for (const id of ids) expect((await harness.getTask(id, ctx))?.state.status).toBe("terminal");
      // Positions are contiguous from the first transaction of the lease; every one carries epoch 1.
      expect(logged.map((mark) => mark.position)).toEqual(logged.map((_, index) => harness.lease!.position - logged.length + index + 1));
      expect(new Set(logged.map((mark) => mark.epoch))).toEqual(new Set([1]));
      // 20 tasks stepping together: their commits went in groups, one position per transaction.
      expect(logged.length).toBeLessThan(commits);
      expect((await storage.load()).log).toEqual({ epoch: 1, position: harness.lease!.position });
      if (backend === sqliteMemoryBackend) expect(await epochsOf(storage)).toEqual([{ epoch: 1, start: 1 }]);
      await harness.close(ctx);
    });

    it("one place alone: without a lease no transaction carries a position and no log is stored (as before)", async () => {
      const storage = await backend.create();
      const { harness, clock } = await openHarness(storage, { registry: registry() });
      const batches: Batch[] = [];
      harness.onCommit(({ batch }) => void batches.push(batch));
      harness.onLog(() => {
        throw new Error("a harness without a lease has no log");
      });
      const root = await harness.root(ctx);
      await root.commit((tx) => tx.createTask(stepper, { steps: 3 }), ctx);
      harness.resume();
      await runUntil(clock, () => harness.quiet);
      expect(batches.length).toBeGreaterThan(3);
      expect(batches.filter((batch) => batch.fence !== undefined)).toEqual([]);
      expect(harness.lease).toBeUndefined();
      expect((await storage.load()).log).toBeUndefined();
      if (backend === sqliteMemoryBackend) expect(await epochsOf(storage)).toEqual([]);
    });

    it("S5: a place that does not hold the lease opens read-only, and writes nothing", async () => {
      const storage = await backend.create();
      const clock = createManualClock(1_000);
      const arbiter = memoryArbiter({ clock, record: { epoch: 4, holder: "object", expiresAt: 60_000 } });
      const { harness } = await openHarness(storage, { registry: registry(), clock, lease: { place: "tab", arbiter } });
      expect(harness.readOnly).toBe(true);
      expect(harness.lease).toBeUndefined();
      expect(() => harness.resume()).toThrow(ReadOnlySession);
      await expect(harness.root(ctx)).rejects.toThrow(ReadOnlySession);
      expect(arbiter.record).toEqual({ epoch: 4, holder: "object", expiresAt: 60_000 });
      // `resume: true` does not make it run: it follows (before, the open threw ReadOnlySession).
      const resumed = await openHarness(await backend.create(), {
        registry: registry(),
        clock,
        resume: true,
        lease: { place: "tab", arbiter },
      });
      expect(resumed.harness.readOnly).toBe(true);
      expect((await resumed.harness.inspect(ctx)).scheduling).toBe("read-only");
    });

    it("a lease renewed on the harness clock keeps the place writing; once it expires unrenewed, the next commit is refused and the place stops", async () => {
      const storage = await backend.create();
      const clock = createManualClock(1_000);
      const book = memoryArbiter({ clock, ttlMs: 3_000 });
      let reachable = true;
      const arbiter: LeaseArbiter = {
        acquire: (place, head) => book.acquire(place, head),
        renew: (place, epoch) => (reachable ? book.renew(place, epoch) : Promise.reject(new DurableError("the link is down"))),
        release: (place, epoch, position) => book.release(place, epoch, position),
      };
      const { harness, reports } = await openHarness(storage, { registry: registry(), clock, lease: { place: "tab", arbiter } });
      const root = await harness.root(ctx);
      for (let second = 0; second < 20; second++) {
        clock.advance(1_000); // renewed every second on the harness clock: still held
        await flush(1);
      }
      await root.commit((tx) => tx.createTask(stepper, { steps: 2 }), ctx);
      const held = harness.lease!.position;
      reachable = false;
      clock.advance(3_000); // no renewal reached the arbiter: expired on this place's clock
      await expect(root.commit((tx) => tx.createTask(stepper, { steps: 2 }), ctx)).rejects.toThrow(LeaseNotHeld);
      await runUntil(clock, () => harness.closed);
      expect((await storage.load()).log?.position).toBe(held);
      expect(reports.some((report) => report.kind === "error" && report.error instanceof LeaseNotHeld)).toBe(true);
    });

    it("a commit of a stale epoch is refused wherever it arrives: the new holder's copy, the arbiter, and the old place itself", async () => {
      const clock = createManualClock(1_000);
      const book = memoryArbiter({ clock, ttlMs: 3_000 });
      let reachable = true;
      const arbiter: LeaseArbiter = {
        acquire: (place, head) => book.acquire(place, head),
        renew: (place, epoch) => (reachable ? book.renew(place, epoch) : Promise.reject(new DurableError("the link is down"))),
        release: (place, epoch, position) => book.release(place, epoch, position),
      };
      const tabStorage = await backend.create();
      const tab = await openHarness(tabStorage, { registry: registry(), clock, lease: { place: "tab", arbiter } });
      const pushed: Array<Batch & { fence: LogMark }> = [];
      tab.harness.onLog((batch) => pushed.push(structuredClone(batch)));
      const root = await tab.harness.root(ctx);
      // The object's copy holds everything the tab pushed so far.
      const objectStorage = await backend.fromImage(await tabStorage.exportImage());
      const copied = tab.harness.lease!.position;
      reachable = false;
      clock.advance(3_000); // the tab's lease runs out on the arbiter's clock (the same clock here)
      const object = await openHarness(objectStorage, { registry: registry(), clock, lease: { place: "object", arbiter } });
      expect(object.harness.lease).toEqual({ place: "object", epoch: 2, position: expect.any(Number) });
      await object.harness.root(ctx); // writes under epoch 2
      // The tab, unaware, pushes a commit it made before it noticed: epoch 1 at the next position.
      const late: Batch = { ...structuredClone(pushed.at(-1)!), fence: { epoch: 1, position: object.harness.lease!.position + 1 } };
      await expect(objectStorage.apply(late)).rejects.toThrow(StaleEpoch);
      await expect(book.renew("tab", 1)).rejects.toThrow(StaleEpoch);
      // The tab stopped by itself at its first renewal after the expiry (decision 0032: not only at its next
      // commit), reporting why; whatever it still tries to commit is refused.
      expect(tab.harness.closed).toBe(true);
      expect(tab.reports.some((report) => report.kind === "error" && report.error instanceof LeaseNotHeld)).toBe(true);
      await expect(async () => root.commit((tx) => tx.createTask(stepper, { steps: 1 }), ctx)).rejects.toThrow(HarnessClosed);
      if (backend === sqliteMemoryBackend) {
        expect(await epochsOf(objectStorage)).toEqual([
          { epoch: 1, start: 1 },
          { epoch: 2, start: copied + 1 },
        ]);
      }
      await object.harness.close(ctx);
    });
  });
}

describe("hand-over at a position (decision 0029)", () => {
  it("handOver stops the place, writes nothing more and returns the head; tasks that ran stay running for the next holder to count", async () => {
    const storage = await sqliteMemoryBackend.create();
    const clock = createManualClock(1_000);
    const arbiter = memoryArbiter({ clock });
    const { harness } = await openHarness(storage, { registry: registry(), clock, lease: { place: "tab", arbiter } });
    const root = await harness.root(ctx);
    const id = await root.commit((tx) => tx.createTask(waiter, null), ctx);
    harness.resume();
    await runUntil(clock, () => harness.inspect(ctx).then((i) => i.tasks.some((t) => t.record.state.status === "running")));
    const mark = await harness.handOver(ctx);
    expect(mark).toEqual({ epoch: 1, position: (await storage.load()).log!.position });
    expect(harness.closed).toBe(true);
    await arbiter.release("tab", mark.epoch, mark.position, "object");
    // Handed to the object: no other place may take the lease in between, not even the tab that released it.
    await expect(arbiter.acquire("tab", mark.position)).rejects.toThrow(LeaseNotHeld);
    const next = await openHarness(await sqliteMemoryBackend.fromImage(await storage.exportImage()), {
      registry: registry(),
      clock,
      lease: { place: "object", arbiter },
    });
    expect(next.harness.lease?.epoch).toBe(2);
    expect(next.harness.recovery.stop).toBe("crash");
    expect(next.harness.recovery.tasks.map((task) => task.id)).toEqual([id]);
    await next.harness.close(ctx);
  });

  it("handOver without draining (a tab at pagehide, decision 0035) gives up at once at the head: the phase still in its effect is not joined, its later commit is refused, and the next holder counts its restart (S4)", async () => {
    const storage = await sqliteMemoryBackend.create();
    const clock = createManualClock(1_000);
    const arbiter = memoryArbiter({ clock });
    const { harness } = await openHarness(storage, { registry: registry(), clock, lease: { place: "tab", arbiter } });
    let release!: () => void;
    slowGate = new Promise<void>((resolve) => (release = resolve));
    const root = await harness.root(ctx);
    const id = await root.commit((tx) => tx.createTask(slow, null), ctx);
    harness.resume();
    await runUntil(clock, () => harness.inspect(ctx).then((i) => i.tasks.some((t) => t.record.state.status === "running")));
    // The clock stands still: a drain would wait closeTimeoutMs for the phase, and never resolve here.
    const mark = await harness.handOver(ctx, { drain: false });
    expect(mark).toEqual({ epoch: 1, position: (await storage.load()).log!.position });
    release();
    await flush();
    await runUntil(clock, () => harness.closed);
    // What the phase committed after the hand-over was refused: the log's head is still the mark, the task still running.
    expect((await storage.load()).log!.position).toBe(mark.position);
    const stored = (await storage.load()).liveTasks.find((task) => task.id === id);
    expect(stored?.state).toMatchObject({ status: "running", checkpoint: { phase: "effect" } });
    await arbiter.release("tab", mark.epoch, mark.position, "object");
    const next = await openHarness(await sqliteMemoryBackend.fromImage(await storage.exportImage()), {
      registry: registry(),
      clock,
      lease: { place: "object", arbiter },
    });
    expect(next.harness.recovery.tasks).toEqual([{ id, kind: "test.slow", restarts: 1 }]);
    await next.harness.close(ctx);
  });

  it("property: whenever a hand-over without draining comes among grouped commits, nothing is stored after the position it returns, and that position is the stored head", async () => {
    await fc.assert(
      fc.asyncProperty(fc.integer({ min: 1, max: 8 }), fc.integer({ min: 0, max: 12 }), async (tasks, rounds) => {
        const storage = await sqliteMemoryBackend.create();
        const clock = createManualClock(1_000);
        const { harness } = await openHarness(storage, {
          registry: registry(),
          clock,
          lease: { place: "tab", arbiter: memoryArbiter({ clock }) },
        });
        const root = await harness.root(ctx);
        await root.commit((tx) => Array.from({ length: tasks }, () => tx.createTask(stepper, { steps: 1_000 })), ctx);
        harness.resume();
        for (let round = 0; round < rounds; round++) await flush(1);
        const mark = await harness.handOver(ctx, { drain: false });
        await runUntil(clock, () => harness.closed);
        expect((await storage.load()).log).toEqual(mark);
      }),
      { numRuns: 25 },
    );
  });
});
