import { describe, expect, it } from "vitest";
import { createRegistry, defineExtension, defineTask, InvalidCommit, type Storage, TaskKeyConflict } from "../src/index.ts";
import { backends, ctx, doneTask, never, openHarness } from "./support.ts";

/** Runs `steps` steps; step `hangAt` never returns (the process dies there). */
const stepper = defineTask<{ steps: number; hangAt?: number }, { phase: "step"; n: number }, string>({
  name: "test.keyed",
  version: 1,
  initial: () => ({ phase: "step", n: 1 }),
  phases: {
    step: async (task, runtime, context) => {
      const n = task.state.checkpoint.n;
      if (n === task.input.hangAt && task.restarts === undefined) await never();
      await runtime.commit(
        () =>
          n === task.input.steps
            ? { status: "terminal", outcome: { status: "completed", result: `${n} steps` } }
            : { status: "running", checkpoint: { phase: "step", n: n + 1 } },
        context,
      );
    },
  },
  abort: async (_task, runtime, context) => runtime.commit(() => ({ status: "terminal", outcome: { status: "aborted" } }), context),
});
const other = doneTask("test.other");
const registry = () => createRegistry().install(defineExtension({ name: "test", tasks: [stepper, other] }));

async function taskCount(storage: Storage): Promise<number> {
  const { harness } = await openHarness(storage, { registry: registry(), readOnly: true });
  return (await harness.inspect(ctx)).tasks.length;
}

