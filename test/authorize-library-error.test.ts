/**
 * Decision 0117, second review (M-b): a hook refuses only by returning false or throwing `NotAuthorized`. Any other
 * throw — the library's own errors included, such as the host's untyped "not open" `DurableError` a hook's lookup into
 * the harness may meet — is `AuthorizeFailed`, retryable, and none of the hook's message reaches the caller. Before, any
 * non-retryable library error passed through as a refusal: a page's subscription ended for good, message and all.
 * For both doors: the object's page doors (doors.ts) and the follow link's (object-door.ts).
 */
import fc from "fast-check";
import { describe, expect, it } from "vitest";
import { AuthorizeFailed, DurableError, InvalidInput, NotAuthorized, NotFound, QueryFailed } from "../src/errors.ts";
import { allowed } from "../src/follow/object-door.ts";
import { guardEndpoint } from "../src/host/doors.ts";
import { type HostEndpoint, refusalOf } from "../src/host/endpoint.ts";
import { serializeError } from "../src/host/error-wire.ts";

const inner: HostEndpoint = { call: async () => null, subscribe: async () => 1, unsubscribe: () => {} };
const thrown = [
  () => new DurableError("Harness for db at /var/secret/path is not open"),
  () => new NotFound("secret conversation 42 is not in /var/secret/path"),
  () => new InvalidInput("secret field", "shape"),
  () => new QueryFailed("secret table"),
  () => new Error("secret store down"),
];

describe("decision 0117 second review (M-b): only a thrown NotAuthorized is a hook's refusal", () => {
  it("S9: the page doors: a hook's library error (not NotAuthorized) is AuthorizeFailed, no refusal, no message of the hook's", async () => {
    await fc.assert(
      fc.asyncProperty(fc.constantFrom(...thrown), fc.constantFrom("call", "subscribe"), async (make, kind) => {
        const door = guardEndpoint(inner, "ann", {
          authorize: () => {
            throw make();
          },
        });
        const error =
          kind === "call"
            ? await door.call("listConversations", []).catch((e: unknown) => e)
            : await door.subscribe("watchConversation", [1], () => {}).catch((e: unknown) => e);
        expect(error).toBeInstanceOf(AuthorizeFailed);
        expect(refusalOf(error)).toBeUndefined();
        expect(JSON.stringify(serializeError(error))).not.toContain("secret");
      }),
    );
  });

  it("S9: the page doors: a thrown NotAuthorized is the refusal, as thrown", async () => {
    const door = guardEndpoint(inner, "ann", {
      authorize: () => {
        throw new NotAuthorized("watchConversation", "not yours.");
      },
    });
    const error = await door.subscribe("watchConversation", [1], () => {}).catch((e: unknown) => e);
    expect(error).toBeInstanceOf(NotAuthorized);
    expect(refusalOf(error)).toBe(error);
  });

  it("S9: the follow link's door: the same", async () => {
    for (const make of thrown) {
      const answer = await allowed(() => {
        throw make();
      }, "push");
      expect(answer).toBeInstanceOf(AuthorizeFailed);
      expect(JSON.stringify(serializeError(answer))).not.toContain("secret");
    }
    const refusal = new NotAuthorized("push", "not yours.");
    expect(
      await allowed(() => {
        throw refusal;
      }, "push"),
    ).toBe(refusal);
  });
});
