/**
 * Decision 0117 (a seam left by 0114's review): an app's `authorize` hook that throws (or rejects) has not refused the
 * caller — it is the app's bug, or a permission store that was down. Before, the doors answered `NotAuthorized` with
 * the hook's own message in it: a page's reconnecting socket counted that as a refusal and ended its subscriptions for
 * good, and the page read whatever the hook's error said (a connection string, a stack). Now it is `AuthorizeFailed`:
 * retryable (so `refusalOf` keeps the subscription, asked again at the next connection), with a message of the
 * library's own; the hook's error stays at the host as the `cause`.
 */
import fc from "fast-check";
import { describe, expect, it } from "vitest";
import type { ConversationViewState } from "../src/agent/view/view.ts";
import { socketEndpoint } from "../src/browser/socket.ts";
import { errorAnswer } from "../src/cloudflare/answers.ts";
import { AuthorizeFailed, NotAuthorized, NotFound, StorageUnavailable } from "../src/errors.ts";
import { HostClient } from "../src/host/client.ts";
import { guardEndpoint } from "../src/host/doors.ts";
import { type HostEndpoint, hostEndpoint, refusalOf } from "../src/host/endpoint.ts";
import { serializeError } from "../src/host/error-wire.ts";
import { createHost } from "../src/host/host.ts";
import { createRegistry, isRetryable, MemoryStorage } from "../src/index.ts";
import { scriptedSockets, settle } from "./socket-support.ts";

/** What an app's hook must never show a page: it is in every value the hook throws here. */
const SECRET = "postgres://admin:hunter2@10.0.0.7/permissions";

/** Everything of an error a page can read: its name, message, fields and stack, as text. */
const visible = (error: unknown) => {
  const { name, message, stack } = error as Error;
  return JSON.stringify({ ...(error as object), name, message, stack });
};

