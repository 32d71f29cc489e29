import { describe, expect, it } from "vitest";
import { Follower } from "../src/follow/follower.ts";
import { FollowLink } from "../src/follow/link-client.ts";
import { remoteArbiter } from "../src/follow/mirror.ts";
import type { ObjectEnd } from "../src/follow/object-end.ts";
import { rebuildFromObject } from "../src/follow/snapshot.ts";
import type { LeaseHolder } from "../src/follow/wire.ts";
import { createRegistry, Harness } from "../src/index.ts";
import { openSqliteStorage } from "../src/storage/sqlite/open-storage.ts";
import type { ManualClock } from "../src/testing/clock.ts";
import { followWorld, rows } from "./follow-support.ts";
import { ctx, runUntil } from "./support.ts";

// Decision 0094 (issue 27 item 6): a second device follows a tab through the object (decision 0090, relayed from the
// feed's memory: the copy trims what a tab pushed). When the object took the lease over, the feed attached the
// object's harness and dropped that memory; a follower that had not yet been sent the tab's last transactions (one
// round in flight at a time, the rest waiting in memory) was then served from the durable tail, which no longer held
// them: it was told `behind` and had to rebuild its whole copy from the object's snapshot, or, with nothing yet in the
// tail, stood still until the object's next step. Now the relayed transactions up to the takeover stay in memory and
// the follower gets them, then the object's own steps, without a rebuild.

/** A device's link to `end` whose frames from the object wait while `gate` is shut (a slow device, a slow socket). */
function gatedLink(end: ObjectEnd, clock: ManualClock) {
  let shut = false;
  const waiting: string[] = [];
  const link: FollowLink = new FollowLink({
    clock,
    send: (frame) =>
      void setTimeout(
        () =>
          void end.receive(
            frame,
            (reply) => {
              if (shut) waiting.push(reply);
              else setTimeout(() => link.receive(reply), 0);
            },
            () => true,
            "the phone's socket",
          ),
        0,
      ),
  });
  return {
    link,
    gate(next: "shut" | "open") {
      shut = next === "shut";
      if (!shut) for (const reply of waiting.splice(0)) setTimeout(() => link.receive(reply), 0);
    },
  };
}

describe("a second device follows across the object's takeover (decision 0094)", () => {
  it("S12/0094: the tab hands the lease over while the phone is still behind on what the tab pushed; the phone gets the rest and then the object's steps, without being told it is behind", async () => {
    const world = await followWorld({ to: 12 });
    world.tab.resume();
    await runUntil(world.clock, () => world.printed.length >= 1);
    world.hold(true); // the copy stands still while the phone joins
    const phoneStorage = await openSqliteStorage({ vfs: "memory" });
    const { link, gate } = gatedLink(world.end, world.clock);
    link.connected();
    const rebuilt = rebuildFromObject({ storage: phoneStorage, link, place: "phone", now: world.clock.now() }, ctx);
    await runUntil(world.clock, async () => (await phoneStorage.load()).log !== undefined);
    await rebuilt;
    const phone = await Harness.open(
      phoneStorage,
      { registry: createRegistry(), clock: world.clock, lease: { place: "phone", arbiter: remoteArbiter(link) } },
      ctx,
    );
    const holders: Array<LeaseHolder | undefined> = [];
    let forked = 0;
    const follower = new Follower({
      harness: phone,
      link,
      place: "phone",
      onHolder: (holder) => void holders.push(holder),
      onForked: () => void forked++,
    });
    await runUntil(world.clock, () => follower.following);
    const askedAt = follower.head;
    world.hold(false);
    await runUntil(world.clock, () => follower.head > askedAt);
    // The phone falls behind: what the object relays to it waits on the way while the tab counts on.
    gate("shut");
    await runUntil(world.clock, () => world.printed.filter(([place]) => place === "tab").length >= 6);
    const mark = await world.tab.handOver(ctx);
    await world.mirror.leave(mark, ctx);
    await runUntil(world.clock, () => world.end.harness !== undefined);
    await world.end.harness;
    await runUntil(world.clock, () => world.printed.some(([place]) => place === "object"));
    expect(follower.head).toBeLessThan(mark.position); // still behind the takeover
    gate("open");
    await runUntil(
      world.clock,
      async () => (await world.copy.query("SELECT status FROM tasks WHERE id = ?", world.taskId))[0]?.status === "terminal",
    );
    await runUntil(world.clock, () => follower.head === world.end.head);
    // Before: told `behind` at the takeover (the tab's last transactions gone from the feed's memory).
    expect(forked).toBe(0);
    const phoneRows = await rows(phoneStorage);
    const copyRows = await rows(world.copy);
    expect(phoneRows.tasks).toEqual(copyRows.tasks);
    expect(phoneRows.head).toEqual(copyRows.head);
    expect(holders.at(-1)).toEqual({ place: "object", object: true });
    // Every tick once, in one place or the other.
    expect(world.printed.map(([, line]) => line)).toEqual(Array.from({ length: 12 }, (_, i) => `tick ${i + 1}`));
    follower.stop?.();
    await phone.close(ctx);
    await (await world.end.harness)?.close(ctx);
  });
});
