import { createHook } from "node:async_hooks";
import { describe, expect, it } from "vitest";
import { stepper } from "../bench/stepper.ts";
import { createRegistry, defineExtension, Harness, MemoryStorage } from "../src/index.ts";
import { ctx } from "./support.ts";

// Decision 0126: a lone task's step (the bench's stepper: one checkpoint commit a step) is stored without the async
// frame of the line's store. Counted, not timed: the promises a step makes, on MemoryStorage (no connection whose
// starvation probe could add a wait). 12 a step before (ac1ab7a); the test fails there.
describe("decision 0126: a lone task's step makes one promise less than before", () => {
  it("a checkpoint step of a lone task makes at most 11 promises", async () => {
    const storage = new MemoryStorage();
    const registry = createRegistry().install(defineExtension({ name: "bench", tasks: [stepper] }));
    const harness = await Harness.open(storage, { registry }, ctx);
    const root = await harness.root(ctx);
    const promisesOf = async (steps: number) => {
      let promises = 0;
      const hook = createHook({ init: (_id, type) => void (type === "PROMISE" && promises++) }).enable();
      try {
        const id = await root.commit((tx) => tx.createTask(stepper, { steps }), ctx);
        const done = await harness.waitForTask(id, ctx);
        expect(done.state).toEqual({ status: "terminal", outcome: { status: "completed", result: steps } });
      } finally {
        hook.disable();
      }
      return promises;
    };
    await promisesOf(10); // the first task's one-time work (the kind's first run) out of the count
    const perStep = ((await promisesOf(300)) - (await promisesOf(100))) / 200;
    expect(perStep).toBeLessThanOrEqual(11);
    await harness.close(ctx);
  });
});
