/**
 * S12's Example 12 (the counter to 5) as parts of a crash sweep scenario, shared by test/crash-sweep.test.ts (no lease)
 * and test/deferred-sweeps.test.ts (under a lease, its memo writes deferred): the registry whose counter says each
 * tick once to the sweep's world, the start that creates the counter unless a process before did, and the invariants
 * every run of it keeps.
 */
import { counterTask } from "../examples/counter-task.ts";
import { createRegistry, BACKGROUND_CONTEXT as ctx, defineExtension, type Harness, type Storage } from "../src/index.ts";
import type { CrashWorldView, SweepWorld } from "../src/testing/index.ts";

/** A registry whose counter prints each tick to the sweep's world (once, and in its log). */
export const counterRegistry = (world: Pick<SweepWorld, "once" | "log">) =>
  createRegistry().install(
    defineExtension({
      name: "example",
      tasks: [
        counterTask((line) => {
          world.once(line);
          world.log(line);
        }),
      ],
    }),
  );

/** Every process starts the counter (to 5) unless it exists, then resumes. */
export async function startCounter(harness: Harness): Promise<void> {
  const root = await harness.root(ctx);
  if ((await harness.storage.listTasks()).length === 0)
    await root.commit(
      (tx) =>
        tx.createTask(
          counterTask(() => {}),
          { to: 5 },
        ),
      ctx,
    );
  harness.resume();
}

/** The counter ended, counted to 5. */
export async function counterCounted({ storage }: { storage: Storage }): Promise<string | undefined> {
  const [task] = await storage.listTasks();
  if (task?.state.status !== "terminal" || (task.state.outcome as { result?: unknown }).result !== "counted to 5")
    return `the counter ended ${JSON.stringify(task?.state)}`;
}

/** Each tick printed once, in order, across every process of the run. */
export function ticksInOrder({ lines }: Pick<CrashWorldView, "lines">): string | undefined {
  const ticks = lines.map((line) => Number(line.slice(5)));
  if (ticks.some((n, i) => i > 0 && n <= ticks[i - 1]!)) return `ticks out of order or repeated: ${lines.join(", ")}`;
}
