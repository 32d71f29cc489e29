import fc from "fast-check";
import { describe, expect, it } from "vitest";
import type { Json } from "../src/base/json.ts";
import { memoryArbiter } from "../src/follow/arbiter.ts";
import { SERVER_TOOLS_TOPIC } from "../src/follow/server-call-messages.ts";
import { encodeFollowMessage } from "../src/follow/wire.ts";
import { MemoryStorage } from "../src/storage/memory.ts";
import { createManualClock } from "../src/testing/clock.ts";
import { type AskedCall, chargeTool, intentInCopy, serveCharge, servingEnd } from "./server-call-copy-support.ts";

// Review (session 9): a server tool's call (`server-tools.call(request)`, decision 0036) names the place it speaks for
// in its request (`request.place`, checked against the lease's holder), but `follow.authorize` was asked about it with
// no place. So an app that binds each caller to its own place (README, 5af303e) still let any caller allowed the call
// name the holder's place in the request and have the object run a server tool — with the object's secrets, with
// arguments no model produced — as if the tab that holds the lease had asked. The door now sees `request.place`.

async function world() {
  const clock = createManualClock(1_000);
  const book = memoryArbiter({ clock, ttlMs: 60_000 });
  const storage = new MemoryStorage();
  const end = await servingEnd(storage, book, clock);
  const runs: Json[] = [];
  serveCharge(end, book, clock, chargeTool(runs));
  /** A caller bound to `self`: the app's door allows it everything, for its own place only. */
  const as = (self: string) => async (message: Parameters<typeof encodeFollowMessage>[0]) => {
    const replies: Array<Record<string, unknown>> = [];
    const door = (_action: string, place?: string) => place === undefined || place === self;
    await end.receive(encodeFollowMessage(message), (frame) => replies.push(JSON.parse(frame)), door);
    return replies;
  };
  return { end, book, runs, as, storage };
}

const request = (place: string, epoch: number, callId: string, amount: number) => ({
  place,
  epoch,
  conversationId: 1,
  taskId: 7,
  callId,
  tool: "charge",
  arguments: { amount },
  replay: "unsafe",
});

describe("the follow door sees the place a server tool's call speaks for (decision 0036, S8)", () => {
  it("a caller bound to tab-b naming the holder tab-a in its request is refused NotAuthorized and nothing runs; tab-a's own call runs once", async () => {
    const w = await world();
    const tabA = w.as("tab-a");
    const tabB = w.as("tab-b");
    expect(await tabA({ type: "call", id: "a1", topic: "lease", method: "acquire", args: [0] as never })).toMatchObject([
      { id: "a1", error: { name: "FollowMessageRefused" } },
    ]);
    expect(await tabA({ type: "call", id: "a2", topic: "lease", method: "acquire", args: ["tab-a", 0] })).toMatchObject([
      { id: "a2", value: { epoch: 1 } },
    ]);
    const forged = await tabB({ type: "call", id: "b1", topic: SERVER_TOOLS_TOPIC, method: "call", args: [request("tab-a", 1, "x", 100)] });
    expect(forged).toMatchObject([{ type: "answer", id: "b1", error: { name: "NotAuthorized" } }]);
    expect(w.runs).toEqual([]); // before: [100], run for a caller that does not hold the lease

    await intentInCopy(w.storage, request("tab-a", 1, "y", 5) as AskedCall); // the agent's own call (decision 0051)
    const own = await tabA({ type: "call", id: "a3", topic: SERVER_TOOLS_TOPIC, method: "call", args: [request("tab-a", 1, "y", 5)] });
    expect(own).toMatchObject([{ id: "a3", value: { ending: "returned" } }]);
    expect(w.runs).toEqual([5]);
  });

  it("property: whatever place, epoch and call id a caller bound to tab-b names, no call it makes runs a tool (fast-check)", async () => {
    await fc.assert(
      fc.asyncProperty(
        fc.array(
          fc.record({
            place: fc.constantFrom("tab-a", "object", "tab-a ", "TAB-A", ""),
            epoch: fc.integer({ min: 1, max: 3 }),
            callId: fc.constantFrom("x", "y", "z"),
          }),
          { minLength: 1, maxLength: 6 },
        ),
        async (forgeries) => {
          const w = await world();
          await w.as("tab-a")({ type: "call", id: "a", topic: "lease", method: "acquire", args: ["tab-a", 0] });
          const tabB = w.as("tab-b");
          for (const [index, forged] of forgeries.entries()) {
            const replies = await tabB({
              type: "call",
              id: `b${index}`,
              topic: SERVER_TOOLS_TOPIC,
              method: "call",
              args: [request(forged.place, forged.epoch, forged.callId, index)],
            });
            expect(replies).toHaveLength(1);
            expect(replies[0]).toHaveProperty("error");
          }
          expect(w.runs).toEqual([]);
          expect(w.book.record).toMatchObject({ epoch: 1, holder: "tab-a" });
        },
      ),
      { numRuns: 60 },
    );
  });
});
