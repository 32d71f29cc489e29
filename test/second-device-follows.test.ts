import { describe, expect, it } from "vitest";
import { Follower } from "../src/follow/follower.ts";
import { remoteArbiter } from "../src/follow/mirror.ts";
import { rebuildFromObject } from "../src/follow/snapshot.ts";
import type { LeaseHolder } from "../src/follow/wire.ts";
import { createRegistry, Harness } from "../src/index.ts";
import { openSqliteStorage } from "../src/storage/sqlite/open-storage.ts";
import { followWorld, linkToObject, rows } from "./follow-support.ts";
import { ctx, runUntil } from "./support.ts";

// Decision 0090 (issue 27 item 2): the object pushed a following tab only what its own harness stored. While a tab
// held the lease and pushed, a second device's following tab stood still (its copy at the head it asked from) and,
// after a Run here, named no holder. Now what a tab pushes, once applied to the copy, goes on to the others that
// follow, each push naming the tab as the holder.

describe("a second device follows the tab that holds the lease, through the object (decision 0090)", () => {
  it("S12/0090: while the tab counts under the lease, the phone's read-only copy gets every transaction the tab pushed, in order, and hears the tab named as the holder", async () => {
    const world = await followWorld({ to: 6 });
    world.tab.resume();
    await runUntil(world.clock, () => world.printed.length >= 1);
    world.hold(true); // the copy stands still while the phone joins (the tab's pushes wait on the way)
    // The phone joins as a new device does: its copy rebuilt from the object's snapshot, then it follows from there.
    const phoneStorage = await openSqliteStorage({ vfs: "memory" });
    const link = linkToObject(world.end, world.clock);
    link.connected();
    const rebuilt = rebuildFromObject({ storage: phoneStorage, link, place: "phone", now: world.clock.now() }, ctx);
    await runUntil(world.clock, async () => (await phoneStorage.load()).log !== undefined);
    await rebuilt;
    const phone = await Harness.open(
      phoneStorage,
      { registry: createRegistry(), clock: world.clock, lease: { place: "phone", arbiter: remoteArbiter(link) } },
      ctx,
    );
    expect(phone.readOnly).toBe(true);
    const holders: Array<LeaseHolder | undefined> = [];
    const follower = new Follower({ harness: phone, link, place: "phone", onHolder: (holder) => void holders.push(holder) });
    await runUntil(world.clock, () => follower.following);
    const askedAt = follower.head;
    world.hold(false);
    // The tab counts to the end; the phone's copy reaches the copy's head (before: it stayed at askedAt).
    await runUntil(
      world.clock,
      async () => (await world.tabStorage.query("SELECT status FROM tasks WHERE id = ?", world.taskId))[0]?.status === "terminal",
    );
    await runUntil(world.clock, () => world.end.head > askedAt && follower.head === world.end.head);
    expect(follower.head).toBeGreaterThan(askedAt);
    const phoneRows = await rows(phoneStorage);
    const copyRows = await rows(world.copy);
    expect(phoneRows.tasks).toEqual(copyRows.tasks);
    expect(phoneRows.head).toEqual(copyRows.head);
    // Every push named the tab (before: only the follow.from answer did).
    expect(holders.length).toBeGreaterThan(1);
    for (const holder of holders) expect(holder).toEqual({ place: "tab", object: false });
    // The tab printed each tick once; the phone printed nothing (it only follows).
    expect(world.printed.map(([place, line]) => `${place}: ${line}`)).toEqual([...[1, 2, 3, 4, 5, 6].map((n) => `tab: tick ${n}`)]);
    // The phone's copy holds the finished count too.
    expect(await phoneStorage.query("SELECT status FROM tasks WHERE id = ?", world.taskId)).toEqual([{ status: "terminal" }]);
    follower.stop?.();
    await phone.close(ctx);
  });
});
