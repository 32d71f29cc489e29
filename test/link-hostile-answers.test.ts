import fc from "fast-check";
import { describe, expect, it } from "vitest";
import type { Json } from "../src/base/json.ts";
import { FollowLink } from "../src/follow/link-client.ts";
import { answerHelloCall, errorShape } from "../src/follow/object-door.ts";
import { encodeFollowMessage, parseFollowMessage } from "../src/follow/wire.ts";
import { ConnectionLost, HarnessClosed, NotReady } from "../src/index.ts";
import { createManualClock } from "../src/testing/clock.ts";
import { flush } from "./support.ts";

const DRAFT: Json = { type: "write", entry: { kind: "app.note" }, requestId: "r1" };
const MAX_SENDS = 100;
const notReady = () => errorShape(new NotReady("switch: call again, same key"));

// Review of 0135, L1 and L6: the link's resend loops and hostile answers to its calls (decision 0135's NotReady resend).

/**
 * A hostile object answering every call NotReady synchronously, inside send; past `MAX_SENDS` it stops answering (so a
 * link that resends the re-keyed call in the same loop fails this test instead of spinning for ever).
 */
function syncHostile() {
  const clock = createManualClock(0);
  const sent: string[] = [];
  const link: FollowLink = new FollowLink({
    clock,
    send: (frame) => {
      const parsed = parseFollowMessage(frame, "tab");
      if (!("message" in parsed) || parsed.message.type !== "call") return;
      const { id, topic, args } = parsed.message;
      if (topic === "wire") return link.receive(encodeFollowMessage(answerHelloCall(id, args)));
      sent.push(id);
      if (sent.length > MAX_SENDS) return;
      link.receive(encodeFollowMessage({ type: "answer", id, error: notReady() }));
    },
  });
  link.connected();
  return { clock, link, sent };
}

describe("the follow link against an object that answers NotReady or forges answers (review of 0135, L1, L6)", () => {
  it("S12: an object answering NotReady synchronously gets one send per resend (the loops walk a copy), then NotReady ends the call; no timer after close", async () => {
    const { clock, link, sent } = syncHostile();
    let outcome: unknown;
    link.call("copy", "submit", [1, DRAFT]).then(
      (v) => (outcome = v),
      (e) => (outcome = e),
    );
    await flush(2);
    expect(sent).toHaveLength(1);
    for (let i = 0; i < 100 && outcome === undefined; i++) {
      clock.advance(2_000);
      await flush(2);
      if (outcome === undefined) expect(sent).toHaveLength(i + 2); // one send each resend: the re-keyed call waits for the next
    }
    expect(outcome).toBeInstanceOf(NotReady);
    expect(sent.length).toBeLessThanOrEqual(17);
    expect(new Set(sent).size).toBe(sent.length);
    expect(link.stats.notReadyRetries).toBe(sent.length - 1);
    link.close();
    expect(clock.pending).toBe(0);
  });

  it("S12 property: forged answers (NotReady, HarnessClosed, values) to a keyed call's current or first id, an unkeyed call, an unknown id, at any time, settle each call exactly once and leave no timer after close", async () => {
    await fc.assert(
      fc.asyncProperty(
        fc.array(
          fc.record({
            target: fc.constantFrom("keyed", "lease", "unknown", "old"),
            kind: fc.constantFrom("notReady", "value", "closed"),
            at: fc.integer({ min: 0, max: 40_000 }),
          }),
          { maxLength: 30 },
        ),
        async (answers) => {
          const clock = createManualClock(0);
          const ids: Record<string, string[]> = { copy: [], lease: [] };
          const link: FollowLink = new FollowLink({
            clock,
            send: (frame) => {
              const parsed = parseFollowMessage(frame, "tab");
              if (!("message" in parsed) || parsed.message.type !== "call") return;
              const { id, topic, args } = parsed.message;
              if (topic === "wire") return link.receive(encodeFollowMessage(answerHelloCall(id, args)));
              const list = ids[topic]!;
              if (!list.includes(id)) list.push(id);
            },
          });
          link.connected();
          let keyedSettled = 0;
          let leaseSettled = 0;
          let keyedError: unknown;
          let leaseError: unknown;
          link.call("copy", "submit", [1, DRAFT]).then(
            () => keyedSettled++,
            (e) => {
              keyedSettled++;
              keyedError = e;
            },
          );
          link.call("lease", "renew", ["tab", 3]).then(
            () => leaseSettled++,
            (e) => {
              leaseSettled++;
              leaseError = e;
            },
          );
          await flush(2);
          const sorted = [...answers].sort((a, b) => a.at - b.at);
          let now = 0;
          for (const answer of sorted) {
            clock.advance(answer.at - now);
            now = answer.at;
            await flush(1);
            const copyIds = ids.copy!;
            const id =
              answer.target === "keyed"
                ? copyIds.at(-1)
                : answer.target === "old"
                  ? copyIds[0]
                  : answer.target === "lease"
                    ? ids.lease![0]
                    : "zz:999";
            if (!id) continue;
            const error = answer.kind === "notReady" ? notReady() : answer.kind === "closed" ? errorShape(new HarnessClosed()) : undefined;
            const leaseWaiting = leaseSettled === 0;
            link.receive(encodeFollowMessage(error ? { type: "answer", id, error } : { type: "answer", id, value: { submissionId: 7 } }));
            await flush(1);
            // An unkeyed call (the lease) answered NotReady ends with it at once, never sent again under a new id.
            if (leaseWaiting && answer.target === "lease" && answer.kind === "notReady") expect(leaseError).toBeInstanceOf(NotReady);
          }
          clock.advance(200_000);
          await flush(2);
          expect(keyedSettled).toBe(1);
          expect(leaseSettled).toBe(1);
          // a forged NotReady for the non-keyed call ends it at once
          if (leaseError instanceof NotReady) expect(ids.lease!.length).toBe(1);
          // Its error, if any, is a typed one from the wire or the link's own bound, never an internal.
          if (keyedError !== undefined)
            expect([NotReady, HarnessClosed, ConnectionLost].some((type) => keyedError instanceof type)).toBe(true);
          link.close();
          expect(clock.pending).toBe(0);
        },
      ),
      { numRuns: 200 },
    );
  });
});
