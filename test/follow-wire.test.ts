import fc from "fast-check";
import { describe, expect, it } from "vitest";
import { FollowMessageRefused } from "../src/errors.ts";
import { MAX_FOLLOW_MESSAGE_BYTES, packPushes, Reassembly } from "../src/follow/chunks.ts";
import type { LoggedBatch } from "../src/follow/handover.ts";
import { encodeFollowMessage, MAX_FOLLOW_DEPTH, type PushMessage, parseFollowMessage, parseJoinedBatch } from "../src/follow/wire.ts";
import { utf8Length } from "../src/limits.ts";
import { hostileJson } from "./support.ts";

// Issue 27 items 1–2 (decision 0031): the follow link's messages. Every frame is checked (size, depth, shape)
// before anything acts on it; a transaction larger than one message travels in parts and is joined again.

function batchAt(position: number, payload: string, epoch = 1): LoggedBatch {
  return {
    fence: { epoch, position },
    nextId: position + 10,
    tasks: [],
    conversations: [],
    entries: [{ id: position + 1, conversationId: 1, kind: "note", payload: { text: payload }, at: 0 }],
    submissions: [],
    documents: [{ scope: "s", key: `k${position}`, value: payload.length }],
  };
}

/** Receives pushes as a copy at `head` would: whole transactions, and parts joined in order. */
function receive(frames: readonly string[]): LoggedBatch[] {
  const out: LoggedBatch[] = [];
  const joining = new Reassembly();
  for (const frame of frames) {
    const parsed = parseFollowMessage(frame, "tab");
    if ("error" in parsed) throw parsed.error;
    const push = parsed.message as PushMessage;
    for (const part of push.parts) {
      const joined = joining.add(part, out.length);
      if (joined !== undefined) out.push(parseJoinedBatch(joined, part));
    }
    for (const batch of push.batches) if (batch.fence.position === out.length + 1) out.push(batch);
  }
  return out;
}

const framesOf = (batches: readonly LoggedBatch[], budget?: number) =>
  packPushes(batches, budget).map((load) => encodeFollowMessage({ type: "push", from: "tab", epoch: 1, ...load }));

// Any text, including lone surrogates, quotes, backslashes and control characters (what escaping grows).
const anyText = fc.string({
  unit: fc.oneof(
    fc.constantFrom('"', "\\", "\n", "\u0001", "\ud800", "\udc00", "é", "😀"),
    fc.string({ unit: "binary", minLength: 1, maxLength: 1 }),
  ),
  maxLength: 400,
});

describe("follow wire: pushes under the message limit (issue 27 item 2, decision 0031)", () => {
  it("a run of transactions packs into pushes that each fit and arrive as the same transactions, in order (property)", () => {
    fc.assert(
      fc.property(fc.array(anyText, { minLength: 1, maxLength: 12 }), fc.integer({ min: 300, max: 3_000 }), (texts, budget) => {
        const batches = texts.map((text, index) => batchAt(index + 1, text));
        const frames = framesOf(batches, budget);
        for (const frame of frames) expect(utf8Length(frame)).toBeLessThanOrEqual(budget + 1_024);
        expect(receive(frames)).toEqual(batches);
      }),
      { numRuns: 150 },
    );
  });

  it("a transaction of 3 MB goes in parts of at most 1 MB each and is joined into the same transaction", () => {
    const large = batchAt(1, 'x"é'.repeat(350_000)); // about 3.3 MB as JSON, with escapes
    const frames = framesOf([large, batchAt(2, "small")]);
    expect(frames.length).toBeGreaterThanOrEqual(4);
    for (const frame of frames) expect(utf8Length(frame)).toBeLessThanOrEqual(MAX_FOLLOW_MESSAGE_BYTES);
    expect(receive(frames)).toEqual([large, batchAt(2, "small")]);
  });

  it("a small step's push costs little over its own batch: bytes on the wire ≤ 1.2× the batch's JSON", () => {
    const batch = batchAt(7, "a step's output of a few hundred characters ".repeat(8));
    const [frame] = framesOf([batch]);
    expect(utf8Length(frame!) / utf8Length(JSON.stringify(batch))).toBeLessThanOrEqual(1.2);
  });
});

const validPush = (): PushMessage => ({ type: "push", from: "tab", epoch: 1, batches: [batchAt(1, "ok")], parts: [] });

