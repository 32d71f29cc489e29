import { describe, expect, it } from "vitest";
import { Follower } from "../src/follow/follower.ts";
import { listForks } from "../src/follow/fork.ts";
import { FollowLink } from "../src/follow/link-client.ts";
import { remoteArbiter } from "../src/follow/mirror.ts";
import { rebuildFromObject } from "../src/follow/snapshot.ts";
import { Harness } from "../src/index.ts";
import { openSqliteStorage } from "../src/storage/sqlite/open-storage.ts";
import { comebackWorld } from "./comeback-support.ts";
import { rows } from "./follow-support.ts";
import { ctx, runUntil, wire } from "./support.ts";

// Issue 27's rebuild (decision 0047): a tab that cannot follow the object's log — its copy forked, it is a new
// device's, or it is behind the object's trimmed tail — rebuilds its copy from the object's snapshot, then follows.

type World = Awaited<ReturnType<typeof comebackWorld>>;

/** Runs the world's clock until `promise` settles; resolves (or rejects) with it. */
async function settle<T>(world: World, promise: Promise<T>): Promise<T> {
  let done = false;
  const watched = promise.finally(() => (done = true));
  watched.catch(() => {});
  await runUntil(world.clock, () => done);
  return watched;
}

/** The tab goes on alone past its lease's expiry while the object takes over: its copy forks (decision 0032). */
async function forkTheTab(world: World) {
  world.tab.harness.resume();
  await runUntil(world.clock, () => world.printed.length >= 2);
  world.link.disconnected();
  await runUntil(world.clock, () => world.end.harness !== undefined);
  await runUntil(world.clock, () => world.tab.harness.closed);
  world.link.connected();
  const back = await world.openTab();
  await runUntil(world.clock, () => world.forks.length > 0);
  return back;
}

/**
 * A second device on its own link to the same object, with an empty database. While `pushes.lost`, the object's
 * pushes to it are lost on the way (the socket stays up: a device too slow to keep up, say).
 */
async function newDevice(world: World, place: string) {
  const storage = await openSqliteStorage({ vfs: "memory" });
  const pushes = { lost: false, behind: 0 };
  const carried = wire(world.clock);
  const link: FollowLink = new FollowLink({
    clock: world.clock,
    send: (frame) => carried(() => void world.end.receive(frame, reply, () => true, `${place}'s socket`)),
  });
  const reply = (frame: string) => {
    const type = (JSON.parse(frame) as { type: string }).type;
    if (type === "behind") pushes.behind++;
    if (pushes.lost && type === "push") return;
    carried(() => link.receive(frame));
  };
  link.connected();
  const behind: unknown[] = [];
  const open = async () => {
    const harness = await settle(
      world,
      Harness.open(storage, { registry: world.registry(place), clock: world.clock, lease: { place, arbiter: remoteArbiter(link) } }, ctx),
    );
    const follower = new Follower({ harness, link, place, onForked: (theirs) => void behind.push(theirs) });
    return { harness, follower };
  };
  return { storage, link, behind, open, pushes };
}

