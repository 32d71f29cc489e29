import { afterAll, beforeAll, describe, expect, it } from "vitest";
import { counterTask } from "../../examples/counter-task.ts";
import { systemClock } from "../../src/base/clock.ts";
import { Follower } from "../../src/follow/follower.ts";
import { FollowLink } from "../../src/follow/link-client.ts";
import { Mirror, remoteArbiter } from "../../src/follow/mirror.ts";
import { rebuildFromObject } from "../../src/follow/snapshot.ts";
import { createRegistry, BACKGROUND_CONTEXT as ctx, defineExtension, Harness } from "../../src/index.ts";
import { openSqliteStorage } from "../../src/storage/sqlite/open-storage.ts";
import { followSocket, until } from "./follow-support.ts";
import { type Edge, startEdge } from "./support.ts";

// Decision 0047 in workerd: the object trims its log while it holds the lease (keepLog 6 here), and serves its copy's
// snapshot over a real follow socket; a new device's empty tab in Node rebuilds from it and follows the object live.

interface State {
  head: number;
  epochs: Array<{ epoch: number; start: number }>;
  tasks: Array<{ id: number; status: string; n: number | null }>;
  tail?: { first: number | null; count: number };
}

/** A place on its own follow socket (caller alice) with an empty sqlite-wasm database. */
async function place(edge: Edge, name: string) {
  const link = new FollowLink({ clock: systemClock, send: (frame) => socket.send(frame), resendMs: 500 });
  const socket = followSocket(edge, name, "alice", link);
  const storage = await openSqliteStorage({ vfs: "memory" });
  await until("the follow socket opens", () => socket.open);
  return { link, socket, storage };
}

describe("the object's snapshot and its trimmed log (issue 27, decision 0047)", () => {
  let edge: Edge;
  beforeAll(async () => {
    edge = await startEdge({ bindings: { FOLLOW_KEEP_LOG: "6" } });
  }, 120_000);
  afterAll(async () => {
    await edge?.dispose();
  });
  const state = (name: string) => edge.json<State>("follow", name, "/state");

  it("0047: the object trims its log while it counts; a new device's empty tab, behind the trim, rebuilds from the snapshot (over 1 MB, in parts) and follows the object to the end", async () => {
    const name = "snapshot-new-device";
    const tab = await place(edge, name);
    let mirror: Mirror | undefined;
    let leaving: Promise<unknown> | undefined;
    const registry = createRegistry().install(
      defineExtension({
        name: "example",
        tasks: [
          counterTask((line) => {
            if (line === "tick 2") queueMicrotask(() => (leaving = mirror!.handOver(ctx)));
          }),
        ],
      }),
    );
    const harness = await Harness.open(tab.storage, { registry, lease: { place: "tab", arbiter: remoteArbiter(tab.link) } }, ctx);
    mirror = new Mirror({ harness, link: tab.link, clock: systemClock, resendMs: 500 });
    const root = await harness.root(ctx);
    // Three documents of about 500 KB: the object's copy (and so its snapshot) is over the link's 1 MB message.
    for (const key of ["a", "b", "c"]) await root.commit((tx) => tx.setDocument("large", key, { text: key.repeat(500_000) }), ctx);
    const taskId = await root.commit(
      (tx) =>
        tx.createTask(
          counterTask(() => {}),
          { to: 24 },
        ),
      ctx,
    );
    harness.resume();
    await until("the hand-over", () => leaving);
    await leaving;
    tab.socket.stop();
    await until("the object's tick 14", async () => ((await state(name)).tasks.find((task) => task.id === taskId)?.n ?? 0) >= 14);
    // While it held the lease the object trimmed its log: only the last few transactions are kept.
    const during = await state(name);
    expect(during.tail!.first).toBeGreaterThan(1);
    expect(during.tail!.count).toBeLessThanOrEqual(6 + 2);

    const phone = await place(edge, name);
    const behind: unknown[] = [];
    const first = await Harness.open(
      phone.storage,
      { registry: createRegistry(), lease: { place: "phone", arbiter: remoteArbiter(phone.link) } },
      ctx,
    );
    expect(first.readOnly).toBe(true);
    const asked = new Follower({ harness: first, link: phone.link, place: "phone", onForked: (theirs) => void behind.push(theirs) });
    await until("the phone is told it is behind", () => behind.length > 0);
    expect(asked.following).toBe(false);
    asked.stop();
    await first.close(ctx);

    const frames = phone.socket.received.length;
    const head = await rebuildFromObject({ storage: phone.storage, link: phone.link, place: "phone", now: Date.now() }, ctx);
    // The snapshot came in several answers, each a frame of at most 1 MB.
    const answers = phone.socket.received.slice(frames).filter((frame) => frame.includes('"type":"answer"'));
    expect(answers.length).toBeGreaterThan(1);
    expect(Math.max(...answers.map((frame) => Buffer.byteLength(frame)))).toBeLessThanOrEqual(1_000_000);
    // The object's takeover epoch: the one after the tab's (the object drew the tab's at random, decision 0074).
    expect(head.epoch).toBe(during.epochs[0]!.epoch + 1);
    expect(during.epochs.map((stretch) => stretch.epoch)).toEqual([during.epochs[0]!.epoch, during.epochs[0]!.epoch + 1]);
    expect((await phone.storage.getDocument("large", "c")) as { text: string }).toEqual({ text: "c".repeat(500_000) });

    const again = await Harness.open(
      phone.storage,
      { registry: createRegistry(), lease: { place: "phone", arbiter: remoteArbiter(phone.link) } },
      ctx,
    );
    expect(again.readOnly).toBe(true);
    const follower = new Follower({ harness: again, link: phone.link, place: "phone" });
    await until("the phone follows", () => follower.following);
    await until("the counter ends", async () => (await state(name)).tasks.find((task) => task.id === taskId)?.status === "terminal");
    const end = await state(name);
    await until("the phone's copy reaches the object's head", () => follower.head >= end.head);
    expect((await again.getTask(taskId, ctx))?.state).toMatchObject({ status: "terminal", outcome: { result: "counted to 24" } });
    expect((await phone.storage.readEpochs()).map((stretch) => stretch.epoch)).toEqual(end.epochs.map((stretch) => stretch.epoch));
    follower.stop();
    await again.close(ctx);
    phone.socket.stop();
  }, 90_000);
});
