import type { HarnessStatus } from "pi-durable-web/client";
import { describe, expect, it } from "vitest";
import { placeOf, shortPlace } from "../web/src/place-text.ts";

type Ready = HarnessStatus & { kind: "ready" };
const ready = (extra: Partial<Ready>): HarnessStatus => ({ kind: "ready", role: "leader", ...extra }) as HarnessStatus;

describe("the demo's place bar (web/src/place-text.ts)", () => {
  it("decision 0078: a copy whose rebuild the worker stopped retrying says so, with the tries and the last error, and offers the retry", () => {
    const place = placeOf(
      "follow",
      ready({
        runs: "elsewhere",
        epoch: 7,
        rebuild: { kind: "stopped", tries: 8, error: { name: "SnapshotBusy", message: "the object is busy" } },
      }),
    );
    expect(place.move).toBe("retryRebuild");
    expect(place.note).toContain("8 tries");
    expect(place.note).toContain("the object is busy");
    expect(place.epoch).toBe(7);
  });

  it("a copy that follows the object with nothing stopped offers Run here; one that holds the lease offers the move", () => {
    expect(placeOf("follow", ready({ runs: "elsewhere" })).move).toBe("runHere");
    expect(placeOf("follow", ready({ runs: "here" })).move).toBe("leave");
    expect(placeOf("tab", ready({})).move).toBeUndefined();
  });

  it("a device's place is named by its first 8 hex digits, a long one cut", () => {
    expect(shortPlace("tab-0123abcd-0000-4000-8000-000000000000")).toBe("tab-0123abcd");
    expect(shortPlace("x".repeat(60))).toHaveLength(40);
  });
});
