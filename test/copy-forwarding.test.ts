import fc from "fast-check";
import { describe, expect, it } from "vitest";
import { memoryArbiter } from "../src/follow/arbiter.ts";
import { answerForwarded, forwardedProblem } from "../src/follow/forwarding.ts";
import { parseFollowMessage } from "../src/follow/wire.ts";
import { createRegistry, DurableError, Harness, InvalidArguments, MemoryStorage } from "../src/index.ts";
import { createManualClock } from "../src/testing/clock.ts";
import { ctx, hostileJson } from "./support.ts";

/** What crosses from the object to the tab is hostile until checked (decision 0034): size, depth, shape, method. */
describe("forwarded writes at the holder (decision 0034)", () => {
  it("0034: hostile forwarded writes are refused before anything runs, and the holder writes nothing (fast-check)", async () => {
    const arbiter = memoryArbiter({ clock: createManualClock(1_000) });
    const tab = await Harness.open(new MemoryStorage(), { registry: createRegistry(), lease: { place: "tab", arbiter } }, ctx);
    const root = await tab.root(ctx, { agent: { model: "faux/faux-1" } });
    const head = tab.lease!.position;
    const valid = { method: "submit", args: [root.id, { type: "input", content: "x", requestId: "k" }] };
    const hostile = fc.oneof(
      fc.anything(),
      fc.record({
        method: fc.constantFrom("configure", "createTask", "query", "__proto__", "constructor", "call", "submit"),
        args: fc.anything(),
      }),
      fc.record({
        method: fc.oneof(hostileJson(1), fc.constantFrom("submit", "decide")),
        args: fc.array(hostileJson(2), { maxLength: 3 }),
      }),
      // Near misses of a valid forward: no key, a field too many, a bad argument, an abort without its tasks.
      fc.constantFrom(
        { method: "submit", args: [root.id, { type: "input", content: "x" }] },
        { ...valid, extra: 1 },
        { method: "submit", args: [-1, { type: "input", content: "x", requestId: "k" }] },
        { method: "submit", args: [root.id, { type: "input", content: "x", requestId: "k" }, 3] },
        { method: "decide", args: [root.id, "call", { approved: "yes", decisionId: "d" }] },
        { method: "decide", args: [root.id, "call", { approved: true }] },
        { method: "abortConversation", args: [root.id] },
        { method: "abortConversation", args: [root.id, Array.from({ length: 101 }, (_, i) => i + 1)] },
        { method: "abortConversation", args: [root.id, [1]], tasks: [1] },
        { method: "submit", args: [root.id, { type: "input", content: "x".repeat(9_000_000), requestId: "k" }] },
        { method: "submit", args: [root.id, JSON.parse(`${"[".repeat(5000)}${"]".repeat(5000)}`)] },
      ),
    );
    await fc.assert(
      fc.asyncProperty(hostile, async (write) => {
        const problem = forwardedProblem(write);
        const refused = await answerForwarded(tab, write, ctx).then(
          () => undefined,
          (error: unknown) => error,
        );
        expect(refused).toBeInstanceOf(DurableError);
        if (problem) expect(refused).toBeInstanceOf(InvalidArguments);
        expect(tab.lease!.position).toBe(head);
      }),
      { numRuns: 300 },
    );
    // The valid one is taken, once (for contrast: the property's refusals are the shapes', not the link's).
    expect((await answerForwarded(tab, valid, ctx)).method).toBe("submit");
    expect(tab.lease!.position).toBeGreaterThan(head);
  });

  it("0034 on the follow link: a forward is a call of topic forward that only the object makes, refused at the tab when its shape is wrong", () => {
    const frame = (method: string, args: unknown) => JSON.stringify({ type: "call", id: "c1", topic: "forward", method, args });
    const good = frame("submit", [1, { type: "input", content: "x", requestId: "k" }]);
    expect(parseFollowMessage(good, "object")).toHaveProperty("message");
    expect(parseFollowMessage(good, "tab")).toMatchObject({ error: { reason: "shape" }, id: "c1" });
    fc.assert(
      fc.property(fc.constantFrom("submit", "decide", "abortConversation", "configure", "query"), hostileJson(), (method, args) => {
        const parsed = parseFollowMessage(frame(method, args), "object");
        expect("error" in parsed).toBe(forwardedProblem({ method, args }) !== undefined);
      }),
      { numRuns: 300 },
    );
  });
});
