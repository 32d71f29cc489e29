import { describe, expect, it } from "vitest";
import { Follower } from "../src/follow/follower.ts";
import { remoteArbiter } from "../src/follow/mirror.ts";
import { rebuildFromObject } from "../src/follow/snapshot.ts";
import { createRegistry, Harness } from "../src/index.ts";
import { openSqliteStorage } from "../src/storage/sqlite/open-storage.ts";
import { followWorld, linkToObject, rows } from "./follow-support.ts";
import { ctx, runUntil } from "./support.ts";

// Decision 0099 (a newcomer's run in Chromium against wrangler dev): a second device that joined while a tab held the
// lease and counted rebuilt its copy again and again (10 reopens in 22 s) and its view stood still meanwhile. Its
// copy was rebuilt from the object's snapshot at P; before it asked `follow.from(P)` the tab had pushed more, and the
// copy trims what a pusher sent from its durable tail, so the answer's `after` was the copy's head: "behind", rebuild,
// and again. What the tab pushed is kept in the feed's memory (decision 0090) and served from there; `follow.from`
// now says so (`after` reaches back to the oldest transaction in memory), and the device follows from P.

describe("a second device whose snapshot the tab's pushes overtook follows from it (decision 0099)", () => {
  it("S12/0090: the phone's copy, rebuilt at P while the tab counts, asks follow.from(P) after the copy moved past P: it follows (no fork, no rebuild) and reaches the head", async () => {
    const world = await followWorld({ to: 12 });
    world.tab.resume();
    await runUntil(world.clock, () => world.printed.length >= 1);
    const phoneStorage = await openSqliteStorage({ vfs: "memory" });
    const link = linkToObject(world.end, world.clock);
    link.connected();
    world.hold(true); // the snapshot is taken at a head that stands still
    const rebuilt = rebuildFromObject({ storage: phoneStorage, link, place: "phone", now: world.clock.now() }, ctx);
    await runUntil(world.clock, async () => (await phoneStorage.load()).log !== undefined);
    await rebuilt;
    const snapshotAt = (await phoneStorage.load()).log!.position;
    // The tab's pushes overtake the snapshot before the phone asks where to follow from.
    world.hold(false);
    await runUntil(world.clock, () => world.end.head >= snapshotAt + 3);
    const phone = await Harness.open(
      phoneStorage,
      { registry: createRegistry(), clock: world.clock, lease: { place: "phone", arbiter: remoteArbiter(link) } },
      ctx,
    );
    let forked = 0;
    const follower = new Follower({ harness: phone, link, place: "phone", onForked: () => void forked++ });
    // Before: told it cannot follow (behind what the durable tail keeps), so the worker rebuilt again.
    await runUntil(world.clock, () => follower.following || forked > 0);
    expect(forked).toBe(0);
    expect(follower.following).toBe(true);
    await runUntil(
      world.clock,
      async () => (await world.tabStorage.query("SELECT status FROM tasks WHERE id = ?", world.taskId))[0]?.status === "terminal",
    );
    await runUntil(world.clock, () => follower.head === world.end.head);
    expect((await rows(phoneStorage)).tasks).toEqual((await rows(world.copy)).tasks);
    expect(await phoneStorage.query("SELECT status FROM tasks WHERE id = ?", world.taskId)).toEqual([{ status: "terminal" }]);
    follower.stop();
    await phone.close(ctx);
  });
});
