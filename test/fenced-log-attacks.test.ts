import { describe, expect, it } from "vitest";
import { waitFor } from "../src/base/context.ts";
import { type LeaseArbiter, memoryArbiter } from "../src/follow/arbiter.ts";
import {
  type Batch,
  createRegistry,
  DEFAULT_SETTINGS,
  DurableError,
  defineExtension,
  defineTask,
  InvalidInput,
  LeaseNotHeld,
  MemoryStorage,
  StaleEpoch,
} from "../src/index.ts";
import { Fence } from "../src/session/fence.ts";
import { Session } from "../src/session/session.ts";
import { createManualClock } from "../src/testing/clock.ts";
import { backends, ctx, flush, openHarness, runUntil } from "./support.ts";

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

// Review of decision 0029's fenced log: every stored transaction of a log is in it, and no epoch is written by
// two leases.

for (const backend of backends) {
  describe(`the fenced log at open on ${backend.name}`, () => {
    it("S5: a database with a log opened writable without a lease is refused (its writes would be missing from the log a hand-over pushes); read-only it opens", async () => {
      const storage = await backend.create();
      const clock = createManualClock(1_000);
      const fenced = await openHarness(storage, {
        registry: createRegistry(),
        clock,
        lease: { place: "tab", arbiter: memoryArbiter({ clock }) },
      });
      await (await fenced.harness.root(ctx)).commit((tx) => tx.setDocument("notes", "a", 1), ctx);
      await fenced.harness.close(ctx);
      const log = (await storage.load()).log;
      expect(log).toEqual({ epoch: 1, position: expect.any(Number) });

      const reopened = await backend.fromImage(await storage.exportImage());
      await expect(openHarness(reopened, { registry: createRegistry(), clock })).rejects.toThrow(LeaseNotHeld);
      expect((await reopened.load()).log).toEqual(log);
      expect(await reopened.readLog!(0, 1_000)).toHaveLength(log!.position);
      const reader = await openHarness(reopened, { registry: createRegistry(), clock, readOnly: true });
      expect(reader.harness.readOnly).toBe(true);
      await reader.harness.close(ctx);
    });

    it("S4: close() after the lease expired unnoticed (renewals unreachable) with a task running resolves, writes nothing, and leaves the task running for the next holder to count", async () => {
      const storage = await backend.create();
      const clock = createManualClock(1_000);
      const book = memoryArbiter({ clock, ttlMs: 3_000 });
      const arbiter: LeaseArbiter = {
        acquire: (place, head) => book.acquire(place, head),
        renew: () => Promise.reject(new DurableError("the link is down")),
        release: (place, epoch, position) => book.release(place, epoch, position),
      };
      const registry = createRegistry().install(defineExtension({ name: "test", tasks: [waiter] }));
      const { harness } = await openHarness(storage, { registry, clock, lease: { place: "tab", arbiter } });
      const id = await (await harness.root(ctx)).commit((tx) => tx.createTask(waiter, null), ctx);
      harness.resume();
      await runUntil(clock, async () => (await storage.getTask(id))?.state.status === "running");
      const log = (await storage.load()).log;
      clock.advance(3_000);
      await flush(2);
      await expect(harness.close(ctx)).resolves.toBeUndefined();
      expect((await storage.load()).log).toEqual(log);
      expect((await storage.getTask(id))?.state.status).toBe("running");
    });

    it("S11: an arbiter that grants an epoch the copy already holds (its record was lost) is refused at open: an epoch is never written under two leases", async () => {
      const storage = await backend.create();
      const clock = createManualClock(1_000);
      const first = await openHarness(storage, {
        registry: createRegistry(),
        clock,
        lease: { place: "tab", arbiter: memoryArbiter({ clock }) },
      });
      await (await first.harness.root(ctx)).commit((tx) => tx.setDocument("notes", "a", 1), ctx);
      await first.harness.close(ctx);
      const log = (await storage.load()).log;
      // A new arbiter that forgot its record mints epoch 1 again.
      const forgetful = memoryArbiter({ clock });
      await expect(
        openHarness(storage, { registry: createRegistry(), clock, lease: { place: "object", arbiter: forgetful } }),
      ).rejects.toThrow(StaleEpoch);
      expect((await storage.load()).log).toEqual(log);
    });
  });
}

describe("a group under a lease where one commit fails (decisions 0026, 0029)", () => {
  it("S3: the refused commit fails alone and takes no position; the others are stored at contiguous positions, the fence's head is storage's", async () => {
    const storage = new MemoryStorage({ maxRowBytes: 2_000 });
    const apply = storage.apply.bind(storage);
    let gate: Promise<void> | undefined;
    storage.apply = async (batch: Batch) => {
      if (gate) await gate;
      return apply(batch);
    };
    const clock = createManualClock(1_000);
    const session = await Session.open(storage, clock, false, DEFAULT_SETTINGS.limits, async (head) => new Fence("tab", 1, head, Infinity));
    await session.commit((tx) => tx.setDocument("test", "first", 1));
    let open!: () => void;
    gate = new Promise<void>((resolve) => (open = resolve));
    const held = session.commit((tx) => tx.setDocument("test", "held", 1), undefined, { group: true });
    await flush(1);
    const before = session.commit((tx) => tx.setDocument("test", "before", 1), undefined, { group: true });
    const large = session.commit((tx) => tx.setDocument("test", "large", "x".repeat(3_000)), undefined, { group: true });
    const after = session.commit((tx) => tx.setDocument("test", "after", 1), undefined, { group: true });
    gate = undefined;
    open();
    await Promise.all([held, before, after]);
    await expect(large).rejects.toThrow(InvalidInput);
    const log = await storage.readLog(0, 100);
    expect(log.map((batch) => batch.fence.position)).toEqual(log.map((_, index) => index + 1));
    expect(log.flatMap((batch) => batch.documents.map((document) => document.key))).toEqual(["first", "held", "before", "after"]);
    expect((await storage.load()).log).toEqual(session.fence!.mark);
    await session.commit((tx) => tx.setDocument("test", "next", 1));
    expect((await storage.load()).log).toEqual({ epoch: 1, position: log.length + 1 });
  });
});
