import { describe, expect, it } from "vitest";
import { stepper } from "../bench/stepper.ts";
import { memoryArbiter } from "../src/follow/arbiter.ts";
import { createRegistry, defineExtension } from "../src/index.ts";
import type { LogMark } from "../src/storage/records.ts";
import { createManualClock } from "../src/testing/clock.ts";
import { backends, ctx, openHarness, runUntil } from "./support.ts";

// Review of decision 0124 (older than it): `Harness.onLog`'s listener that threw made the fenced commit's `#store`
// reject after storage had stored the batch — the commit (and every later one of the line) never settled: one app
// listener's bug wedged the harness. A listener's throw is its owner's bug (decision 0117's rule, `safely`): the
// commit is stored and settles, the other listeners are told, the task steps on.

for (const backend of backends) {
  describe(`a log listener that throws (review of 0124) on ${backend.name}`, () => {
    it("S1/S12: every fenced commit still settles and is stored, the other listeners hear each position once, the task completes", async () => {
      const storage = await backend.create();
      const clock = createManualClock(1_000);
      const registry = createRegistry().install(defineExtension({ name: "bench", tasks: [stepper] }));
      const { harness } = await openHarness(storage, { registry, clock, lease: { place: "tab", arbiter: memoryArbiter({ clock }) } });
      harness.onLog(() => {
        throw new Error("the app's listener is broken");
      });
      const heard: LogMark[] = [];
      harness.onLog((batch) => heard.push(batch.fence));
      const root = await harness.root(ctx);
      const [id] = await root.commit((tx) => [tx.createTask(stepper, { steps: 5 })], ctx);
      harness.resume();
      await runUntil(clock, async () => (await harness.getTask(id!, ctx))?.state.status === "terminal");
      expect((await harness.getTask(id!, ctx))?.state).toMatchObject({ status: "terminal", outcome: { status: "completed", result: 5 } });
      const head = harness.lease!.position;
      expect(heard.map((mark) => mark.position)).toEqual(Array.from({ length: heard.length }, (_, at) => head - heard.length + at + 1));
      expect((await storage.load()).log).toEqual({ epoch: heard[0]!.epoch, position: head });
      await harness.close(ctx);
    });
  });
}
