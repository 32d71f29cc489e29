import fc from "fast-check";
import { describe, expect, it } from "vitest";
import { type ForwardedWrite, linkHolder } from "../src/follow/forwarding.ts";
import { MAX_PENDING } from "../src/follow/outgoing-calls.ts";
import { encodeFollowMessage, parseFollowMessage } from "../src/follow/wire.ts";
import { serializeError } from "../src/host/error-wire.ts";
import { ConversationBusy, type Json } from "../src/index.ts";
import { createManualClock } from "../src/testing/clock.ts";
import { memoryObjectEnd } from "./follow-support.ts";
import { hostileJson } from "./support.ts";

/**
 * The object's calls of its tab (decision 0037): `ObjectEnd.call` sends on the connection that speaks for the place
 * holding the lease, settles once by id, and is `ConnectionLost` when it cannot be answered — so a copy's forward
 * (decision 0034) is sent again rather than waiting for ever.
 */
async function objectWorld() {
  const clock = createManualClock(1_000);
  const { end, record } = await memoryObjectEnd(clock);
  /** A connection: the frames it received, its caller's door, and the place the object says it speaks for. */
  const connect = (may: (action: string) => boolean) => {
    const received: string[] = [];
    const spoke: string[] = [];
    const reply = (frame: string) => void received.push(frame);
    return {
      received,
      spoke,
      calls: () =>
        received
          .map((frame) => parseFollowMessage(frame, "object"))
          .flatMap((parsed) => ("message" in parsed && parsed.message.type === "call" ? [parsed.message] : [])),
      send: (message: Parameters<typeof encodeFollowMessage>[0]) =>
        end.receive(encodeFollowMessage(message), reply, may, reply, (place) => void spoke.push(place)),
    };
  };
  return { clock, end, connect, record };
}

const settle = () => new Promise((resolve) => setTimeout(resolve, 0));

describe("the object's calls of its tab (ObjectEnd.call, decision 0037)", () => {
  it("a call goes to the connection that holds the lease, is settled by its answer once, and a stranger's answer settles nothing", async () => {
    const { end, connect } = await objectWorld();
    const tab = connect(() => true);
    await tab.send({ type: "call", id: "a1", topic: "lease", method: "acquire", args: ["tab", 0] });
    expect(tab.spoke).toEqual(["tab"]);
    const answer = end.call("forward", "submit", [1, { type: "input", content: "hi", requestId: "r" }]);
    const [call] = tab.calls();
    expect(call).toMatchObject({ topic: "forward", method: "submit" });
    const mallory = connect(() => true);
    await mallory.send({ type: "answer", id: `${call!.id}x`, value: "forged" });
    expect(end.pendingCalls).toBe(1);
    await tab.send({ type: "answer", id: call!.id, value: { method: "submit", submissionId: 7 } });
    await tab.send({ type: "answer", id: call!.id, value: { method: "submit", submissionId: 8 } }); // a duplicate
    await expect(answer).resolves.toEqual({ method: "submit", submissionId: 7 });
    expect(end.pendingCalls).toBe(0);
  });

  it("an error answer keeps its class; a caller that may only ask about the lease never becomes the tab's connection", async () => {
    const { end, connect } = await objectWorld();
    const tab = connect(() => true);
    await tab.send({ type: "call", id: "a1", topic: "lease", method: "acquire", args: ["tab", 0] });
    // Mallory may renew the tab's lease (its door allows lease calls) but may not push: no forward goes to her.
    const mallory = connect((action) => action.startsWith("lease."));
    await mallory.send({ type: "call", id: "m1", topic: "lease", method: "renew", args: ["tab", 1] });
    expect(mallory.spoke).toEqual([]);
    const answer = end.call("forward", "submit", [1, { type: "input", content: "hi", requestId: "r" }]);
    expect(mallory.calls()).toEqual([]);
    const [call] = tab.calls();
    await tab.send({ type: "answer", id: call!.id, error: serializeError(new ConversationBusy(1)) });
    await expect(answer).rejects.toMatchObject({ name: "ConversationBusy" });
  });

  it("ConnectionLost: nobody holds the lease, the holder's connection closed, no answer in time, or too many waiting", async () => {
    const { clock, end, connect } = await objectWorld();
    await expect(end.call("forward", "submit", [])).rejects.toMatchObject({ name: "ConnectionLost" });
    const tab = connect(() => true);
    await tab.send({ type: "call", id: "a1", topic: "lease", method: "acquire", args: ["tab", 0] });
    const closing = end.call("forward", "submit", []);
    end.closed("tab");
    await expect(closing).rejects.toMatchObject({ name: "ConnectionLost" });
    await tab.send({ type: "call", id: "a2", topic: "lease", method: "renew", args: ["tab", 1] }); // it is back
    const late = end.call("forward", "submit", [], { timeoutMs: 5_000 });
    clock.advance(5_000);
    await expect(late).rejects.toMatchObject({ name: "ConnectionLost" });
    const waiting = Array.from({ length: MAX_PENDING }, () => end.call("forward", "submit", []).catch((error: Error) => error.name));
    await expect(end.call("forward", "submit", [])).rejects.toMatchObject({ name: "ConnectionLost" });
    expect(end.pendingCalls).toBe(MAX_PENDING);
    end.closed("tab");
    expect(new Set(await Promise.all(waiting))).toEqual(new Set(["ConnectionLost"]));
    await settle();
  });

  it("a call whose frame is over a follow message's size is refused at once, nothing sent (the tab could only drop it)", async () => {
    const { end, connect } = await objectWorld();
    const tab = connect(() => true);
    await tab.send({ type: "call", id: "a1", topic: "lease", method: "acquire", args: ["tab", 0] });
    const sent = tab.received.length;
    await expect(end.call("forward", "submit", [1, { type: "input", content: "x".repeat(1_000_001) }])).rejects.toMatchObject({
      name: "FollowMessageRefused",
      reason: "size",
    });
    expect(tab.received.length).toBe(sent);
    expect(end.pendingCalls).toBe(0);
  });
});

