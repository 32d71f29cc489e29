import fc from "fast-check";
import { describe, expect, it } from "vitest";
import { createRegistry, defineExtension, defineTask, type Harness } from "../src/index.ts";
import { createManualClock } from "../src/testing/clock.ts";
import { backends, ctx, flush, openHarness, runUntil } from "./support.ts";

/**
 * Decision 0115: the sleep timer's queue is built after the open's first step, and until then it arms for the least
 * `until` it was shown. The sleeps stay exact: on a manual clock each sleeper's next phase runs at its `until`, not
 * before and not later — across a crash and a reopen too (a sleeper already due at the reopen runs at the reopen).
 */

const napper = defineTask<{ ms: number }, { phase: "nap" } | { phase: "woke"; until: number }, { until: number; at: number }>({
  name: "test.napper",
  version: 1,
  initial: () => ({ phase: "nap" }),
  phases: {
    nap: async (task, runtime, context) => {
      const until = runtime.now() + task.input.ms;
      await runtime.sleepUntil(until, { phase: "woke", until }, context);
    },
    woke: async (task, runtime, context) => {
      const { until } = task.state.checkpoint as { until: number };
      const at = runtime.now();
      await runtime.commit(() => ({ status: "terminal", outcome: { status: "completed", result: { until, at } } }), context);
    },
  },
  abort: async (_t, runtime, context) => runtime.commit(() => ({ status: "terminal", outcome: { status: "aborted" } }), context),
});
const registry = () => createRegistry().install(defineExtension({ name: "test", tasks: [napper] }));

type Woke = { until: number; at: number };

/** Each task's status, and what its next phase saw once it ran. */
async function tasks(harness: Harness, ids: number[]): Promise<Array<{ status: string; woke?: Woke }>> {
  return Promise.all(
    ids.map(async (id) => {
      const state = (await harness.getTask(id, ctx))!.state;
      return state.status === "terminal" && state.outcome.status === "completed"
        ? { status: state.status, woke: state.outcome.result as Woke }
        : { status: state.status };
    }),
  );
}

for (const backend of backends) {
  describe(`sleeps stay exact across a reload on ${backend.name} (decision 0115)`, () => {
    it("S3, S4: every sleeper's next phase runs at its until — before the crash, and after the reopen (at the reopen when it was already due)", async () => {
      await fc.assert(
        fc.asyncProperty(
          fc.array(fc.integer({ min: 0, max: 120 }), { minLength: 1, maxLength: 12 }),
          fc.integer({ min: 0, max: 150 }),
          async (naps, crashAfter) => {
            const storage = await backend.create();
            const first = await openHarness(storage, { registry: registry(), clock: createManualClock(1_000) });
            const root = await first.harness.root(ctx);
            const ids = await root.commit((tx) => naps.map((ms) => tx.createTask(napper, { ms })), ctx);
            first.harness.resume();
            // Every task steps into its sleep (a nap of 0 wakes at once) without the clock moving.
            for (let round = 0; round < 100; round++) {
              if ((await tasks(first.harness, ids)).every(({ status }) => status === "sleeping" || status === "terminal")) break;
              await flush(2);
            }
            first.clock.advance(crashAfter);
            await flush(10);
            const crashedAt = first.clock.now();
            const image = await storage.exportImage(); // the crash: never closed
            const reopened = await backend.fromImage(image);
            const second = await openHarness(reopened, { registry: registry(), resume: true, clock: createManualClock(crashedAt) });
            await runUntil(second.clock, async () => (await tasks(second.harness, ids)).every(({ woke }) => woke !== undefined));
            const done = await tasks(second.harness, ids);
            for (const [index, { woke }] of done.entries()) {
              const { until, at } = woke!;
              expect(until).toBe(1_000 + naps[index]!);
              // Not before its time; exactly at it when it was due after the reopen; at the reopen (or at its time,
              // before the crash) when it was already due.
              if (until > crashedAt) expect(at).toBe(until);
              else expect([until, crashedAt]).toContain(at);
            }
            await second.harness.close(ctx);
          },
        ),
        { numRuns: 12, seed: 115 },
      );
    });
  });
}
