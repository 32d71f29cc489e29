import fc from "fast-check";
import { describe, expect, it } from "vitest";
import { counterTask } from "../examples/counter-task.ts";
import { memoryArbiter } from "../src/follow/arbiter.ts";
import { Arrival, Departure, type HandOverMessage } from "../src/follow/handover.ts";
import { createRegistry, defineExtension, Harness, type Storage } from "../src/index.ts";
import { openSqliteStorage } from "../src/storage/sqlite/open-storage.ts";
import type { SqliteStorage } from "../src/storage/sqlite/storage.ts";
import { createManualClock } from "../src/testing/clock.ts";
import { Link, type LinkAction } from "../src/testing/two-places/link.ts";
import { ctx, flush } from "./support.ts";

// Issue 27 item 3's core (decision 0029): the tab hands its lease to the object at a position, over a link that
// loses, duplicates and reorders; the object checks it holds the log up to there, takes the next epoch and
// recovers as after a crash, in one transaction. Both places are harnesses on sqlite-wasm in this process.

type Step = { pick: number; action: LinkAction };

async function handOverWorld(schedule: readonly Step[], options: { dropReleases?: boolean } = {}) {
  const clock = createManualClock(1_000);
  const arbiter = memoryArbiter({ clock, ttlMs: 5_000 });
  const link = new Link<HandOverMessage>();
  const printed: Array<[string, string]> = [];
  let leave: (() => void) | undefined;
  const registry = (place: string) =>
    createRegistry().install(
      defineExtension({
        name: "example",
        tasks: [
          counterTask((line) => {
            printed.push([place, line]);
            if (place === "tab" && line === "tick 2") queueMicrotask(() => leave?.());
          }),
        ],
      }),
    );
  const tabStorage = await openSqliteStorage({ vfs: "memory" });
  const objectStorage = await openSqliteStorage({ vfs: "memory" });
  const tab = await Harness.open(tabStorage, { registry: registry("tab"), clock, lease: { place: "tab", arbiter } }, ctx);
  const root = await tab.root(ctx);
  const taskId = await root.commit(
    (tx) =>
      tx.createTask(
        counterTask(() => {}),
        { to: 5 },
      ),
    ctx,
  );
  const object = await Arrival.start({
    place: "object",
    storage: objectStorage,
    arbiter,
    clock,
    send: (message) => link.send("tab", message),
    open: (storage: Storage, lease) => Harness.open(storage, { registry: registry("object"), clock, lease, resume: true }, ctx),
  });
  link.attach("object", (message) => object.receive(message));
  let departure: Departure | undefined;
  leave = () => {
    leave = undefined;
    void tab.handOver(ctx).then((mark) => {
      departure = new Departure({
        place: "tab",
        storage: tabStorage,
        mark,
        clock,
        send: (message) => {
          if (!(options.dropReleases && message.type === "release")) link.send("object", message);
        },
      });
      link.attach("tab", (message) => departure!.receive(message));
      return departure.start();
    });
  };
  tab.resume();
  let step = 0;
  for (let round = 0; round < 3_000; round++) {
    await flush(2);
    const harness = await object.harness;
    if (harness && (await harness.getTask(taskId, ctx))?.state.status === "terminal") break;
    // The schedule's turns first; then the network heals (everything in flight is delivered in order).
    const next = schedule[step++] ?? { pick: 0, action: "deliver" as const };
    if (!link.step(next.pick, next.action)) clock.next();
    await link.handled;
  }
  const harness = await object.harness!;
  return { clock, arbiter, printed, tab, tabStorage, objectStorage, harness, taskId, departure, link };
}

const epochs = (storage: SqliteStorage) => storage.query("SELECT epoch, start FROM pi_durable_epochs ORDER BY epoch");

describe("the hand-over in memory (issue 27 item 3, decision 0029)", () => {
  it("S4/S12: drain, push, release at P; the object holds 1..P, takes epoch 2 at P + 1 with the recovery (restarts counted), and counts on", async () => {
    const world = await handOverWorld([]);
    const { harness, taskId, printed } = world;
    expect((await harness.getTask(taskId, ctx))?.state).toEqual({
      status: "terminal",
      outcome: { status: "completed", result: "counted to 5" },
    });
    expect(printed).toEqual([
      ["tab", "tick 1"],
      ["tab", "tick 2"],
      ["object", "tick 3"],
      ["object", "tick 4"],
      ["object", "tick 5"],
    ]);
    expect(harness.recovery.stop).toBe("crash");
    expect(harness.recovery.tasks).toEqual([{ id: taskId, kind: "example.counter", restarts: 1 }]);
    const released = world.departure!;
    expect(released.done).toBe(true);
    const position = (await world.tabStorage.load()).log!.position;
    expect(await epochs(world.objectStorage)).toEqual([
      { epoch: 1, start: 1 },
      { epoch: 2, start: position + 1 },
    ]);
    expect(world.arbiter.record).toMatchObject({ epoch: 2, holder: "object" });
    // The tab's log tail was trimmed as the object acknowledged it; the tab wrote nothing after the hand-over.
    expect(await world.tabStorage.readLog(0, 100)).toEqual([]);
    expect(world.tab.closed).toBe(true);
    await harness.close(ctx);
  });

  it("a lost release is covered by the lease's expiry on the harness clock: the object takes over from what it holds", async () => {
    const world = await handOverWorld([], { dropReleases: true });
    expect((await world.harness.getTask(world.taskId, ctx))?.state.status).toBe("terminal");
    expect(world.departure!.done).toBe(false);
    expect(world.printed.map(([, line]) => line)).toEqual(["tick 1", "tick 2", "tick 3", "tick 4", "tick 5"]);
    expect(world.arbiter.record).toMatchObject({ epoch: 2, holder: "object" });
    expect(world.clock.now()).toBeGreaterThanOrEqual(5_000);
    await world.harness.close(ctx);
  });

  it("property: whatever the link loses, duplicates or reorders, every tick is printed once, the log has one transaction per position, and the object ends it", async () => {
    await fc.assert(
      fc.asyncProperty(
        fc.array(
          fc.record({ pick: fc.nat(7), action: fc.constantFrom<LinkAction>("deliver", "deliver", "deliver", "drop", "duplicate") }),
          {
            minLength: 1,
            maxLength: 40,
          },
        ),
        async (schedule) => {
          const world = await handOverWorld(schedule);
          expect((await world.harness.getTask(world.taskId, ctx))?.state.status).toBe("terminal");
          expect(world.printed.map(([, line]) => line)).toEqual(["tick 1", "tick 2", "tick 3", "tick 4", "tick 5"]);
          const [first, second] = (await epochs(world.objectStorage)) as Array<{ epoch: number; start: number }>;
          expect(first).toEqual({ epoch: 1, start: 1 });
          expect(second!.epoch).toBe(2);
          // The object's copy of the tab's stretch is the tab's, position by position.
          const tabHead = (await world.tabStorage.load()).log!.position;
          expect(second!.start).toBe(tabHead + 1);
          await world.harness.close(ctx);
        },
      ),
      { numRuns: 12, seed: 27 },
    );
  }, 120_000);
});