describe("a tab rebuilt from the object's snapshot (issue 27, decision 0047)", () => {
  it("0047: a forked tab keeps its fork, rebuilds from the object's snapshot in one step, follows the object live from there and takes the lease back; the fork survives", async () => {
    const world = await comebackWorld({ to: 12, ttlMs: 1_000 });
    const back = await forkTheTab(world);
    const object = (await world.end.harness)!;
    const mine = (await world.tabStorage.load()).log!;
    expect(back.harness.readOnly).toBe(true);
    expect(back.follower!.following).toBe(false);
    back.follower!.stop();
    await back.harness.close(ctx);

    const head = await settle(
      world,
      rebuildFromObject({ storage: world.tabStorage, link: world.link, place: "tab", now: world.clock.now() }, ctx),
    );
    // The fork was kept before the copy was replaced: the tab's own stretch of epoch 1 past where the object took over.
    const forks = await listForks(world.tabStorage);
    expect(forks).toHaveLength(1);
    expect(forks[0]!.mine).toEqual(mine);
    expect(forks[0]!.transactions.length).toBeGreaterThan(0);
    expect(forks[0]!.transactions.every((transaction) => transaction.epoch === 1)).toBe(true);
    // The copy is the object's history now: its head is of the object's epoch.
    expect(head.epoch).toBe(2);
    expect((await world.tabStorage.load()).log).toEqual(head);
    expect((await rows(world.tabStorage)).epochs).toEqual((await rows(world.copy)).epochs);

    const again = await world.reopenTab();
    expect(again.harness.readOnly).toBe(true);
    await runUntil(world.clock, () => again.follower!.following);
    await runUntil(world.clock, () => again.follower!.head >= head.position);

    const { tab } = await world.takeBack(again);
    expect(tab.harness.readOnly).toBe(false);
    expect(tab.harness.lease!.epoch).toBe(3);
    await runUntil(world.clock, async () => (await tab.harness.getTask(world.taskId, ctx))?.state.status === "terminal");
    expect((await tab.harness.getTask(world.taskId, ctx))?.state).toMatchObject({
      status: "terminal",
      outcome: { status: "completed", result: "counted to 12" },
    });
    // What the tab writes under the lease it took back reaches the object's copy.
    await (await tab.harness.root(ctx)).commit((tx) => tx.setDocument("notes", "after-rebuild", 1), ctx);
    await runUntil(world.clock, async () => (await world.copy.getDocument("notes", "after-rebuild")) === 1);
    expect(await rows(world.tabStorage)).toEqual(await rows(world.copy));
    expect((await listForks(world.tabStorage)).map((fork) => fork.id)).toEqual(forks.map((fork) => fork.id));
    expect(object.closed).toBe(true);
    await tab.harness.close(ctx);
  });

  it("0047: a new device's empty tab, behind the object's trimmed log, rebuilds from the snapshot and follows the conversation live to the object's rows exactly", async () => {
    const world = await comebackWorld({ to: 24, keepLog: 4 });
    world.tab.harness.resume();
    await runUntil(world.clock, () => world.printed.length >= 2);
    await settle(world, world.tab.mirror!.handOver(ctx));
    const object = (await world.end.harness)!;
    await runUntil(world.clock, () => world.printed.length >= 10);
    // The object trimmed its log while it held the lease: the tail keeps its last few transactions only.
    const tail = await world.copy.readLog(0, 100);
    expect(tail[0]!.fence.position).toBeGreaterThan(1);
    expect(tail.length).toBeLessThanOrEqual(4 + 2);

    const phone = await newDevice(world, "phone");
    const first = await phone.open();
    expect(first.harness.readOnly).toBe(true);
    await runUntil(world.clock, () => phone.behind.length > 0);
    expect(first.follower.following).toBe(false);
    first.follower.stop();
    await first.harness.close(ctx);

    const at = await settle(
      world,
      rebuildFromObject({ storage: phone.storage, link: phone.link, place: "phone", now: world.clock.now() }, ctx),
    );
    // The object goes on past its keepLog before the phone asks to follow: the tail after the snapshot is kept for it.
    await runUntil(world.clock, () => world.printed.length >= 18);
    expect(object.lease!.position).toBeGreaterThan(at.position + 4);
    const followed = await phone.open();
    await runUntil(world.clock, () => followed.follower.following);
    await runUntil(world.clock, async () => (await object.getTask(world.taskId, ctx))?.state.status === "terminal");
    await runUntil(world.clock, () => followed.follower.head >= object.lease!.position);
    const task = await followed.harness.getTask(world.taskId, ctx);
    expect(task?.state).toMatchObject({ status: "terminal", outcome: { status: "completed", result: "counted to 24" } });
    expect(await rows(phone.storage)).toEqual(await rows(world.copy));
    expect(await listForks(phone.storage)).toEqual([]);
    await object.close(ctx);
  });

  it("0047: the object serves follow.snapshot only through its door, never for its own place; an id it does not keep is SnapshotUnavailable, and parts are what it took", async () => {
    const world = await comebackWorld({ to: 3 });
    await runUntil(world.clock, async () => ((await world.copy.load()).log?.position ?? 0) >= 1);
    const answers: Array<Record<string, unknown>> = [];
    const ask = (args: unknown[], allow: (action: string) => boolean = () => true) =>
      world.end.receive(
        JSON.stringify({ type: "call", id: `c${answers.length}-${args.length}`, topic: "follow", method: "snapshot", args }),
        (frame) => void answers.push(JSON.parse(frame) as Record<string, unknown>),
        (action) => allow(action),
      );
    await ask(["phone"], (action) => action !== "follow.snapshot");
    await ask(["object"]);
    await ask(["phone", "not-kept", 0]);
    await ask(["phone", "x".repeat(101), 0]);
    const before = (await world.copy.load()).log!.position;
    await ask(["phone"]);
    const after = (await world.copy.load()).log!.position;
    const names = answers.slice(0, 4).map((answer) => (answer.error as { name: string }).name);
    expect(names).toEqual(["NotAuthorized", "NotAuthorized", "SnapshotUnavailable", "FollowMessageRefused"]);
    const part = answers[4]!.value as { id: string; at: { position: number }; index: number; count: number; text: string };
    expect(part.index).toBe(0);
    // The copy's head when the snapshot was read (the tab may still be pushing: between the heads around the call).
    expect(part.at.position).toBeGreaterThanOrEqual(before);
    expect(part.at.position).toBeLessThanOrEqual(after);
    await ask(["phone", part.id, part.count]);
    expect((answers[5]!.error as { name: string }).name).toBe("SnapshotUnavailable");
    await world.tab.harness.close(ctx);
  });

  it("0053: a connected device that falls more than 8 x keepLog behind is told so while connected (no reconnect), finds it is behind, rebuilds and follows to the end", async () => {
    // Its memory holds little (roundBytes 4 KB): what the tab lacks comes from the trimmed tail, as past 256 transactions.
    const world = await comebackWorld({ to: 60, keepLog: 2, roundBytes: 4_000 });
    world.tab.harness.resume();
    await runUntil(world.clock, () => world.printed.length >= 2);
    await settle(world, world.tab.mirror!.handOver(ctx));
    const object = (await world.end.harness)!;
    await runUntil(world.clock, () => world.printed.length >= 6);
    const phone = await newDevice(world, "phone");
    const first = await phone.open();
    await runUntil(world.clock, () => phone.behind.length > 0);
    first.follower.stop();
    await first.harness.close(ctx);
    await settle(world, rebuildFromObject({ storage: phone.storage, link: phone.link, place: "phone", now: world.clock.now() }, ctx));
    const following = await phone.open();
    await runUntil(world.clock, () => following.follower.following);
    await runUntil(world.clock, () => following.follower.head >= object.lease!.position);

    // The phone stops keeping up (its pushes are lost; the socket stays up) while the object counts on.
    phone.pushes.lost = true;
    const stuck = following.follower.head;
    const told = phone.pushes.behind; // the empty phone's first follow.from was told too (harmless: it knew)
    await runUntil(world.clock, async () => ((await world.copy.readLog(0, 1))[0]?.fence.position ?? 0) > stuck + 1);
    // The object tells it once that its log no longer holds what it lacks; the phone asks again and finds it is behind.
    await runUntil(world.clock, () => phone.behind.length > 1);
    expect(phone.pushes.behind).toBe(told + 1);
    expect(following.follower.following).toBe(false);
    phone.pushes.lost = false;

    // It rebuilds (what the browser host does when told) and follows to the end.
    following.follower.stop();
    await following.harness.close(ctx);
    await settle(world, rebuildFromObject({ storage: phone.storage, link: phone.link, place: "phone", now: world.clock.now() }, ctx));
    const again = await phone.open();
    await runUntil(world.clock, () => again.follower.following);
    await runUntil(world.clock, async () => (await object.getTask(world.taskId, ctx))?.state.status === "terminal");
    await runUntil(world.clock, () => again.follower.head >= object.lease!.position);
    expect((await again.harness.getTask(world.taskId, ctx))?.state).toMatchObject({ outcome: { result: "counted to 60" } });
    expect(await rows(phone.storage)).toEqual(await rows(world.copy));
    expect(phone.pushes.behind).toBe(told + 1);
    await object.close(ctx);
  });
});
