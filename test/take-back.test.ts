import fc from "fast-check";
import { describe, expect, it } from "vitest";
import { defineTask } from "../src/index.ts";
import { comebackWorld, type Fate } from "./comeback-support.ts";
import { rows } from "./follow-support.ts";
import { ctx, runUntil } from "./support.ts";

// Issue 27 item 3's last sentence (decision 0038): the tab that came back takes the lease back the same way —
// the object drains, pushes what the tab lacks, releases at a position; the tab checks it holds everything up to it,
// takes the next epoch and recovers as after a crash in one transaction, then runs and mirrors again.

type World = Awaited<ReturnType<typeof comebackWorld>>;

/** The tab hands over at tick `away`, comes back read-only and follows until the object printed tick `back`. */
async function awayAndBack(world: World, away: number, back: number) {
  world.tab.harness.resume();
  await runUntil(world.clock, () => world.printed.length >= away);
  let handed = false;
  void world.tab.mirror!.handOver(ctx).then(() => (handed = true));
  await runUntil(world.clock, () => handed);
  const object = (await world.end.harness)!;
  const following = await world.reopenTab();
  await runUntil(world.clock, () => world.printed.length >= back);
  return { object, following };
}

const ticks = (world: World) => world.printed.map(([, line]) => line);
const places = (world: World) => world.printed.map(([place]) => place);

