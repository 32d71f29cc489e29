import { describe, expect, it } from "vitest";
import { InvalidInput } from "../src/errors.ts";
import { followWorld, rows } from "./follow-support.ts";
import { ctx, runUntil } from "./support.ts";

// Decision 0039 (issue 27 item 4's seam): a refusal that may pass does not stop the tab's mirror for good. Before,
// any `refused` stopped it: one failed store at the object (its storage busy) and the tab pushed nothing more.

describe("the mirror after a refused push (decision 0039)", () => {
  it("a store that fails twice at the object (not one of the library's final errors) is pushed again; the copy catches up, nothing stops", async () => {
    let failures = 2;
    const world = await followWorld({
      apply: async (copy, batch) => {
        if (batch.fence.position === 3 && failures-- > 0) throw new Error("SQLITE_BUSY: the object's storage is busy");
        await copy.apply(batch);
      },
    });
    world.tab.resume();
    await runUntil(world.clock, async () => (await world.tab.getTask(world.taskId, ctx))?.state.status === "terminal");
    const head = world.tab.lease!.position;
    await runUntil(world.clock, () => world.mirror.acknowledged >= head);
    expect(failures).toBe(-1); // refused twice, stored at the third try
    expect(world.mirror.refused).toBeUndefined();
    expect(await rows(world.copy)).toEqual(await rows(world.tabStorage));
    await world.tab.close(ctx);
  });

  it("a final refusal (InvalidInput: past a limit) stops the mirror and is told once; nothing more is pushed", async () => {
    const world = await followWorld({
      apply: async (copy, batch) => {
        if (batch.fence.position === 3) throw new InvalidInput("too large for this copy", "maxRowBytes");
        await copy.apply(batch);
      },
    });
    world.tab.resume();
    await runUntil(world.clock, () => world.mirror.refused !== undefined);
    expect(world.mirror.refused).toMatchObject({ name: "InvalidInput", limit: "maxRowBytes" });
    const pushes = world.sent.toObject.length;
    await runUntil(world.clock, async () => (await world.tab.getTask(world.taskId, ctx))?.state.status === "terminal");
    expect(world.sent.toObject.filter((frame) => frame.includes('"type":"push"'))).toHaveLength(
      world.sent.toObject.slice(0, pushes).filter((frame) => frame.includes('"type":"push"')).length,
    );
    expect((await world.copy.load()).log!.position).toBe(2);
    await world.tab.close(ctx);
  });
});
