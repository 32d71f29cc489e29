import { describe, expect, it } from "vitest";
import { createManualClock } from "../src/testing/clock.ts";
import { runUntil, wire } from "./support.ts";

// The manual-clock worlds (test/comeback-support.ts, snapshot-rebuild's devices) carry frames in real macrotasks.
// runUntil moved the manual clock after two rounds whatever was still on its way, so on a loaded machine a round trip
// that took longer met a timer the test never meant to reach first (a lease's expiry, a resend).

describe("runUntil and frames on a wire", () => {
  it("the manual clock moves only once every frame on the wire arrived, however slow the delivery (a loaded machine)", async () => {
    const clock = createManualClock(0);
    const events: string[] = [];
    clock.setTimer(5_000, () => void events.push("the lease expired"));
    const carry = wire(clock, 30);
    carry(() => void events.push("the renewal arrived"));
    carry(() => carry(() => void events.push("its answer arrived")));
    await runUntil(clock, () => events.length === 3);
    expect(events).toEqual(["the renewal arrived", "its answer arrived", "the lease expired"]);
  });

  it("a clock with no frame on its way moves as before", async () => {
    const clock = createManualClock(0);
    const fired: number[] = [];
    for (const at of [10, 20, 30]) clock.setTimer(at, () => void fired.push(clock.now()));
    wire(createManualClock(0), 30)(() => {}); // another world's wire holds nothing of this clock's
    await runUntil(clock, () => fired.length === 3);
    expect(fired).toEqual([10, 20, 30]);
  });
});
