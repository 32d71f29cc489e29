import fc from "fast-check";
import { describe, expect, it } from "vitest";
import type { Json } from "../src/base/json.ts";
import { FollowLink } from "../src/follow/link-client.ts";
import { answerHelloCall, errorShape } from "../src/follow/object-door.ts";
import { encodeFollowMessage, parseFollowMessage } from "../src/follow/wire.ts";
import { HarnessClosed, NotReady } from "../src/index.ts";
import { createManualClock } from "../src/testing/clock.ts";
import { flush, runUntil, wire } from "./support.ts";

// Decision 0135: a keyed call (topic `copy`, `server-tools`: made once per its key, whatever its request id) that the
// object answers `NotReady` — its switch between harnesses after a hand-back — is sent again by the tab's link under a new
// id, for `notReadyPassesMs` from the first `NotReady`; a call that is not keyed, or any other error, ends as before.

const DRAFT: Json = { type: "write", entry: { kind: "app.note" }, requestId: "r1" };
/** The keyed calls a tab makes: a following tab's write (its requestId), a server tool's ask (its call id, S8: run at most once). */
const KEYED: Record<string, [string, string, Json[]]> = {
  copy: ["copy", "submit", [1, DRAFT]],
  "server-tools": [
    "server-tools",
    "call",
    [{ place: "tab", epoch: 3, conversationId: 1, taskId: 9, callId: "call_1", tool: "t", arguments: {}, replay: "unsafe" }],
  ],
};

/** A tab's link to an object that answers the first `refusals` calls with `answer`'s error, then `{ submissionId: 7 }`. */
function linkTo(refusals: number, options: { error?: Error; resendMs?: number; notReadyPassesMs?: number } = {}) {
  const clock = createManualClock(0);
  const carried = wire(clock);
  const ids: string[] = [];
  const link: FollowLink = new FollowLink({
    clock,
    ...(options.resendMs === undefined ? {} : { resendMs: options.resendMs }),
    ...(options.notReadyPassesMs === undefined ? {} : { notReadyPassesMs: options.notReadyPassesMs }),
    send: (frame) =>
      carried(() => {
        const parsed = parseFollowMessage(frame, "tab");
        if (!("message" in parsed) || parsed.message.type !== "call") return;
        const { id, topic, args } = parsed.message;
        if (topic === "wire") return carried(() => link.receive(encodeFollowMessage(answerHelloCall(id, args))));
        ids.push(id);
        const refused = ids.length <= refusals;
        const error = options.error ?? new NotReady("the object is between its harnesses after a hand-back: call again, same key");
        const answer = refused
          ? { type: "answer" as const, id, error: errorShape(error) }
          : { type: "answer" as const, id, value: { submissionId: 7 } };
        carried(() => link.receive(encodeFollowMessage(answer)));
      }),
  });
  link.connected();
  return { clock, link, ids };
}

async function outcome(clock: ReturnType<typeof createManualClock>, call: Promise<Json>): Promise<{ value?: Json; error?: Error }> {
  let settled: { value?: Json; error?: Error } | undefined;
  call.then(
    (value) => (settled = { value }),
    (error: Error) => (settled = { error }),
  );
  await runUntil(clock, () => settled !== undefined, 5_000);
  return settled!;
}

describe("a keyed call the object answers NotReady during its switch (decision 0135)", () => {
  it("property (S8: a server tool's ask is keyed by its call id): sent again under a new id at each resend while within notReadyPassesMs (counted in stats), then NotReady ends it", async () => {
    await fc.assert(
      fc.asyncProperty(
        fc.constantFrom("copy", "server-tools"),
        fc.integer({ min: 1, max: 20 }),
        fc.constantFrom(500, 2_000),
        fc.constantFrom(5_000, 30_000),
        async (topic, refusals, resendMs, notReadyPassesMs) => {
          const { clock, link, ids } = linkTo(refusals, { resendMs, notReadyPassesMs });
          const result = await outcome(clock, link.call(...KEYED[topic]!));
          // The n-th NotReady comes (n - 1) resends after the first: sent again only while that is within the bound.
          const passes = Math.ceil(notReadyPassesMs / resendMs); // NotReady answers that are sent again
          if (refusals <= passes) {
            expect(result.value).toEqual({ submissionId: 7 }); // before: NotReady at the first refusal
            expect(link.stats.notReadyRetries).toBe(refusals);
            expect(ids.length).toBe(refusals + 1);
          } else {
            expect(result.error).toBeInstanceOf(NotReady); // bounded: an object that stays so ends the call
            expect(link.stats.notReadyRetries).toBe(passes);
            expect(ids.length).toBe(passes + 1);
          }
          expect(new Set(ids).size).toBe(ids.length); // each time a new id (the object remembers an answer by id)
        },
      ),
      { numRuns: 40 },
    );
  });

  it("a call that is not keyed (lease) ends with NotReady at once: sent again under a new id it could be made twice", async () => {
    const { clock, link, ids } = linkTo(1);
    const result = await outcome(clock, link.call("lease", "renew", ["tab", 1]));
    expect(result.error).toBeInstanceOf(NotReady);
    expect(ids.length).toBe(1);
    expect(link.stats.notReadyRetries).toBe(0);
  });

  it("review of 0130, M1: the object's HarnessClosed (its copy closed for good) stays final for a keyed call: no retry", async () => {
    const { clock, link, ids } = linkTo(1, { error: new HarnessClosed() });
    const result = await outcome(clock, link.call("copy", "submit", [1, DRAFT]));
    expect(result.error).toBeInstanceOf(HarnessClosed);
    expect(ids.length).toBe(1);
  });

  it("a link closed while a keyed call waits to go again ends it with HarnessClosed at once, and sends nothing more", async () => {
    const { clock, link, ids } = linkTo(100);
    let error: unknown;
    link.call("copy", "submit", [1, DRAFT]).catch((caught: unknown) => (error = caught));
    await runUntil(clock, () => link.stats.notReadyRetries >= 2);
    link.close();
    const sent = ids.length;
    await runUntil(clock, () => error !== undefined);
    expect(error).toBeInstanceOf(HarnessClosed);
    for (let i = 0; i < 5; i++) clock.next();
    await flush();
    expect(ids.length).toBe(sent);
  });
});
