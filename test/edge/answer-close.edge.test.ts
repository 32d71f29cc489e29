import fc from "fast-check";
import { afterAll, beforeAll, describe, expect, it } from "vitest";
import { type Edge, type ObjectKind, startEdge } from "./support.ts";

// `answerClose` (decision 0136, its review) answers any Close frame a peer can send, in real workerd, in both of the
// runtime's modes: by default `close()` refuses 1004, 1005, 1006, 1015 and codes outside 1000–4999; under the
// `pedantic_wpt` flag everything but 1000 and 3000–4999; and a reason over 123 UTF-8 bytes in both
// (`websocket_close_reason_byte_limit`). A peer's invalid UTF-8 decodes to U+FFFD, 3 bytes each, so 42 such bytes
// already pass the limit. Before, a refused `close()` was caught and no Close went out: the peer waited for its own
// timeout and ended 1006, and the object kept the socket.
interface Answered {
  threw: boolean;
  closed: boolean;
  seen: { code: number; reason: string } | null;
  reason: string | null;
}

const bytes = (text: string) => new TextEncoder().encode(text).length;

const peerCode = fc.option(
  fc.oneof(
    fc.integer({ min: 0, max: 65535 }),
    fc.constantFrom(999, 1000, 1001, 1004, 1005, 1006, 1007, 1011, 1012, 1015, 1016, 2999, 3000, 4999, 5000),
  ),
  { nil: undefined },
);
// The bytes of a peer's reason (at most 123 in a Close frame), valid UTF-8 or not.
const peerReason = fc.option(
  fc.oneof(
    fc.uint8Array({ maxLength: 123, size: "max" }),
    fc.string({ unit: "binary", maxLength: 60 }).map((text) => new TextEncoder().encode(text).slice(0, 123)),
  ),
  { nil: undefined },
);

for (const flags of [[], ["pedantic_wpt"]]) {
  describe(`the object answers every peer's Close frame (decision 0136's review, M1; flags [${flags}])`, () => {
    let edge: Edge;
    beforeAll(async () => {
      edge = await startEdge({ compatibilityFlags: flags });
    }, 120_000);
    afterAll(() => edge?.dispose());

    const answer = async (code: number | undefined, reasonBytes: Uint8Array | undefined): Promise<Answered> => {
      const response = await edge.call("answer-close" as ObjectKind, "pair", "", {
        method: "POST",
        body: JSON.stringify({ code, reasonBytes: reasonBytes && [...reasonBytes] }),
      });
      return response.json() as Promise<Answered>;
    };

    it("any code and reason: one Close goes out, with the peer's code when it is 1000 or 3000–4999 (else 1000) and its reason when it fits", async () => {
      await fc.assert(
        fc.asyncProperty(peerCode, peerReason, async (code, reasonBytes) => {
          const got = await answer(code, reasonBytes);
          const what = `code ${code}, reason ${got.reason === null ? "none" : `${bytes(got.reason)} bytes`}`;
          expect(got.threw, what).toBe(false);
          expect(got.closed, `${what}: a Close went out`).toBe(true);
          const sendable = code === 1000 || (code !== undefined && code >= 3000 && code <= 4999);
          expect(got.seen!.code, what).toBe(sendable ? code : 1000);
          const reason = got.reason ?? "";
          if (bytes(reason) <= 123) expect(got.seen!.reason, what).toBe(reason);
          else {
            expect(reason.startsWith(got.seen!.reason), `${what}: a prefix`).toBe(true);
            // Cut at a whole character: at most a 4-byte one is left out, so at least 120 of the 123 bytes remain.
            expect(bytes(got.seen!.reason), what).toBeGreaterThanOrEqual(120);
            expect(bytes(got.seen!.reason), what).toBeLessThanOrEqual(123);
          }
        }),
        {
          numRuns: 300,
          examples: [
            [1004, undefined],
            [1001, undefined],
            [1000, new Uint8Array(42).fill(0xff)],
            // 120 bytes, then a 4-byte character: the cut leaves 120 (seed 558083643 found such a reason).
            [1000, new TextEncoder().encode(`${"a".repeat(120)}\u{1F600}`)],
          ],
        },
      );
    }, 120_000);
  });
}
