import { describe, expect, it } from "vitest";
import type { Clock } from "../src/base/clock.ts";
import { createRegistry, defineExtension, defineTask, Harness, type TaskRecord } from "../src/index.ts";
import { createManualClock, type ManualClock } from "../src/testing/clock.ts";
import { backends, ctx, flush } from "./support.ts";

// A loaded event loop runs a due timer's callback late; meanwhile other work (a pass, its re-arm) runs
// with the clock already past the sleeper's `until`. The sleeper must still wake.

/** A manual clock whose due timers wait in a queue until `release()` (a timer callback the loop runs late). */
function lateClock(): { clock: Clock; manual: ManualClock; release: () => void } {
  const manual = createManualClock(1_000);
  const late = new Set<() => void>();
  const clock: Clock = {
    now: () => manual.now(),
    setTimer(delayMs, fire) {
      const queued = () => late.add(fire);
      const cancel = manual.setTimer(delayMs, queued);
      return () => {
        cancel();
        late.delete(fire); // clearTimeout also stops a callback that is due but has not run yet
      };
    },
  };
  const release = () => {
    const due = [...late];
    late.clear();
    for (const fire of due) fire();
  };
  return { clock, manual, release };
}

const napper = defineTask<{ ms: number }, { phase: "nap" | "woke" }, string>({
  name: "test.napper",
  version: 1,
  initial: () => ({ phase: "nap" }),
  phases: {
    nap: async (task, runtime, context) => runtime.sleepUntil(runtime.now() + task.input.ms, { phase: "woke" }, context),
    woke: async (_t, runtime, context) =>
      runtime.commit(() => ({ status: "terminal", outcome: { status: "completed", result: "woke" } }), context),
  },
  abort: async (_t, runtime, context) => runtime.commit(() => ({ status: "terminal", outcome: { status: "aborted" } }), context),
});

const quick = defineTask<null, { phase: "go" }, string>({
  name: "test.quick",
  version: 1,
  initial: () => ({ phase: "go" }),
  phases: {
    go: async (_t, runtime, context) =>
      runtime.commit(() => ({ status: "terminal", outcome: { status: "completed", result: "done" } }), context),
  },
  abort: async (_t, runtime, context) => runtime.commit(() => ({ status: "terminal", outcome: { status: "aborted" } }), context),
});

for (const backend of backends) {
  describe(`sleep wake-ups on ${backend.name}`, () => {
    it("S3: a sleeper wakes when its timer runs late and a pass re-arms the timer after its `until` has passed", async () => {
      const { clock, manual, release } = lateClock();
      const registry = createRegistry().install(defineExtension({ name: "test", tasks: [napper, quick] }));
      const harness = await Harness.open(await backend.create(), { registry, clock }, ctx);
      const record = async (id: number): Promise<TaskRecord> => (await harness.getTask(id, ctx))!;
      harness.resume();
      const root = await harness.root(ctx);
      const sleeper = await root.commit((tx) => tx.createTask(napper, { ms: 50 }), ctx);
      await flush(10);
      expect((await record(sleeper)).state).toMatchObject({ status: "sleeping", until: 1_050 });
      manual.advance(100); // the sleeper's timer is due, its callback not run yet
      const other = await root.commit((tx) => tx.createTask(quick, null), ctx);
      await flush(10);
      expect((await record(other)).state.status).toBe("terminal"); // a pass ran (and re-armed) at 1100
      release();
      await flush(10);
      expect((await record(sleeper)).state).toMatchObject({ status: "terminal", outcome: { status: "completed", result: "woke" } });
      await harness.close(ctx);
    });
  });
}
