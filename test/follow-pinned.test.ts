import { describe, expect, it } from "vitest";
import { FollowLink } from "../src/follow/link-client.ts";
import { remoteArbiter } from "../src/follow/mirror.ts";
import { encodeFollowMessage } from "../src/follow/wire.ts";
import { FOLLOW_WIRE_VERSION } from "../src/follow/wire-version.ts";
import { createManualClock } from "../src/testing/clock.ts";
import { followWorld } from "./follow-support.ts";
import { ctx } from "./support.ts";

// Decision 0032's pinned lease (ttlMs: Infinity) asked of the object over the follow link (decision 0040): JSON has no
// Infinity, so the object's grant crosses as ttlMs null. Read as a number that was 0, and the tab's pinned lease
// expired the moment it was granted: the tab could not commit at all.

describe("a pinned lease over the follow link (decision 0032, 0040)", () => {
  it("S5: a tab granted a pinned lease by its object keeps writing however long the clock runs, and its object never takes over", async () => {
    const world = await followWorld({ ttlMs: Number.POSITIVE_INFINITY });
    expect(world.tab.readOnly).toBe(false);
    world.clock.advance(24 * 3_600_000); // a day with no renewal reaching the object
    const root = await world.tab.root(ctx);
    await root.commit((tx) => tx.setDocument("notes", "last", "a day later"), ctx);
    await world.end.checkExpiry();
    expect(world.tab.lease?.epoch).toBe(1);
    expect(world.record().holder).toBe("tab");
    expect(world.end.harness).toBeUndefined();
  });

  it("a grant that is not { epoch, ttlMs } is refused as a hostile frame (FollowMessageRefused), not taken as a lease", async () => {
    const clock = createManualClock(1_000);
    const answers = [{ epoch: 1 }, { epoch: 0, ttlMs: 5_000 }, { epoch: 1, ttlMs: -1 }, { epoch: "1", ttlMs: 5_000 }, null];
    for (const value of answers) {
      const link: FollowLink = new FollowLink({
        clock,
        send: (frame) => {
          const { id, topic } = JSON.parse(frame) as { id: string; topic: string };
          // The hello is answered as an object of this release answers it (decision 0046); the grant is the hostile part.
          const answer = topic === "wire" ? { version: FOLLOW_WIRE_VERSION } : value;
          queueMicrotask(() => link.receive(encodeFollowMessage({ type: "answer", id, value: answer as never })));
        },
      });
      link.connected();
      await expect(remoteArbiter(link).acquire("tab", 0)).rejects.toMatchObject({ name: "FollowMessageRefused" });
    }
  });
});
