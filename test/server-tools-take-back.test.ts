import { describe, expect, it } from "vitest";
import { createRegistry, defineExtension, Harness, MemoryStorage } from "../src/index.ts";
import type { LogMark } from "../src/storage/records.ts";
import { answered, chargeTool, chargingModels, closeGate, drive, resultsOf, serverWorld, submitCharge } from "./server-tools-support.ts";
import { ctx } from "./support.ts";

// Issue 27 (decision 0057): the tab takes the lease back (runHere) while the object's harness waits on a server tool
// it runs (decision 0036: the object's ServerCalls runs it under the call's id). The object's drained hand-over signals
// that phase and parks its task; the run itself is the ServerCalls' and is not cut. The tab's harness, under the next
// epoch, runs the parked tool task again: it asks the object for the same call id and joins the run in flight (or reads
// its stored result). One run of the tool, one result in the conversation, no restart counted.

describe("taking the lease back while the object runs a server tool (decision 0057, S4, S8)", () => {
  it("S4/S8/0057: the tool runs once, its result is stored once under its call id, and the tab's recovery counts no restart", async () => {
    const models = chargingModels(["call_1"]);
    const world = serverWorld(models);
    closeGate(world);
    const storage = new MemoryStorage(); // the log both places hold (the object pushes it to the tab before it releases)
    const object = await Harness.open(
      storage,
      {
        registry: createRegistry().install(defineExtension({ name: "shop", tools: [chargeTool("object-harness", world)] })),
        models: models.api,
        clock: world.clock,
        settings: { progress: { persistWithinMs: 0 } },
        lease: { place: "object", arbiter: world.arbiter },
        serverCalls: world.calls,
        resume: true,
      },
      ctx,
    );
    await submitCharge(object);
    await drive(world, () => world.runs.length === 1); // the object's ServerCalls runs charge; it waits at the gate
    let mark: LogMark | undefined;
    void object.handOver(ctx, { park: true }).then((handed) => (mark = handed));
    await drive(world, () => mark !== undefined);
    await world.arbiter.release("object", mark!.epoch, mark!.position, "tab");
    const tab = await world.openTab(storage);
    expect(tab.harness.recovery.tasks).toEqual([]);
    tab.harness.resume();
    world.gate.open?.();
    await drive(world, () => answered(storage));
    expect(world.runs).toEqual(["object:call_1"]);
    expect((await resultsOf(storage)).get("call_1")).toEqual([[{ type: "text", text: "charged 5" }]]);
    await tab.harness.close(ctx);
  });
});