for (const backend of backends) {
  describe(`createTask with a key on ${backend.name}`, () => {
    it("the same key returns the same task, in one commit and across commits, and writes nothing the second time", async () => {
      const storage = await backend.create();
      const { harness } = await openHarness(storage, { registry: registry() });
      const root = await harness.root(ctx);
      const [first, again] = await root.commit(
        (tx) => [tx.createTask(stepper, { steps: 2 }, { key: "k" }), tx.createTask(stepper, { steps: 2 }, { key: "k" })],
        ctx,
      );
      expect(again).toBe(first);
      const image = await storage.exportImage();
      expect(await root.commit((tx) => tx.createTask(stepper, { steps: 2 }, { key: "k" }), ctx)).toBe(first);
      expect(await storage.exportImage()).toEqual(image);
      expect(await root.commit((tx) => tx.createTask(stepper, { steps: 2 }, { key: "other" }), ctx)).not.toBe(first);
      expect((await harness.inspect(ctx)).tasks).toHaveLength(2);
    });

    it("S4: the same key returns the same task after a crash (the copied image) and after the task ended", async () => {
      const storage = await backend.create();
      const { harness } = await openHarness(storage, { registry: registry() });
      const root = await harness.root(ctx);
      const id = await root.commit((tx) => tx.createTask(stepper, { steps: 3, hangAt: 2 }, { key: "welcome" }), ctx);
      harness.resume();
      for (let i = 0; i < 50 && (await harness.getTask(id, ctx))?.state.status !== "running"; i++)
        await new Promise((r) => setTimeout(r, 0));
      // The crash: the process dies in step 2; the next load opens the copy and asks for the same task.
      const crashed = await backend.fromImage(await storage.exportImage());
      const reopened = (await openHarness(crashed, { registry: registry() })).harness;
      const again = await (await reopened.root(ctx)).commit(
        (tx) => tx.createTask(stepper, { steps: 3, hangAt: 2 }, { key: "welcome" }),
        ctx,
      );
      expect(again).toBe(id);
      expect((await reopened.waitForTask(id, ctx)).state).toEqual({
        status: "terminal",
        outcome: { status: "completed", result: "3 steps" },
      });
      // Ended: still the same task, not a new one.
      expect(
        await (await reopened.root(ctx)).commit((tx) => tx.createTask(stepper, { steps: 3, hangAt: 2 }, { key: "welcome" }), ctx),
      ).toBe(id);
      expect(await taskCount(crashed)).toBe(0); // no live task: nothing new was created
      expect(await crashed.getTask(id + 1)).toBeUndefined();
    });

    it("the same key with another input or kind is a TaskKeyConflict and writes nothing, also once the task ended", async () => {
      const storage = await backend.create();
      const { harness } = await openHarness(storage, { registry: registry() });
      const root = await harness.root(ctx);
      const id = await root.commit((tx) => tx.createTask(stepper, { steps: 1 }, { key: "k" }), ctx);
      const live = root.commit((tx) => tx.createTask(stepper, { steps: 9 }, { key: "k" }), ctx);
      await expect(live).rejects.toThrow(TaskKeyConflict);
      await expect(live).rejects.toMatchObject({ name: "TaskKeyConflict", key: "k", taskId: id });
      await expect(root.commit((tx) => tx.createTask(other, null, { key: "k" }), ctx)).rejects.toThrow(/kind test\.keyed, not test\.other/);
      await harness.waitForTask(id, ctx);
      const image = await storage.exportImage();
      // The ended task's input is read from storage before the commit is stored; the whole commit fails.
      const ended = root.commit((tx) => {
        tx.createTask(other, null);
        return tx.createTask(stepper, { steps: 2 }, { key: "k" });
      }, ctx);
      await expect(ended).rejects.toThrow(TaskKeyConflict);
      expect(await storage.exportImage()).toEqual(image);
      await expect(root.commit((tx) => tx.createTask(stepper, { steps: 1 }, { key: "" }), ctx)).rejects.toThrow(InvalidCommit);
    });
  });

  describe(`recovery you can see on ${backend.name}`, () => {
    it("R8: a key is scoped to its conversation: the same key in another conversation is a TaskKeyConflict, live or ended", async () => {
      const storage = await backend.create();
      const { harness } = await openHarness(storage, { registry: registry() });
      const root = await harness.root(ctx);
      const second = await root.commit((tx) => tx.createConversation(), ctx);
      const id = await root.commit((tx) => tx.createTask(stepper, { steps: 1 }, { key: "k" }), ctx);
      const image = await storage.exportImage();
      const elsewhere = () => root.commit((tx) => tx.createTask(stepper, { steps: 1 }, { key: "k", conversationId: second }), ctx);
      const live = await elsewhere().catch((e: unknown) => e);
      expect(live).toBeInstanceOf(TaskKeyConflict);
      expect((live as Error).message).toMatch(new RegExp(`task ${id} \\(in conversation ${root.id}, not ${second}\\)`));
      expect(await storage.exportImage()).toEqual(image);
      harness.resume();
      await harness.waitForTask(id, ctx);
      const ended = await storage.exportImage();
      await expect(elsewhere()).rejects.toBeInstanceOf(TaskKeyConflict);
      expect(await storage.exportImage()).toEqual(ended);
      expect(await root.commit((tx) => tx.createTask(stepper, { steps: 1 }, { key: "k" }), ctx)).toBe(id);
    });

    it("S4: open tells how the last harness stopped (none, close, crash) and which tasks a crash cut off, with their restarts", async () => {
      const storage = await backend.create();
      const first = (await openHarness(storage, { registry: registry() })).harness;
      expect(first.recovery).toEqual({ stop: "none", tasks: [] });
      await first.close(ctx);
      const second = (await openHarness(storage, { registry: registry() })).harness;
      expect(second.recovery).toEqual({ stop: "close", tasks: [] });
      // An idle crash: nothing was running, but the harness was never closed.
      const idle = (await openHarness(await backend.fromImage(await storage.exportImage()), { registry: registry() })).harness;
      expect(idle.recovery).toEqual({ stop: "crash", tasks: [] });

      const root = await second.root(ctx);
      const id = await root.commit((tx) => tx.createTask(stepper, { steps: 2, hangAt: 1 }, { key: "k" }), ctx);
      second.resume();
      for (let i = 0; i < 50 && (await second.getTask(id, ctx))?.state.status !== "running"; i++)
        await new Promise((r) => setTimeout(r, 0));
      const crashed = await backend.fromImage(await storage.exportImage());
      const third = (await openHarness(crashed, { registry: registry(), resume: true })).harness;
      expect(third.recovery).toEqual({ stop: "crash", tasks: [{ id, kind: "test.keyed", restarts: 1 }] });
      await third.waitForTask(id, ctx);
      // Progress cleared the task's restarts; the recovery record (and the inspection) still tell.
      expect((await third.inspect(ctx)).recovery).toEqual({ stop: "crash", tasks: [{ id, kind: "test.keyed", restarts: 1 }] });
      const viewer = (await openHarness(crashed, { registry: registry(), readOnly: true })).harness;
      expect(viewer.recovery).toEqual({ stop: "crash", tasks: [] });
    });
  });
}
