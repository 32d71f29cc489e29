import { describe, expect, it } from "vitest";
import { memoryArbiter } from "../src/follow/arbiter.ts";
import { createRegistry, defineExtension, defineTask, Harness } from "../src/index.ts";
import { openSqliteStorage } from "../src/storage/sqlite/open-storage.ts";
import { createManualClock } from "../src/testing/clock.ts";
import { ctx, runUntil } from "./support.ts";

// Decision 0057 (issue 27): a drained hand-over (the object handing the lease back to the tab that asked, runHere)
// stopped the harness as a crash does: what ran stayed `running`, and the next holder counted a restart for every
// phase it cut. Moving the work to and fro during one long phase (a model request) used up the task's restarts
// (S6: 5 by default) although nothing crashed. The seed (S4) counts a restart for a crash, never for a close; a
// hand-over by a place that stays alive and moves the work on purpose is a close. `handOver(ctx, { park: true })`
// parks the tasks it ran as `pending` under the lease, and the next holder counts nothing. A tab's hand-over at
// `pagehide` (`drain: false`) is unchanged: the page may be gone, and its next holder recovers as after a crash.

let held = 0;
const holder = defineTask<null, { phase: "hold" }, null>({
  name: "test.holder",
  version: 1,
  initial: () => ({ phase: "hold" }),
  phases: {
    hold: async (_task, runtime) => {
      held += 1;
      await runtime.untilAborted();
    },
  },
  abort: async () => {},
});
const registry = () => createRegistry().install(defineExtension({ name: "test", tasks: [holder] }));

async function handOverAndReopen(park: boolean | undefined, moves: number) {
  held = 0;
  const storage = await openSqliteStorage({ vfs: "memory" });
  const clock = createManualClock(1_000);
  const arbiter = memoryArbiter({ clock });
  const open = (place: string) => Harness.open(storage, { registry: registry(), clock, lease: { place, arbiter } }, ctx);
  let harness = await open("object");
  const root = await harness.root(ctx);
  const id = await root.commit((tx) => tx.createTask(holder, null), ctx);
  for (let move = 0; move < moves; move++) {
    harness.resume();
    await runUntil(clock, () => held === move + 1);
    const mark = await harness.handOver(ctx, park === undefined ? {} : { park });
    await arbiter.release(move % 2 === 0 ? "object" : "tab", mark.epoch, mark.position, move % 2 === 0 ? "tab" : "object");
    harness = await open(move % 2 === 0 ? "tab" : "object");
  }
  const row = (await harness.query(`SELECT status, record ->> '$.restarts' AS restarts FROM tasks WHERE id = ${id}`))[0];
  const recovered = harness.recovery.tasks;
  await harness.close(ctx);
  return { row, recovered };
}

describe("a drained hand-over parks what it ran (decision 0057, S4/S6)", () => {
  it("S4/0057: handOver({ park: true }) six times over one long phase counts no restart; the task is pending, not cut off by the restart limit", async () => {
    const { row, recovered } = await handOverAndReopen(true, 6);
    expect(row).toEqual({ status: "pending", restarts: null });
    expect(recovered).toEqual([]);
  });

  it("S4: a drained hand-over without park still leaves the phase running for the next holder to count (a crash's recovery)", async () => {
    const { row, recovered } = await handOverAndReopen(undefined, 1);
    expect(row).toEqual({ status: "pending", restarts: 1 });
    expect(recovered).toEqual([expect.objectContaining({ restarts: 1 })]);
  });
});
