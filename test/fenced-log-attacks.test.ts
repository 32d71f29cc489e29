import { describe, expect, it } from "vitest";
import { memoryArbiter } from "../src/follow/arbiter.ts";
import { createRegistry, LeaseNotHeld, StaleEpoch } from "../src/index.ts";
import { createManualClock } from "../src/testing/clock.ts";
import { backends, ctx, openHarness } from "./support.ts";

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
