/**
 * The review of decision 0143, L1 (its probe, by the reviewer rev-0143; both fail on 40eebe1): the switch's answer
 * (`switchRefusal`) is shared by a page's calls and a tab's pushes and keyed calls on the follow link. 0143 turned
 * `LeaseNotHeld` / `ReadOnlySession` into `NotReady` for pages in an instance whose idle lease lapsed; on the follow link
 * those refusals judge the caller's epoch, so in the hand-back switch a forged push or a server tools call from a place
 * without the lease must keep its final typed refusal (S11), not a "push again" that its link would resend.
 */
import { describe, expect, it } from "vitest";
import { SERVER_TOOLS_TOPIC } from "../src/follow/server-call-messages.ts";
import { encodeFollowMessage } from "../src/follow/wire.ts";
import { comebackWorld } from "./comeback-support.ts";
import { ctx, runUntil } from "./support.ts";

describe("the follow link in the object's hand-back switch (review of 0143, L1)", () => {
  it("S11: a push under an epoch never granted is refused LeaseNotHeld (final), switch or not", async () => {
    const world = await comebackWorld({ to: 8, ttlMs: 60_000, declared: true, copyService: true });
    world.tab.harness.resume();
    await runUntil(world.clock, () => world.printed.length >= 2);
    const following = await world.handOverAndFollow(4);
    const { tab } = await world.takeBack(following);
    expect(world.end.switching).toBe(true); // the instance that handed back, before its alarm ends it
    const epoch = world.book.record.epoch;
    const replies: Array<{ type: string; error?: { name: string; message: string } }> = [];
    const forged = encodeFollowMessage({ type: "push", from: "intruder", epoch: epoch + 50, batches: [], parts: [] } as never);
    await world.end.receive(
      forged,
      (frame) => void replies.push(JSON.parse(frame)),
      () => true,
      "intruder's socket",
    );
    const refused = replies.find((reply) => reply.type === "refused");
    expect(refused?.error?.name).toBe("LeaseNotHeld");
    await tab.harness.close(ctx);
  });

  it("S11: a server tools call (keyed topic) by a place that does not hold the lease is refused LeaseNotHeld, switch or not", async () => {
    const world = await comebackWorld({ to: 8, ttlMs: 60_000, declared: true, copyService: true, serverTools: () => [] });
    world.tab.harness.resume();
    await runUntil(world.clock, () => world.printed.length >= 2);
    const following = await world.handOverAndFollow(4);
    const { tab } = await world.takeBack(following);
    expect(world.end.switching).toBe(true);
    const epoch = world.book.record.epoch; // the tab's, granted at the take-back
    const request = { place: "intruder", epoch, conversationId: 1, taskId: 1, callId: "c1", tool: "t", arguments: {}, replay: "safe" };
    const replies: Array<{ type: string; id?: string; error?: { name: string; message: string } }> = [];
    const frame = encodeFollowMessage({ type: "call", id: "s1", topic: SERVER_TOOLS_TOPIC, method: "call", args: [request] } as never);
    await world.end.receive(
      frame,
      (f) => void replies.push(JSON.parse(f)),
      () => true,
      "intruder's socket",
    );
    await runUntil(world.clock, () => replies.some((reply) => reply.id === "s1"));
    const answer = replies.find((reply) => reply.id === "s1");
    expect(answer?.error?.name).toBe("LeaseNotHeld");
    await tab.harness.close(ctx);
  });
});
