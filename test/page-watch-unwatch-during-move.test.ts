import { describe, expect, it } from "vitest";
import { flush } from "./support.ts";
import { takeoverWorld } from "./takeover-world.ts";

// Review of 0140, L1 (the reviewer's probe, kept as a test): a page tool watch given up while the takeover's next open moves the views (another watch's
// listener, told the calls again there, synchronously gives it up) is re-armed by its own rebind on the new harness:
// its listener was called after its unsubscribe, and it stayed subscribed to the new harness's commits (a leak).
describe("review of 0140, L1: unwatch during the move after a takeover", () => {
  it("a page tool watch given up during the move hears nothing after", async () => {
    const world = takeoverWorld();
    const a = world.tab("a");
    await a.served.ready;
    await a.note(1);
    const conversationId = (await a.service.listConversations())[0]!.id;
    const b = world.tab("b");
    await flush(8);
    let armed = false;
    let stopped = false;
    const afterStop: unknown[] = [];
    let stopSecond: (() => void) | undefined;
    // The first watch gives the second up as soon as it hears its calls again on the harness opened after the takeover.
    a.service.watchPageCalls(conversationId, { pageId: "p0", tools: ["t"] }, () => {
      if (!armed) return;
      stopped = true;
      stopSecond?.();
    });
    stopSecond = a.service.watchPageCalls(conversationId, { pageId: "p1", tools: ["t"] }, (calls) => {
      if (stopped) afterStop.push(calls);
    }) as () => void;
    await flush(8);
    armed = true;
    b.service.requestTakeover();
    await expect.poll(() => b.service.status().kind).toBe("ready");
    await b.service.close();
    await expect.poll(() => a.service.status().kind).toBe("ready");
    await flush(8);
    expect(stopped).toBe(true);
    // Unsubscribed during the move: nothing more should reach its listener.
    expect(afterStop).toEqual([]);
    await a.service.close();
  });
});
