import { describe, expect, it } from "vitest";
import { counterTask, SEED_QUERY } from "../examples/counter-task.ts";
import { createRegistry, defineExtension, type Storage } from "../src/index.ts";
import { backends, ctx, never, openHarness, runUntil, sqliteMemoryBackend } from "./support.ts";

for (const backend of backends) {
  describe(`S12 Example 12 on ${backend.name}`, () => {
    async function firstRun(cut: "close" | "kill") {
      const printed: string[] = [];
      let image: Uint8Array | undefined;
      const storage = await backend.create();
      const registry = createRegistry();
      let harnessRef: { close(c: typeof ctx): Promise<void> } | undefined;
      let closing: Promise<void> | undefined;
      registry.install(
        defineExtension({
          name: "example",
          tasks: [
            counterTask(async (line) => {
              printed.push(line);
              if (line !== "tick 2") return;
              if (cut === "close") {
                closing = harnessRef!.close(ctx);
                return;
              }
              image = await storage.exportImage(); // the process dies right after printing tick 2
              await never();
            }),
          ],
        }),
      );
      const { harness, clock } = await openHarness(storage, { registry });
      harnessRef = harness;
      const root = await harness.root(ctx);
      const id = await root.commit(
        (tx) =>
          tx.createTask(
            counterTask(() => {}),
            { to: 5 },
          ),
        ctx,
      );
      harness.resume();
      await runUntil(clock, () => (cut === "close" ? closing !== undefined : image !== undefined));
      if (cut === "close") {
        await closing;
        image = await storage.exportImage();
      }
      return { id, printed, image: image!, clock };
    }

    async function secondRun(storage: Storage, id: number, clock: Awaited<ReturnType<typeof firstRun>>["clock"]) {
      const printed: string[] = [];
      const registry = createRegistry().install(
        defineExtension({ name: "example", tasks: [counterTask((line) => void printed.push(line))] }),
      );
      const { harness } = await openHarness(storage, { registry, clock });
      const afterOpen = await harness.getTask(id, ctx);
      const seedRowsAfterOpen = backend === sqliteMemoryBackend ? await storage.query(SEED_QUERY) : undefined;
      let done: Awaited<ReturnType<typeof harness.waitForTask>> | undefined;
      void harness.waitForTask(id, ctx).then((task) => (done = task));
      await runUntil(clock, () => done !== undefined);
      return { printed, afterOpen: afterOpen!, done: done!, harness, seedRowsAfterOpen };
    }

    it("after close(): pending at n = 2 with memos, no restart; reopen prints tick 3..5, never tick 2 again", async () => {
      const first = await firstRun("close");
      expect(first.printed).toEqual(["tick 1", "tick 2"]);
      const before = await backend.fromImage(first.image, { readOnly: true });
      const beforeRow = (await before.getTask(first.id))!;
      expect(beforeRow.state.status).toBe("pending");
      expect(beforeRow.state).toMatchObject({ checkpoint: { phase: "tick", n: 2 } });
      expect(beforeRow.memos).toEqual({ "printed-1": true, "printed-2": true });
      expect(beforeRow.restarts).toBeUndefined();
      if (backend === sqliteMemoryBackend) {
        expect(await before.query(SEED_QUERY)).toEqual([
          { id: first.id, status: "pending", n: 2, memos: '{"printed-1":true,"printed-2":true}', restarts: null },
        ]);
      }

      const second = await secondRun(await backend.fromImage(first.image), first.id, first.clock);
      expect(second.afterOpen.restarts).toBeUndefined();
      if (backend === sqliteMemoryBackend) {
        expect(await second.harness.storage.query(SEED_QUERY)).toEqual([
          { id: first.id, status: "terminal", n: null, memos: null, restarts: null },
        ]);
      }
      expect(second.printed).toEqual(["tick 3", "tick 4", "tick 5"]);
      expect(second.done.state).toEqual({ status: "terminal", outcome: { status: "completed", result: "counted to 5" } });
      expect(second.done.memos).toBeUndefined();
      expect(second.done.restarts).toBeUndefined();
    });

    it("after a kill: running at n = 2 with memos; open counts restarts = 1; reopen prints tick 3..5", async () => {
      const first = await firstRun("kill");
      expect(first.printed).toEqual(["tick 1", "tick 2"]);
      const before = await backend.fromImage(first.image, { readOnly: true });
      const beforeRow = (await before.getTask(first.id))!;
      expect(beforeRow.state).toEqual({ status: "running", checkpoint: { phase: "tick", n: 2 }, progressed: expect.any(Number) }); // decision 0112
      expect(beforeRow.memos).toEqual({ "printed-1": true, "printed-2": true });
      expect(beforeRow.restarts).toBeUndefined();
      if (backend === sqliteMemoryBackend) {
        expect(await before.query(SEED_QUERY)).toEqual([
          { id: first.id, status: "running", n: 2, memos: '{"printed-1":true,"printed-2":true}', restarts: null },
        ]);
      }

      const second = await secondRun(await backend.fromImage(first.image), first.id, first.clock);
      expect(second.afterOpen.state.status).toBe("pending");
      if (backend === sqliteMemoryBackend) {
        expect(second.seedRowsAfterOpen).toEqual([
          { id: first.id, status: "pending", n: 2, memos: '{"printed-1":true,"printed-2":true}', restarts: 1 },
        ]);
      }
      expect(second.afterOpen.restarts).toBe(1);
      expect(second.printed).toEqual(["tick 3", "tick 4", "tick 5"]);
      expect(second.done.state).toEqual({ status: "terminal", outcome: { status: "completed", result: "counted to 5" } });
      expect(second.done.memos).toBeUndefined();
      expect(second.done.restarts).toBeUndefined();
    });
  });
}
