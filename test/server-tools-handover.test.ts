import { describe, expect, it } from "vitest";
import { Arrival, Departure, type HandOverMessage } from "../src/follow/handover.ts";
import { createRegistry, defineExtension, Harness, MemoryStorage } from "../src/index.ts";
import { Link } from "../src/testing/two-places/link.ts";
import { chargeTool, chargingModels, closeGate, drive, resultsOf, serverWorld, submitCharge } from "./server-tools-support.ts";
import { ctx, flush } from "./support.ts";

// Issue 27 items 3 and 5 (decisions 0029, 0036): the tab hands its lease to the object while the object still runs
// a server call the tab asked for. The object's harness, opened with its own ServerCalls as `serverCalls`, recovers
// the call's task (restarts counted) and asks under the new epoch: it joins the run in flight. One run, one result.

describe("a server call across the hand-over to the object (S4, S8)", () => {
  it("the object's recovered task joins the run the tab asked for: the tool runs once, its result is written once, by the object", async () => {
    const models = chargingModels(["call_1"]);
    const world = serverWorld(models);
    closeGate(world);
    const tab = await world.openTab(new MemoryStorage());
    await submitCharge(tab.harness);
    await drive(world, () => world.runs.length === 1);

    const handover = new Link<HandOverMessage>();
    const objectStorage = new MemoryStorage();
    const arrival = await Arrival.start({
      place: "object",
      storage: objectStorage,
      arbiter: world.arbiter,
      clock: world.clock,
      send: (message) => handover.send("tab", message),
      open: (storage, lease) =>
        Harness.open(
          storage,
          {
            // The object's own registry: were its harness to run the tool itself, the run would say so.
            registry: createRegistry().install(defineExtension({ name: "shop", tools: [chargeTool("object-harness", world)] })),
            models: models.api,
            clock: world.clock,
            lease,
            serverCalls: world.calls,
            resume: true,
          },
          ctx,
        ),
    });
    handover.attach("object", (message) => arrival.receive(message));
    const mark = await tab.harness.handOver(ctx);
    const departure = new Departure({
      place: "tab",
      storage: tab.storage,
      mark,
      clock: world.clock,
      send: (m) => handover.send("object", m),
    });
    handover.attach("tab", (message) => departure.receive(message));
    await departure.start();
    for (let round = 0; round < 200 && !departure.done; round++) {
      await flush(2);
      if (!handover.step(0, "deliver")) world.clock.next();
      await handover.handled;
    }
    const object = (await arrival.harness)!;
    expect(object.lease).toMatchObject({ place: "object", epoch: 2 });
    expect(object.recovery.tasks.map((task) => task.kind)).toContain("pi.tool");

    world.gate.open?.();
    await drive(world, async () => (await objectStorage.listSubmissions((await object.root(ctx)).id))[0]?.status === "done");
    expect(world.runs).toEqual(["object:call_1"]);
    expect((await resultsOf(objectStorage)).get("call_1")).toEqual([[{ type: "text", text: "charged 5" }]]);
    // The tab wrote no result: it handed over while it waited.
    expect((await resultsOf(tab.storage)).get("call_1")).toBeUndefined();
    await object.close(ctx);
  });
});
