import fc from "fast-check";
import { describe, expect, it } from "vitest";
import { followObject } from "../src/browser/follow.ts";
import { REBUILD_TRIES, REBUILD_TRIES_LIMIT, RebuildRetry, rebuildTriesOf } from "../src/browser/rebuild-retry.ts";
import { InvalidSetting, SnapshotUnavailable } from "../src/errors.ts";
import { createManualClock } from "../src/testing/clock.ts";

// Decision 0078 bounded the worker's own rebuild retries at REBUILD_TRIES failures in a row, a constant. An app that
// would rather be told sooner (a phone on a metered link) or wait longer (a kiosk) had no say. Now
// `follow.rebuildTries` sets it: a whole number from 1 to 1,000, anything else refused as a bad setting is.

/** Drives a RebuildRetry whose every rebuild fails as `busy` (passes by itself) until it stops. */
function failingRebuilds(tries?: number) {
  const clock = createManualClock(0);
  const seen = { asked: 0, stopped: [] as number[] };
  const retry: RebuildRetry = new RebuildRetry(clock, {
    ...(tries === undefined ? {} : { tries }),
    up: () => true,
    ask: () => {
      seen.asked++;
      retry.failed(new SnapshotUnavailable("busy", "the take limit is held"));
    },
    stopped: (count) => void seen.stopped.push(count),
  });
  retry.failed(new SnapshotUnavailable("busy", "the take limit is held"));
  while (clock.next()) {}
  return seen;
}

describe("follow.rebuildTries: how many failed rebuilds in a row before the worker stops by itself (decision 0078)", () => {
  it("default: REBUILD_TRIES failures (the first and REBUILD_TRIES - 1 retries), then stopped once", () => {
    expect(failingRebuilds()).toEqual({ asked: REBUILD_TRIES - 1, stopped: [REBUILD_TRIES] });
  });

  it("property: any tries from 1 to 40 stops after exactly that many failures, told once (fast-check)", () => {
    fc.assert(
      fc.property(fc.integer({ min: 1, max: 40 }), (tries) => {
        expect(failingRebuilds(rebuildTriesOf(tries))).toEqual({ asked: tries - 1, stopped: [tries] });
      }),
    );
  });

  it("a bad setting: anything but a whole number from 1 to 1,000 is refused with InvalidSetting, before a socket is opened (fast-check)", () => {
    const bad = fc.oneof(
      fc.integer({ max: 0 }),
      fc.integer({ min: REBUILD_TRIES_LIMIT + 1 }),
      fc.double().filter((value) => !Number.isInteger(value)),
      fc.constantFrom(Number.NaN, Number.POSITIVE_INFINITY, null, "8", true, [], {}),
      fc.string(),
    );
    fc.assert(
      fc.property(bad, (value) => {
        let sockets = 0;
        const open = () =>
          followObject({
            url: "ws://object/follow",
            rebuildTries: value as number,
            connect: () => {
              sockets++;
              throw new Error("no socket in this test");
            },
          });
        expect(open).toThrow(InvalidSetting);
        expect(sockets).toBe(0);
      }),
    );
    expect(rebuildTriesOf(1)).toBe(1);
    expect(rebuildTriesOf(REBUILD_TRIES_LIMIT)).toBe(REBUILD_TRIES_LIMIT);
    expect(rebuildTriesOf(undefined)).toBe(REBUILD_TRIES);
  });
});