describe("the tab takes the lease back (issue 27 item 3, decision 0038)", () => {
  it("S4/S12: mid-count the tab asks; the object drains and releases at P, the tab takes epoch 3 at P + 1 and counts to the end, every tick once", async () => {
    const world = await comebackWorld({ to: 10, ttlMs: 60_000 });
    const { object, following } = await awayAndBack(world, 2, 5);
    const { released, tab } = await world.takeBack(following);
    expect(object.closed).toBe(true);
    expect(tab.harness.readOnly).toBe(false);
    expect(tab.harness.lease).toMatchObject({ place: "tab", epoch: 3 });
    expect(world.record()).toMatchObject({ epoch: 3, holder: "tab" });
    await runUntil(world.clock, async () => (await tab.harness.getTask(world.taskId, ctx))?.state.status === "terminal");
    expect(ticks(world)).toEqual([1, 2, 3, 4, 5, 6, 7, 8, 9, 10].map((n) => `tick ${n}`));
    // Nothing ran in two places: the object's ticks end where the tab's begin again.
    const firstBack = places(world).indexOf("tab", 2);
    expect(
      places(world)
        .slice(2, firstBack)
        .every((place) => place === "object"),
    ).toBe(true);
    expect(
      places(world)
        .slice(firstBack)
        .every((place) => place === "tab"),
    ).toBe(true);
    const epochs = (await rows(world.tabStorage)).epochs;
    expect(epochs).toEqual([
      { epoch: 1, start: 1 },
      { epoch: 2, start: epochs[1]!.start },
      { epoch: 3, start: released.position + 1 },
    ]);
    // The recovery is the new epoch's first transaction; the mirror carries the tab's run to the object again.
    expect(tab.harness.recovery.stop).toBe("crash");
    await runUntil(world.clock, () => tab.mirror!.acknowledged >= tab.harness.lease!.position);
    expect(await rows(world.copy)).toEqual(await rows(world.tabStorage));
    await tab.harness.close(ctx);
  });

  it("S4: a phase the object's drain cannot join stays running; the tab's recovery counts its restart in epoch 3's first transaction and runs it", async () => {
    // On the object the step never returns (it ignores its context); in the tab it completes.
    const stuck = (place: string) =>
      defineTask<Record<string, never>, { phase: "work" }, string>({
        name: "example.stuck",
        version: 1,
        initial: () => ({ phase: "work" }),
        phases: {
          work: async (_task, runtime, context) => {
            if (place === "object") return new Promise<void>(() => {});
            await runtime.commit(() => ({ status: "terminal", outcome: { status: "completed", result: `done in the ${place}` } }), context);
          },
        },
        abort: async () => {},
      });
    const world = await comebackWorld({ to: 4, ttlMs: 60_000, tasks: (place) => [stuck(place)], settings: { closeTimeoutMs: 100 } });
    const { object, following } = await awayAndBack(world, 2, 2);
    const stuckId = await (await object.root(ctx)).commit((tx) => tx.createTask(stuck("object"), {}), ctx);
    await runUntil(world.clock, async () => (await object.getTask(stuckId, ctx))?.state.status === "running");
    await runUntil(world.clock, () => following.follower!.head >= object.lease!.position);
    const { released, tab } = await world.takeBack(following);
    expect(tab.harness.recovery.tasks).toContainEqual({ id: stuckId, kind: "example.stuck", restarts: 1 });
    // Taking the epoch and recovering are one transaction: epoch 3 begins with it, right after the release.
    const first = (await world.tabStorage.readEpochs()).at(-1);
    expect(first).toEqual({ epoch: 3, start: released.position + 1 });
    await runUntil(world.clock, async () => (await tab.harness.getTask(stuckId, ctx))?.state.status === "terminal");
    expect((await tab.harness.getTask(stuckId, ctx))?.state).toMatchObject({ outcome: { result: "done in the tab" } });
    await tab.harness.close(ctx);
  });

  it("S4/S6/0057: a phase the object's drain joins (it returns at its signal) is parked, not cut: the tab's recovery counts no restart and runs it", async () => {
    // A long step (a model request, say) that stops at its signal on the object, and completes in the tab.
    const long = (place: string) =>
      defineTask<Record<string, never>, { phase: "work" }, string>({
        name: "example.long",
        version: 1,
        initial: () => ({ phase: "work" }),
        phases: {
          work: async (_task, runtime, context) => {
            if (place === "object") return runtime.untilAborted();
            await runtime.commit(() => ({ status: "terminal", outcome: { status: "completed", result: `done in the ${place}` } }), context);
          },
        },
        abort: async () => {},
      });
    const world = await comebackWorld({ to: 4, ttlMs: 60_000, tasks: (place) => [long(place)] });
    const { object, following } = await awayAndBack(world, 2, 2);
    const longId = await (await object.root(ctx)).commit((tx) => tx.createTask(long("object"), {}), ctx);
    await runUntil(world.clock, async () => (await object.getTask(longId, ctx))?.state.status === "running");
    await runUntil(world.clock, () => following.follower!.head >= object.lease!.position);
    const { tab } = await world.takeBack(following);
    // Before (decision 0057): { id, kind: "example.long", restarts: 1 } — one restart per move, 5 moves and it faulted.
    expect(tab.harness.recovery.tasks.filter((task) => task.id === longId)).toEqual([]);
    expect((await tab.harness.getTask(longId, ctx))?.restarts ?? 0).toBe(0);
    await runUntil(world.clock, async () => (await tab.harness.getTask(longId, ctx))?.state.status === "terminal");
    expect((await tab.harness.getTask(longId, ctx))?.state).toMatchObject({ outcome: { result: "done in the tab" } });
    await tab.harness.close(ctx);
  });

  it("the tab dies right after the object released to it: the reservation lapses after one lease, the object takes the lease back (epoch 3) and finishes", async () => {
    const world = await comebackWorld({ to: 8, ttlMs: 5_000 });
    const { following } = await awayAndBack(world, 2, 4);
    let released: { position: number } | undefined;
    void following.follower!.takeBack(ctx).then((answer) => (released = answer));
    await runUntil(world.clock, () => released !== undefined);
    // The tab is gone: its follower and link say nothing more, it never takes the lease.
    following.follower!.stop();
    world.link.disconnected();
    expect(world.record()).toMatchObject({ epoch: 2, heir: "tab", releasedAt: released!.position });
    await runUntil(world.clock, async () => {
      const harness = await world.end.harness;
      return harness !== undefined && (await harness.getTask(world.taskId, ctx))?.state.status === "terminal";
    });
    expect(world.record()).toMatchObject({ epoch: 3, holder: "object" });
    expect(ticks(world)).toEqual([1, 2, 3, 4, 5, 6, 7, 8].map((n) => `tick ${n}`));
    await (await world.end.harness)!.close(ctx);
  });

  it("asked twice (a resend after a lost answer), the object hands back once: the same release, one drain", async () => {
    const world = await comebackWorld({ to: 8, ttlMs: 60_000 });
    const { following } = await awayAndBack(world, 2, 4);
    const answers: Array<{ position: number }> = [];
    void following.follower!.takeBack(ctx).then((answer) => answers.push(answer));
    void following.follower!.takeBack(ctx).then((answer) => answers.push(answer));
    await runUntil(world.clock, () => answers.length === 2);
    expect(answers[0]).toEqual(answers[1]);
    expect(world.record()).toMatchObject({ epoch: 2, heir: "tab", releasedAt: answers[0]!.position });
  });

  it("property: whatever the link loses or duplicates during the hand-over, the return and after, each tick is printed once and the two copies end equal", async () => {
    const fates = fc.array(fc.constantFrom("deliver", "deliver", "deliver", "drop", "twice"), { minLength: 120, maxLength: 120 });
    await fc.assert(
      fc.asyncProperty(fates, fates, fc.integer({ min: 3, max: 6 }), async (toObject, toTab, back) => {
        const fate: Fate = (way, index) => ((way === "toObject" ? toObject : toTab)[index] ?? "deliver") as ReturnType<Fate>;
        const world = await comebackWorld({ to: 8, ttlMs: 60_000, fate });
        world.loseFrames();
        const { following } = await awayAndBack(world, 2, back);
        const { tab } = await world.takeBack(following);
        expect(tab.harness.lease?.epoch).toBe(3);
        await runUntil(world.clock, async () => (await tab.harness.getTask(world.taskId, ctx))?.state.status === "terminal", 5_000);
        await runUntil(world.clock, () => tab.mirror!.acknowledged >= tab.harness.lease!.position, 5_000);
        expect(ticks(world)).toEqual([1, 2, 3, 4, 5, 6, 7, 8].map((n) => `tick ${n}`));
        // One transaction per position: the copies agree row for row.
        expect(await rows(world.copy)).toEqual(await rows(world.tabStorage));
        await tab.harness.close(ctx);
      }),
      { numRuns: 12 },
    );
  }, 60_000); // ≈ 0.2 s a run alone; 20 runs once passed the default 20 s with the whole suite beside them on 2 cores
});
