import { describe, expect, it } from "vitest";
import type { Inspection } from "../src/harness.ts";
import { ctx, flush } from "./support.ts";
import { takeoverWorld } from "./takeover-world.ts";

const taskIds = (inspection: Inspection | undefined) => inspection?.tasks.map((task) => task.record.id) ?? [];

// Review of 0140, L2: a `watchTasks` listener is not a view, and nothing told it again after a takeover and return:
// it kept the graph from before the takeover, without the tasks the other tab made meanwhile.
describe("review of 0140, L2: a task graph after a takeover and return (S1: the graph is the tasks the database holds)", () => {
  it("a watchTasks listener on tab a hears the graph with the turn tab b submitted once a has the database again", async () => {
    const world = takeoverWorld();
    const a = world.tab("a");
    await a.served.ready;
    await a.note(1);
    const graphs: Inspection[] = [];
    const unwatch = a.service.watchTasks((inspection) => void graphs.push(inspection));
    await expect.poll(() => graphs.length).toBe(1);
    const before = taskIds(graphs[0]);

    const b = world.tab("b");
    await flush(8);
    b.service.requestTakeover();
    await expect.poll(() => b.service.status().kind).toBe("ready");
    // Not resumed in this world: the turn b submits stays a live task, waiting (it made a task, not a conversation).
    const conversationId = (await b.service.listConversations())[0]!.id;
    await b.service.submit(conversationId, { type: "input", content: "from b" });
    await b.service.close();
    await expect.poll(() => a.service.status().kind).toBe("ready");
    await flush(16);

    const fresh = taskIds(await a.harness()!.inspect(ctx));
    expect(fresh).not.toEqual(before); // b made something: the graph changed
    expect(fresh.length).toBe(before.length + 1);
    expect(taskIds(graphs.at(-1))).toEqual(fresh);
    unwatch();
    await a.service.close();
  });
});
