import fc from "fast-check";
import { describe, expect, it } from "vitest";
import { comebackWorld, type Fate } from "./comeback-support.ts";
import { rows } from "./follow-support.ts";
import { ctx, runUntil } from "./support.ts";

// Issue 27 item 3's last sentence (decision 0038): after the tab handed over, the object runs and pushes every
// transaction it stores to the tab that came back; the tab's read-only harness follows it live.

/** The tab hands over (drained) once it printed tick `at`; resolves with the position it released at. */
async function handOverAt(world: Awaited<ReturnType<typeof comebackWorld>>, at: number): Promise<number> {
  world.tab.harness.resume();
  await runUntil(world.clock, () => world.printed.length >= at);
  const mark = await world.tab.mirror!.handOver(ctx);
  return mark.position;
}

describe("a tab that comes back follows the object live (issue 27 item 3, decision 0038)", () => {
  it("S4/S12: reopened while the object holds the lease, the tab opens read-only and its harness moves with each of the object's steps, to the object's rows exactly", async () => {
    const world = await comebackWorld({ to: 8 });
    const released = await handOverAt(world, 2);
    const object = (await world.end.harness)!;
    const back = await world.openTab();
    expect(back.harness.readOnly).toBe(true);
    // What a page on the tab sees: the counter's checkpoint as each commit reaches the tab's harness.
    const seen: number[] = [];
    back.harness.onCommit(({ batch }) => {
      for (const task of batch.tasks)
        if (task.id === world.taskId && task.state.status === "sleeping") seen.push(task.state.checkpoint.n as number);
    });
    await runUntil(world.clock, async () => (await object.getTask(world.taskId, ctx))?.state.status === "terminal");
    await runUntil(world.clock, () => back.follower!.head >= object.lease!.position);
    const task = await back.harness.getTask(world.taskId, ctx);
    expect(task?.state).toMatchObject({ status: "terminal", outcome: { status: "completed", result: "counted to 8" } });
    expect(seen).toEqual([4, 5, 6, 7, 8]);
    expect(await rows(world.tabStorage)).toEqual(await rows(world.copy));
    expect((await rows(world.tabStorage)).epochs).toEqual([
      { epoch: 1, start: 1 },
      { epoch: 2, start: released + 1 },
    ]);
    expect(world.printed).toEqual([["tab", "tick 1"], ["tab", "tick 2"], ...[3, 4, 5, 6, 7, 8].map((n) => ["object", `tick ${n}`])]);
    await object.close(ctx);
  });

  it("a tab that comes back late is pushed what it lacks from the object's durable tail first, then live", async () => {
    const world = await comebackWorld({ to: 8 });
    await handOverAt(world, 2);
    const object = (await world.end.harness)!;
    await runUntil(world.clock, () => world.printed.length >= 6);
    const back = await world.openTab();
    await runUntil(world.clock, async () => (await object.getTask(world.taskId, ctx))?.state.status === "terminal");
    await runUntil(world.clock, () => back.follower!.head >= object.lease!.position);
    expect(await rows(world.tabStorage)).toEqual(await rows(world.copy));
    await object.close(ctx);
  });

  it("0032: a tab whose log left the object's history (unpushed commits of its old epoch) follows nothing and reports the fork once", async () => {
    const world = await comebackWorld({ to: 6, ttlMs: 1_000 });
    world.tab.harness.resume();
    await runUntil(world.clock, () => world.printed.length >= 2);
    // The tab goes on alone (its pushes lost), past its lease's expiry: the object takes over from what it holds.
    world.link.disconnected();
    await runUntil(world.clock, () => world.end.harness !== undefined);
    const object = (await world.end.harness)!;
    await runUntil(world.clock, () => world.tab.harness.closed);
    const mine = (await world.tabStorage.load()).log!;
    world.link.connected();
    const back = await world.openTab();
    expect(back.harness.readOnly).toBe(true);
    await runUntil(world.clock, () => world.forks.length > 0);
    expect(back.follower!.following).toBe(false);
    await runUntil(world.clock, async () => (await object.getTask(world.taskId, ctx))?.state.status === "terminal");
    expect(world.forks).toHaveLength(1);
    expect(world.forks[0]!.head?.epoch).toBe(2);
    // Nothing of the object's was applied on top of the fork.
    expect((await world.tabStorage.load()).log).toEqual(mine);
    await object.close(ctx);
  });

  it("property: whatever the link loses or duplicates, the tab's copy ends equal to the object's, each tick printed once", async () => {
    await fc.assert(
      fc.asyncProperty(
        fc.array(fc.constantFrom("deliver", "deliver", "deliver", "drop", "twice"), { minLength: 80, maxLength: 80 }),
        fc.array(fc.constantFrom("deliver", "deliver", "deliver", "drop", "twice"), { minLength: 80, maxLength: 80 }),
        async (toObject, toTab) => {
          const fate: Fate = (way, index) => ((way === "toObject" ? toObject : toTab)[index] ?? "deliver") as ReturnType<Fate>;
          const world = await comebackWorld({ to: 6, ttlMs: 60_000, fate });
          world.loseFrames();
          world.tab.harness.resume();
          await runUntil(world.clock, () => world.printed.length >= 2);
          let handed = false;
          void world.tab.mirror!.handOver(ctx).then(() => (handed = true));
          await runUntil(world.clock, () => handed);
          const object = (await world.end.harness)!;
          const back = await world.reopenTab();
          await runUntil(world.clock, async () => (await object.getTask(world.taskId, ctx))?.state.status === "terminal", 5_000);
          await runUntil(world.clock, () => back.follower!.head >= object.lease!.position, 5_000);
          expect(await rows(world.tabStorage)).toEqual(await rows(world.copy));
          expect(world.printed.map(([, line]) => line)).toEqual([1, 2, 3, 4, 5, 6].map((n) => `tick ${n}`));
          await object.close(ctx);
        },
      ),
      { numRuns: 25 },
    );
  }, 120_000); // ~3 s alone; it once passed 20 s inside the whole suite on a loaded machine

  it("a push the object's socket carries that does not continue the tab's copy (a gap, a forged shape) is applied nowhere; the tab answers with its head", async () => {
    const world = await comebackWorld({ to: 3 });
    await handOverAt(world, 2);
    const object = (await world.end.harness)!;
    await runUntil(world.clock, async () => (await object.getTask(world.taskId, ctx))?.state.status === "terminal");
    const back = await world.reopenTab();
    await runUntil(world.clock, () => back.follower!.head >= object.lease!.position);
    const head = back.follower!.head;
    const before = await rows(world.tabStorage);
    const sent: string[] = [];
    const stop = world.link.onPush(() => {});
    const send = world.link.send.bind(world.link);
    world.link.send = (message) => {
      sent.push(JSON.stringify(message));
      return send(message);
    };
    const gap = {
      fence: { epoch: 2, position: head + 5 },
      nextId: 900,
      tasks: [],
      conversations: [],
      entries: [],
      submissions: [],
      documents: [{ scope: "s", key: "forged", value: 1 }],
    };
    world.link.receive(JSON.stringify({ type: "push", from: "object", epoch: 2, batches: [gap], parts: [] }));
    world.link.receive(
      JSON.stringify({
        type: "push",
        from: "object",
        epoch: 2,
        batches: [{ ...gap, fence: { epoch: 2, position: head + 1 }, tasks: [{ id: "x" }] }],
        parts: [],
      }),
    );
    await runUntil(world.clock, () => sent.length >= 1);
    expect(JSON.parse(sent[0]!)).toEqual({ type: "ack", head, epoch: 2 });
    expect(await rows(world.tabStorage)).toEqual(before);
    stop();
    await object.close(ctx);
  });
});
