/**
 * Decision 0123 (issue 27's seams, item 4): on a follow link, `onAuthorizeError` is told each time the app's
 * `follow.authorize` hook fails (throws or rejects with anything but `NotAuthorized`), once per ask, never for a
 * refusal — also where the door answers nothing: a following tab's `ack` (`follow.from`: dropped as a lost ack is) and
 * the pusher's registration after a granted lease call (`push`: the lease call was answered). A push frame's door asks
 * `push` once: before, it asked again to register the pusher, and a second ask that failed left the push applied, its
 * pusher unregistered and the app told of a failure the frame's own door had not met.
 */
import fc from "fast-check";
import { describe, expect, it } from "vitest";
import { NotAuthorized } from "../src/errors.ts";
import { memoryArbiter } from "../src/follow/arbiter.ts";
import { packPushes } from "../src/follow/chunks.ts";
import { tellingFailures } from "../src/follow/object-door.ts";
import { ObjectEnd } from "../src/follow/object-end.ts";
import type { FollowAuthorize } from "../src/follow/object-end-options.ts";
import { encodeFollowMessage } from "../src/follow/wire.ts";
import { MemoryStorage } from "../src/storage/memory.ts";
import { createManualClock } from "../src/testing/clock.ts";
import { emptyBatch } from "../src/testing/storage-conformance.ts";

async function objectEnd() {
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
  /** Every ask of the hook (its action), what the app was told, and the places the connection spoke for. */
  const asked: string[] = [];
  const told: Array<[unknown, string]> = [];
  const spoke: string[] = [];
  const send = async (hook: FollowAuthorize, message: Parameters<typeof encodeFollowMessage>[0]) => {
    const replies: Array<Record<string, unknown>> = [];
    const counted: FollowAuthorize = (action, place, request) => {
      asked.push(action);
      return hook(action, place, request);
    };
    const door = tellingFailures(counted, (error, action) => told.push([error, action]));
    await end.receive(
      encodeFollowMessage(message),
      (frame) => replies.push(JSON.parse(frame)),
      door,
      "connection",
      (place) => spoke.push(place),
    );
    return replies;
  };
  return { end, book, send, asked, told, spoke };
}

const allow: FollowAuthorize = () => true;
const failure = new Error("the permission store is down");
const [load] = packPushes([{ ...emptyBatch(), fence: { epoch: 1, position: 1 } }]);

describe("the follow door tells onAuthorizeError once per failed ask, never a refusal (decision 0123)", () => {
  it("0123 (4): a push frame asks `push` once — a hook failing after its door passed neither leaves the pusher unregistered nor tells the app (before: asked twice, told, speaksFor not told)", async () => {
    const { end, send, asked, told, spoke } = await objectEnd();
    const granted = await send(allow, { type: "call", id: "1", topic: "lease", method: "acquire", args: ["tab-a", 0] });
    expect(granted).toMatchObject([{ type: "answer", id: "1", value: { epoch: 1 } }]);
    asked.length = 0;
    spoke.length = 0;
    let pushAsks = 0;
    const failsAfterItsFirst: FollowAuthorize = (action) => {
      if (action === "push" && ++pushAsks > 1) throw failure;
      return true;
    };
    const pushed = await send(failsAfterItsFirst, { type: "push", from: "tab-a", epoch: 1, ...load! });
    expect(pushed.filter((frame) => frame.type === "refused")).toEqual([]);
    expect(end.head).toBe(1);
    expect(asked).toEqual(["push"]);
    expect(told).toEqual([]);
    expect(spoke).toEqual(["tab-a"]);
  });

  it("0123 (4): where the door answers nothing, a failing hook is told (push after a granted lease call; follow.from on an ack) and a refusing one is not", async () => {
    const { send, told, spoke } = await objectEnd();
    const pushFails: FollowAuthorize = (action) => {
      if (action === "push") throw failure;
      return true;
    };
    const granted = await send(pushFails, { type: "call", id: "1", topic: "lease", method: "acquire", args: ["tab-a", 0] });
    expect(granted).toMatchObject([{ type: "answer", id: "1", value: { epoch: 1 } }]); // answered; not its speaker yet
    expect(spoke).toEqual([]);
    expect(told).toEqual([[failure, "push"]]);
    const ackFails: FollowAuthorize = (action) => {
      if (action === "follow.from") throw failure;
      return true;
    };
    expect(await send(ackFails, { type: "ack", head: 0, epoch: 0 })).toEqual([]);
    expect(told).toEqual([
      [failure, "push"],
      [failure, "follow.from"],
    ]);
    for (const refusing of [
      () => false,
      () => {
        throw new NotAuthorized("follow.from", "not yours.");
      },
    ]) {
      expect(await send(refusing, { type: "ack", head: 0, epoch: 0 })).toEqual([]);
      await send(refusing, { type: "call", id: "2", topic: "lease", method: "renew", args: ["tab-a", 1] });
    }
    expect(told).toHaveLength(2);
  });

  it("0123 (4), property: over any run of frames and hook outcomes, the app is told exactly the hook's failures, in order, each once; never a refusal", async () => {
    type Outcome = "allow" | "false" | "refuse" | "fail";
    const frame = fc.constantFrom<Parameters<typeof encodeFollowMessage>[0]>(
      { type: "call", id: "a", topic: "lease", method: "acquire", args: ["tab-a", 0] },
      { type: "call", id: "r", topic: "lease", method: "renew", args: ["tab-a", 1] },
      { type: "push", from: "tab-a", epoch: 1, ...load! },
      { type: "ack", head: 0, epoch: 0 },
      { type: "call", id: "f", topic: "follow", method: "from", args: ["tab-b", 0] },
    );
    await fc.assert(
      fc.asyncProperty(
        fc.array(fc.tuple(frame, fc.array(fc.constantFrom<Outcome>("allow", "false", "refuse", "fail"), { minLength: 1, maxLength: 3 })), {
          maxLength: 8,
        }),
        async (run) => {
          const { send, told } = await objectEnd();
          const failures: unknown[] = [];
          for (const [message, outcomes] of run) {
            let at = 0;
            const hook: FollowAuthorize = (action) => {
              const outcome = outcomes[Math.min(at++, outcomes.length - 1)]!;
              if (outcome === "false") return false;
              if (outcome === "refuse") throw new NotAuthorized(action, "not yours.");
              if (outcome === "fail") {
                const error = new Error(`failed at ${action}`);
                failures.push(error);
                return Promise.reject(error);
              }
              return true;
            };
            await send(hook, message);
          }
          expect(told.map(([error]) => error)).toEqual(failures);
          for (const [error, action] of told) expect((error as Error).message).toBe(`failed at ${action}`);
        },
      ),
      { numRuns: 100, seed: 123 },
    );
  });
});
