import fc from "fast-check";
import { describe, expect, it } from "vitest";
import type { Clock } from "../src/base/clock.ts";
import { SnapshotUnavailable } from "../src/errors.ts";
import { SnapshotLimit } from "../src/follow/snapshot-limit.ts";

// Decisions 0053/0058, review: the snapshot limits refill on the harness clock, which on a host is the wall clock and
// may be set back (NTP, a user fixing the time). A bucket refilled while the clock was ahead kept that time as its
// last refill, so after the clock moved back it earned nothing until the clock caught up again: an object whose
// buckets were drained then refused every new device's rebuild ('busy') for as long as the clock had jumped (an
// hour here), though the limit promises one more take every 2 s.

function steppedClock(): Clock & { set(now: number): void } {
  let now = 0;
  return { now: () => now, setTimer: () => () => {}, set: (at) => (now = at) };
}

function refused(limit: SnapshotLimit, kind: "take" | "part", caller: string): boolean {
  try {
    limit[kind](caller);
    return false;
  } catch (error) {
    expect(error).toBeInstanceOf(SnapshotUnavailable);
    expect((error as SnapshotUnavailable).name).toBe("SnapshotUnavailable");
    return true;
  }
}

describe("snapshot limits when the clock moves back (decisions 0053, 0058)", () => {
  it("a drained object serves a new device again one refill after the clock was set back an hour", () => {
    const clock = steppedClock();
    const limit = new SnapshotLimit(clock);
    clock.set(3_600_000); // the clock an hour ahead: the buckets refill to full there
    for (let i = 0; i < 6; i++) limit.take(`device${i}`);
    expect(refused(limit, "take", "tablet")).toBe(true); // the object's 6 are spent
    clock.set(0); // the clock set back an hour
    expect(refused(limit, "take", "tablet")).toBe(true); // still spent: moving back earns nothing
    clock.set(2_000); // one refill of the object's bucket later
    expect(refused(limit, "take", "tablet")).toBe(false);
  });

  it("property: whatever the clock did before, a new caller is served after one refill of monotone time", () => {
    fc.assert(
      fc.property(
        fc.array(
          fc.record({
            at: fc.integer({ min: 0, max: 10_000_000 }),
            kind: fc.constantFrom("take", "part"),
            caller: fc.string({ maxLength: 4 }),
          }),
          {
            maxLength: 60,
          },
        ),
        fc.integer({ min: 0, max: 10_000_000 }),
        (calls, end) => {
          const clock = steppedClock();
          const limit = new SnapshotLimit(clock, { partBurst: 3, totalPartBurst: 5 });
          for (const call of calls) {
            clock.set(call.at);
            refused(limit, call.kind as "take" | "part", call.caller);
          }
          clock.set(end);
          refused(limit, "take", "newcomer");
          refused(limit, "part", "newcomer");
          clock.set(end + 2_000); // the object's takes refill one every 2 s, its parts one every 200 ms
          expect(refused(limit, "take", "newcomer2")).toBe(false);
          expect(refused(limit, "part", "newcomer2")).toBe(false);
        },
      ),
      { numRuns: 200 },
    );
  });
});