describe("an authorize hook that throws is no refusal, and its message stays at the host (decision 0117)", () => {
  it("0117: over a page's reconnecting socket, a hook that throws at a reconnect ends no subscription (nobody is told `lost`, the view is not lost), the next connection asks them again and the view keeps updating; the page's call meanwhile fails AuthorizeFailed without the hook's message (before: NotAuthorized carrying it, and every subscription ended for good)", async () => {
    const host = createHost({
      database: "db",
      openStorage: async () => new MemoryStorage(),
      harness: { registry: createRegistry(), resume: true },
      now: () => 0,
    });
    await host.ready;
    const a = await host.service.createConversation();
    let failing = false;
    const door: HostEndpoint = guardEndpoint(
      hostEndpoint(host.service),
      { user: "ann" },
      {
        authorize: () => {
          if (failing) throw new Error(`could not reach ${SECRET}`);
          return true;
        },
      },
    );
    const sockets = scriptedSockets(door);
    const socket = socketEndpoint(sockets.connect, { retryMs: 0 });
    const client = new HostClient(socket, "page-1");
    await client.ready();
    const view = await client.openConversation(a);
    const lost: Error[] = [];
    view.onLost((error) => lost.push(error));
    await client.watchTasks(
      () => {},
      (error) => lost.push(error),
    );
    failing = true;
    sockets.drop(); // the reconnect asks every subscription again: the hook throws for each
    await settle();
    expect(lost).toEqual([]);
    expect(view.lost).toBeUndefined();
    const call = await client.listConversations().catch((error: unknown) => error);
    expect(call).toBeInstanceOf(AuthorizeFailed);
    expect(call).not.toBeInstanceOf(NotAuthorized);
    expect(visible(call)).not.toContain("hunter2");
    failing = false;
    sockets.drop(); // the hook answers again: the subscriptions are asked again and served
    await settle();
    const states: ConversationViewState[] = [];
    view.subscribe((state) => states.push(state));
    await host.service.submit(a, { type: "input", content: "still watched" });
    await expect.poll(() => states.at(-1)?.entries.length ?? 0).toBeGreaterThan(0);
    expect(lost).toEqual([]);
    socket.close();
    await host.service.close();
  });

  it("0117 property: whatever a hook throws or rejects with (an Error, text, any value, an object whose toString is null), the call fails AuthorizeFailed, retryable and no refusal, and nothing of the thrown value reaches the page — not over a socket's frame, not in a Durable Object's HTTP answer (503)", async () => {
    const inner: HostEndpoint = { call: async () => [], subscribe: async () => 1, unsubscribe: () => {} };
    const thrown = fc.oneof(
      fc.string().map((text) => new Error(`${text} ${SECRET}`)),
      fc.string().map((text) => `${SECRET}${text}`),
      fc.anything().map((value) => ({ value, where: SECRET })),
      fc.constant(JSON.parse(`{"toString": null, "message": "${SECRET}"}`) as unknown),
      fc.string().map((text) => Object.assign(new TypeError(SECRET), { detail: text, secret: SECRET })),
    );
    await fc.assert(
      fc.asyncProperty(thrown, fc.boolean(), fc.constantFrom("call", "subscribe"), async (value, rejects, kind) => {
        const door = guardEndpoint(inner, "caller", {
          authorize: () => {
            if (rejects) return Promise.reject(value);
            throw value;
          },
        });
        const failed = await (kind === "call"
          ? door.call("listConversations", [])
          : door.subscribe("watchConversation", [1], () => {})
        ).catch((error: unknown) => error);
        expect(failed).toBeInstanceOf(AuthorizeFailed);
        expect(isRetryable(failed)).toBe(true);
        expect(refusalOf(failed)).toBeUndefined();
        expect((failed as AuthorizeFailed).cause).toBe(value); // kept at the host, for the app's own logs
        expect(JSON.stringify(serializeError(failed))).not.toContain("hunter2");
        const answer = errorAnswer(failed, false);
        expect(answer.status).toBe(503);
        expect(await answer.text()).not.toContain("hunter2");
      }),
      { numRuns: 100 },
    );
  });

  it("0117: a hook that says no is still a refusal (NotAuthorized, told as `lost` at a reconnect), unchanged", async () => {
    const inner: HostEndpoint = { call: async () => [], subscribe: async () => 1, unsubscribe: () => {} };
    const door = guardEndpoint(inner, "caller", { authorize: () => false });
    const refused = await door.call("listConversations", []).catch((error: unknown) => error);
    expect(refused).toBeInstanceOf(NotAuthorized);
    expect(refusalOf(refused)).toBe(refused);
  });

  it("0117 after review (M1), second review (M-b): a hook that throws the library's own NotAuthorized refuses with it unchanged — a refusal (403 from an object), its message the app's; any other throw, the library's errors included, is AuthorizeFailed", async () => {
    const inner: HostEndpoint = { call: async () => [], subscribe: async () => 1, unsubscribe: () => {} };
    const refusals = [new NotAuthorized("watchConversation", "conversation 7 is not yours.")];
    for (const thrown of refusals) {
      const door = guardEndpoint(inner, "mallory", {
        authorize: () => {
          throw thrown;
        },
      });
      const subscribed = await door.subscribe("watchConversation", [7], () => {}).catch((error: unknown) => error);
      expect(subscribed).toBe(thrown);
      expect(refusalOf(subscribed)).toBe(thrown);
      const called = await door.call("listConversations", []).catch((error: unknown) => error);
      expect(called).toBe(thrown);
    }
    const door = guardEndpoint(inner, "mallory", {
      authorize: () => Promise.reject(new NotAuthorized("watchConversation", "not yours.")),
    });
    const rejected = await door.call("listConversations", []).catch((error: unknown) => error);
    expect(rejected).toBeInstanceOf(NotAuthorized);
    expect(errorAnswer(rejected, false).status).toBe(403);
    // Any other of the library's, retryable or not, is no refusal: AuthorizeFailed, retryable, as any other throw.
    for (const other of [new StorageUnavailable("the permission store is down"), new NotFound("Conversation 7 does not exist.")]) {
      const busy = guardEndpoint(inner, "ann", {
        authorize: () => {
          throw other;
        },
      });
      const failed = await busy.call("listConversations", []).catch((error: unknown) => error);
      expect(failed).toBeInstanceOf(AuthorizeFailed);
      expect(isRetryable(failed)).toBe(true);
    }
  });
});
