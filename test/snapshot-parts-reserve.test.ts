import fc from "fast-check";
import { describe, expect, it } from "vitest";
import { SnapshotLimit } from "../src/follow/snapshot-limit.ts";
import { createManualClock } from "../src/testing/clock.ts";

// Decision 0075 (decision 0064's "Not done"): the object's parts bucket was shared by every caller, each within its
// own share, so a few callers reading at once drained it and a new device could read no part of its snapshot until the
// bucket refilled. The object now keeps its last parts (half a caller's burst: one whole fetch on an object) for
// callers that have drawn fewer than that lately.

/** How many parts `caller` reads at once before it is refused. */
function readAll(limit: SnapshotLimit, caller: string, most = 10_000): number {
  let read = 0;
  while (read < most) {
    try {
      limit.part(caller);
      read++;
    } catch (error) {
      expect((error as Error).name).toBe("SnapshotUnavailable");
      break;
    }
  }
  return read;
}

describe("the object keeps its last snapshot parts for a new device (decision 0075)", () => {
  it("0075/S5: four devices drain the object's parts at once; a fifth, new, still reads 32 (half its burst) at that moment", () => {
    const limit = new SnapshotLimit(createManualClock(0)); // 64 per caller, 256 in all
    const drained = ["phone", "laptop", "tablet", "desktop"].map((caller) => readAll(limit, caller));
    expect(drained).toEqual([64, 64, 64, 32]); // the fourth stops at the reserve
    expect(readAll(limit, "new-device")).toBe(32); // old code: 0 (the fourth took the whole bucket)
    expect(readAll(limit, "another-new-device")).toBe(0); // the reserve is one device's, not one per device
  });

  it("0075: a snapshot server's limits (102 per caller, 404 in all): four devices fetching whole snapshots (51 parts) in turns until refused leave one whole fetch for a new device", () => {
    const limit = new SnapshotLimit(createManualClock(0), { partBurst: 102, totalPartBurst: 404 });
    const devices = ["a", "b", "c", "d"];
    for (let refused = 0; refused < devices.length; ) for (const device of devices) if (readAll(limit, device, 51) < 51) refused++;
    expect(readAll(limit, "new-device")).toBe(51); // old code: 0
  });

  it("property: whatever up to 7 callers read at one moment, in any order: a new caller then reads at least the reserve (or what is left of it), no caller that had drawn the reserve's size read from it, nobody past its own burst (fast-check)", () => {
    fc.assert(
      fc.property(
        fc.array(fc.record({ caller: fc.integer({ min: 0, max: 6 }), count: fc.integer({ min: 1, max: 80 }) }), { maxLength: 40 }),
        (reads) => {
          const limit = new SnapshotLimit(createManualClock(0)); // 64 per caller, 256 in all, 32 kept
          const served = new Map<number, number>();
          let total = 0;
          for (const { caller, count } of reads)
            for (let i = 0; i < count; i++) {
              if (readAll(limit, `caller-${caller}`, 1) === 0) break;
              // A read from the reserve (it left fewer than 32) is only ever a caller's first 32.
              if (256 - total - 1 < 32) expect(served.get(caller) ?? 0).toBeLessThan(32);
              total++;
              served.set(caller, (served.get(caller) ?? 0) + 1);
            }
          for (const count of served.values()) expect(count).toBeLessThanOrEqual(64);
          expect(readAll(limit, "newcomer")).toBeGreaterThanOrEqual(Math.min(32, 256 - total));
        },
      ),
      { numRuns: 300 },
    );
  });

  it("0075: partReserve 0 keeps none (the old sharing), and hostile values are bounded", () => {
    const none = new SnapshotLimit(createManualClock(0), { partReserve: 0 });
    for (const caller of ["a", "b", "c", "d"]) readAll(none, caller);
    expect(readAll(none, "new-device")).toBe(0);
    for (const partReserve of [Number.NaN, -5, Infinity, 1e9]) {
      const limit = new SnapshotLimit(createManualClock(0), { partReserve });
      const first = readAll(limit, "a");
      expect(first).toBeGreaterThanOrEqual(0);
      expect(first).toBeLessThanOrEqual(64);
    }
  });
});
