import { describe, expect, it } from "vitest";
import { NotAuthorized } from "../src/errors.ts";
import { memoryArbiter } from "../src/follow/arbiter.ts";
import { packPushes } from "../src/follow/chunks.ts";
import { ObjectEnd } from "../src/follow/object-end.ts";
import { encodeFollowMessage } from "../src/follow/wire.ts";
import { deserializeError } from "../src/host/error-wire.ts";
import { isRetryable } from "../src/retryable.ts";
import { MemoryStorage } from "../src/storage/memory.ts";
import { createManualClock } from "../src/testing/clock.ts";
import { emptyBatch } from "../src/testing/storage-conformance.ts";

// Review (session 8): `follow.authorize` saw the action only, never the place a frame speaks for, so any caller
// allowed `lease.*` could acquire or hand back the lease under another device's name (a second device calling
// itself "tab" took the lease from the real tab). The door now gets the place: an app binds each caller to its own.

describe("the follow door sees the place a frame speaks for (issue 27, S8: a refused call changes nothing)", () => {
  it("a caller bound to tab-a is refused lease.acquire, lease.handBack and a push as tab-b: NotAuthorized, no epoch minted; as tab-a it is granted", async () => {
    const clock = createManualClock(1_000);
    const book = memoryArbiter({ clock, ttlMs: 5_000 });
    const end = await ObjectEnd.start({
      place: "object",
      storage: new MemoryStorage(),
      book,
      clock,
      watchExpiry: false,
      open: () => Promise.reject(new Error("the object does not take the lease here")),
    });
    const asked: Array<[string, string | undefined]> = [];
    const door = (action: string, place?: string) => {
      asked.push([action, place]);
      return place === undefined || place === "tab-a";
    };
    const send = async (message: Parameters<typeof encodeFollowMessage>[0]) => {
      const replies: unknown[] = [];
      await end.receive(encodeFollowMessage(message), (frame) => replies.push(JSON.parse(frame)), door);
      return replies;
    };
    const call = (id: string, method: string, args: Array<string | number>) => send({ type: "call", id, topic: "lease", method, args });

    const taken = await call("1", "acquire", ["tab-b", 0]);
    expect(taken).toMatchObject([{ type: "answer", id: "1", error: { name: "NotAuthorized" } }]);
    expect(book.record.epoch).toBe(0);
    expect(await call("2", "handBack", ["tab-b", 0])).toMatchObject([{ id: "2", error: { name: "NotAuthorized" } }]);
    const [load] = packPushes([{ ...emptyBatch(), fence: { epoch: 1, position: 1 } }]);
    const pushed = await send({ type: "push", from: "tab-b", epoch: 1, ...load! });
    expect(pushed).toMatchObject([{ type: "refused", error: { name: "NotAuthorized" } }]);
    expect(end.head).toBe(0);

    const granted = await call("3", "acquire", ["tab-a", 0]);
    expect(granted).toMatchObject([{ type: "answer", id: "3", value: { epoch: 1 } }]);
    expect(book.record).toMatchObject({ epoch: 1, holder: "tab-a" });
    expect(asked).toContainEqual(["lease.acquire", "tab-b"]);
    expect(asked).toContainEqual(["push", "tab-b"]);
  });

  it("decision 0117 after review: a follow.authorize that throws the library's NotAuthorized refuses with it; any other throw is AuthorizeFailed (retryable: a pushing tab sends again), its message kept at the object; nothing is done either way", async () => {
    const clock = createManualClock(1_000);
    const book = memoryArbiter({ clock, ttlMs: 5_000 });
    const end = await ObjectEnd.start({
      place: "object",
      storage: new MemoryStorage(),
      book,
      clock,
      watchExpiry: false,
      open: () => Promise.reject(new Error("the object does not take the lease here")),
    });
    let thrown: unknown;
    const door = () => {
      throw thrown;
    };
    const send = async (message: Parameters<typeof encodeFollowMessage>[0]) => {
      const replies: unknown[] = [];
      await end.receive(encodeFollowMessage(message), (frame) => replies.push(JSON.parse(frame)), door);
      return replies as Array<{ error?: { name: string; message: string } }>;
    };
    const [load] = packPushes([{ ...emptyBatch(), fence: { epoch: 1, position: 1 } }]);
    thrown = new NotAuthorized("lease.acquire", "tab-b is not this user's device.");
    const refused = await send({ type: "call", id: "1", topic: "lease", method: "acquire", args: ["tab-b", 0] });
    expect(refused).toMatchObject([
      { type: "answer", id: "1", error: { name: "NotAuthorized", message: expect.stringContaining("not this user's device") } },
    ]);
    thrown = new Error("postgres://admin:hunter2@10.0.0.7 unreachable");
    const failed = await send({ type: "call", id: "2", topic: "lease", method: "acquire", args: ["tab-b", 0] });
    expect(failed).toMatchObject([{ type: "answer", id: "2", error: { name: "AuthorizeFailed" } }]);
    expect(JSON.stringify(failed)).not.toContain("hunter2");
    const pushed = await send({ type: "push", from: "tab-b", epoch: 1, ...load! });
    expect(pushed).toMatchObject([{ type: "refused", error: { name: "AuthorizeFailed" } }]);
    expect(isRetryable(deserializeError(pushed[0]!.error as never))).toBe(true);
    expect(book.record.epoch).toBe(0);
    expect(end.head).toBe(0);
  });
});