describe("the holder's answer to a forward is checked (linkHolder, decision 0037)", () => {
  const writes: ForwardedWrite[] = [
    { method: "submit", args: [1, { type: "input", content: "hi", requestId: "r" }] },
    { method: "decide", args: [1, "call_1", { approved: true, decisionId: "d" }] },
    { method: "abortConversation", args: [1, [2]] },
  ];
  const good: Record<string, Json> = {
    submit: { method: "submit", submissionId: 3 },
    decide: { method: "decide", record: { taskId: 2, callId: "call_1", status: "approved", toolName: "t" } },
    abortConversation: { method: "abortConversation" },
  };

  it("the answer of the write's own shape passes as it came", async () => {
    for (const write of writes) {
      const holder = linkHolder(async () => good[write.method]!);
      await expect(holder.forward(write)).resolves.toEqual(good[write.method]);
    }
  });

  it("any other answer (fast-check: any JSON, another method's answer, near misses) is FollowMessageRefused, never handed on", async () => {
    const nearMisses: Json[] = [
      { method: "submit", submissionId: 0 },
      { method: "submit", submissionId: "3" },
      { method: "submit", submissionId: 3, extra: 1 },
      { method: "decide", record: { taskId: 2, callId: "call_1", status: "maybe" } },
      { method: "decide", record: null },
      { method: "abortConversation", done: true },
    ];
    await fc.assert(
      fc.asyncProperty(
        fc.constantFrom(...writes),
        fc.oneof(hostileJson(), fc.constantFrom(...nearMisses, ...Object.values(good))),
        async (write, answer) => {
          fc.pre(JSON.stringify(answer) !== JSON.stringify(good[write.method]));
          const holder = linkHolder(async () => answer);
          const outcome = await holder.forward(write).then(
            () => "passed",
            (error: Error) => error.name,
          );
          // The only other shape that passes is a decide record with other fields the holder made.
          if (outcome === "passed") expect(write.method).toBe("decide");
          else expect(outcome).toBe("FollowMessageRefused");
        },
      ),
      { numRuns: 300 },
    );
  });
});