describe("follow wire: hostile frames are refused with typed errors (issue 27 item 2, decision 0031)", () => {
  const refusedWith = (frame: unknown, reason: FollowMessageRefused["reason"]) => {
    const parsed = parseFollowMessage(frame, "tab");
    expect("error" in parsed && parsed.error).toBeInstanceOf(FollowMessageRefused);
    expect("error" in parsed && parsed.error.reason).toBe(reason);
  };

  it("a frame over the size limit, not JSON, too deep, or binary is refused before it is parsed further", () => {
    refusedWith("x".repeat(MAX_FOLLOW_MESSAGE_BYTES + 1), "size");
    refusedWith(`"${"é".repeat(MAX_FOLLOW_MESSAGE_BYTES / 2)}"`, "size");
    refusedWith("{ not json", "json");
    refusedWith(`${"[".repeat(MAX_FOLLOW_DEPTH + 1)}${"]".repeat(MAX_FOLLOW_DEPTH + 1)}`, "depth");
    refusedWith(new ArrayBuffer(8), "shape");
  });

  it("a push whose transaction lacks its fence, has a wrong id, or an unknown field is refused; the side that may send it is checked", () => {
    const push = validPush();
    refusedWith(encodeFollowMessage({ ...push, batches: [{ ...push.batches[0]!, fence: undefined as never }] }), "shape");
    const badTask = { ...push.batches[0]!, tasks: [{ id: -1, conversationId: 1, kind: "k", state: { status: "running" } }] };
    refusedWith(JSON.stringify({ ...push, batches: [badTask] }), "shape");
    refusedWith(JSON.stringify({ ...push, batches: [{ ...push.batches[0]!, extra: 1 }] }), "shape");
    refusedWith(JSON.stringify({ ...push, admin: true }), "shape");
    // The object's messages are not the tab's to send.
    refusedWith(JSON.stringify({ type: "taken", epoch: 2 }), "shape");
    expect("message" in parseFollowMessage(encodeFollowMessage(push), "tab")).toBe(true);
  });

  it("a call of an unknown topic or method, with wrong arguments, or by the wrong side is refused with its id to answer", () => {
    const acquire = { type: "call", id: "r1", topic: "lease", method: "acquire", args: ["tab", 0] };
    expect(parseFollowMessage(JSON.stringify(acquire), "tab")).toEqual({ message: acquire });
    for (const wrong of [
      { ...acquire, topic: "admin" },
      { ...acquire, method: "steal" },
      { ...acquire, args: ["tab", -1] },
      { ...acquire, args: ["tab"] },
      { ...acquire, method: "__proto__" },
    ]) {
      const parsed = parseFollowMessage(JSON.stringify(wrong), "tab");
      expect(parsed).toMatchObject({ id: "r1", error: { name: "FollowMessageRefused", reason: "shape" } });
    }
    expect(parseFollowMessage(JSON.stringify(acquire), "object")).toMatchObject({ id: "r1", error: { reason: "shape" } });
  });

  it("any mutation of a valid message is either a valid message or refused with FollowMessageRefused, never a throw (property)", () => {
    const base = [
      validPush(),
      { type: "release", from: "tab", epoch: 3, position: 9 },
      { type: "call", id: "x", topic: "lease", method: "renew", args: ["tab", 2] },
      { type: "answer", id: "x", value: { epoch: 2, ttlMs: 100 } },
    ];
    const anyValue = fc.oneof(hostileJson(3), fc.constantFrom(undefined, -1, 0, 1.5, "", "__proto__", Number.MAX_SAFE_INTEGER + 2));
    fc.assert(
      fc.property(
        fc.constantFrom(...base),
        fc.array(
          fc.tuple(
            fc.array(
              fc.constantFrom(
                "type",
                "from",
                "epoch",
                "position",
                "batches",
                "parts",
                "id",
                "topic",
                "method",
                "args",
                "0",
                "fence",
                "entries",
                "tasks",
                "value",
              ),
              { minLength: 1, maxLength: 4 },
            ),
            anyValue,
          ),
          { maxLength: 4 },
        ),
        (message, edits) => {
          const value = JSON.parse(JSON.stringify(message)) as Record<string, unknown>;
          for (const [path, next] of edits) {
            let at: Record<string, unknown> = value;
            for (const key of path.slice(0, -1)) {
              const inner = at[key];
              if (typeof inner !== "object" || inner === null) break;
              at = inner as Record<string, unknown>;
            }
            at[path.at(-1)!] = next;
          }
          const parsed = parseFollowMessage(JSON.stringify(value), "tab");
          if ("error" in parsed) expect(parsed.error).toBeInstanceOf(FollowMessageRefused);
          else expect(parsed.message).toEqual(JSON.parse(JSON.stringify(value)));
        },
      ),
      { numRuns: 500 },
    );
  });

  it("parts that join into another position's transaction, or into no JSON, are refused", () => {
    const joining = new Reassembly();
    const text = JSON.stringify(batchAt(2, "wrong place"));
    expect(joining.add({ epoch: 1, position: 1, index: 0, count: 1, text }, 0)).toBe(text);
    expect(() => parseJoinedBatch(text, { epoch: 1, position: 1 })).toThrow(FollowMessageRefused);
    expect(() => parseJoinedBatch('{"fence":', { epoch: 1, position: 1 })).toThrow(FollowMessageRefused);
    expect(() => joining.add({ epoch: 1, position: 1, index: 5, count: 5, text: "" }, 0)).toThrow(FollowMessageRefused);
  });

  it("0031: a receiver holds no more of a transaction's parts than its storage could store (the row limit), however many parts arrive", () => {
    const joining = new Reassembly(2_000);
    const part = (index: number) => ({ epoch: 1, position: 1, index, count: 4_000, text: "x".repeat(900) });
    expect(joining.add(part(0), 0)).toBeUndefined();
    expect(joining.add(part(1), 0)).toBeUndefined();
    expect(() => joining.add(part(2), 0)).toThrow(/more than 2000 bytes/);
    // What it held is dropped: the same position starts again from its first part.
    expect(joining.add(part(0), 0)).toBeUndefined();
  });
});
