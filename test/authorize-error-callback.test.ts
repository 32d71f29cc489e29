/**
 * Decision 0117, later (item 6 of its open seams): the app hears that its `authorize` hook failed. A hook that throws
 * (or rejects with) anything but `NotAuthorized` answers its caller `AuthorizeFailed` with none of the hook's error;
 * before, the error stayed only as that answer's `cause` at the host, and no callback told the app. Now
 * `onAuthorizeError(error, { caller, action, door })` is told the hook's own error, once, for each door: the host's
 * doors (`guardEndpoint`: a Durable Object's pages, `POST /rpc` and RPC; a worker's page and tabs) and a follow link's
 * (`tellingFailures`). A refusal (false, a thrown `NotAuthorized`) is not a failure: nobody is told. A callback that
 * throws changes no answer (as S7's reports never throw into the harness).
 */
import fc from "fast-check";
import { afterEach, describe, expect, it } from "vitest";
import { exposeHost, type WorkerCaller, wrapHost } from "../src/browser/comlink.ts";
import { guardObjectEndpoint, objectDoors } from "../src/cloudflare/object-doors.ts";
import { AuthorizeFailed, NotAuthorized } from "../src/errors.ts";
import { allowed, tellingFailures } from "../src/follow/object-door.ts";
import { HostClient } from "../src/host/client.ts";
import { type AuthorizeErrorAt, guardEndpoint } from "../src/host/doors.ts";
import type { HostEndpoint } from "../src/host/endpoint.ts";
import { serializeError } from "../src/host/error-wire.ts";
import { createHost } from "../src/host/host.ts";
import { createRegistry, MemoryStorage } from "../src/index.ts";

const inner: HostEndpoint = { call: async () => null, subscribe: async () => 1, unsubscribe: () => {} };

const channels: MessageChannel[] = [];
afterEach(() => {
  for (const channel of channels.splice(0)) {
    channel.port1.close();
    channel.port2.close();
  }
});

describe("onAuthorizeError: the app hears that its authorize hook failed (decision 0117, later)", () => {
  it("0117 later (6): the host's doors tell the hook's own error with its caller, action and door, for a call and a subscribe; the caller still gets AuthorizeFailed without it (before: told nobody)", async () => {
    const told: Array<[unknown, AuthorizeErrorAt<string>]> = [];
    const failure = new Error("the permission store at db.internal:5432 is down");
    const door = guardEndpoint(inner, "ann", {
      authorize: () => {
        throw failure;
      },
      onAuthorizeError: (error, at) => told.push([error, at]),
    });
    const called = await door.call("listConversations", []).catch((error: unknown) => error);
    const subscribed = await door.subscribe("watchConversation", [1], () => {}).catch((error: unknown) => error);
    expect(called).toBeInstanceOf(AuthorizeFailed);
    expect(subscribed).toBeInstanceOf(AuthorizeFailed);
    expect(JSON.stringify(serializeError(called))).not.toContain("db.internal");
    expect(told).toEqual([
      [failure, { caller: "ann", action: "listConversations", door: "host" }],
      [failure, { caller: "ann", action: "watchConversation", door: "host" }],
    ]);
  });

  it("0117 later (6): a refusal is no failure — false, a thrown or rejected NotAuthorized tell nobody; a callback that throws changes no answer", async () => {
    const told: unknown[] = [];
    for (const authorize of [
      () => false,
      () => {
        throw new NotAuthorized("listConversations", "not yours.");
      },
      async () => Promise.reject(new NotAuthorized("listConversations", "not yours.")),
    ]) {
      const door = guardEndpoint(inner, "ann", { authorize, onAuthorizeError: (error) => told.push(error) });
      await expect(door.call("listConversations", [])).rejects.toBeInstanceOf(NotAuthorized);
    }
    expect(told).toEqual([]);
    const loud = guardEndpoint(inner, "ann", {
      authorize: async () => Promise.reject(new Error("down")),
      onAuthorizeError: () => {
        throw new Error("the app's logger is broken");
      },
    });
    await expect(loud.call("listConversations", [])).rejects.toBeInstanceOf(AuthorizeFailed);
  });

  it("0117 later (6), property: whatever a hook throws or rejects with (but NotAuthorized), the callback is told that very value once and the answer is AuthorizeFailed", async () => {
    await fc.assert(
      fc.asyncProperty(
        fc.oneof(
          fc.anything(),
          fc.string().map((text) => new Error(text)),
          fc.constant({ toString: null }),
          fc.string().map((text) => Object.assign(new TypeError(text), { secret: text })),
        ),
        fc.boolean(),
        fc.constantFrom("call", "subscribe"),
        async (value, rejects, kind) => {
          const told: unknown[] = [];
          // Recorded here, asserted below: the door tells through `safely`, which would swallow an expect's throw.
          const where: unknown[] = [];
          const door = guardEndpoint(
            inner,
            { user: "ann" },
            {
              authorize: rejects
                ? () => Promise.reject(value)
                : () => {
                    throw value;
                  },
              onAuthorizeError: (error, at) => {
                told.push(error);
                where.push(at);
              },
            },
          );
          const answer =
            kind === "call"
              ? await door.call("inspect", []).catch((error: unknown) => error)
              : await door.subscribe("watchTasks", [], () => {}).catch((error: unknown) => error);
          expect(answer).toBeInstanceOf(AuthorizeFailed);
          expect(told).toHaveLength(1);
          expect(Object.is(told[0], value)).toBe(true);
          expect(where).toEqual([{ caller: { user: "ann" }, action: kind === "call" ? "inspect" : "watchTasks", door: "host" }]);
        },
      ),
      { numRuns: 200, seed: 6 },
    );
  });

  it("0117 later (6): a Durable Object's doors (objectDoors) carry the callback to every call through them (before: the object had no such option)", async () => {
    const told: Array<[unknown, AuthorizeErrorAt<unknown>]> = [];
    const failure = new Error("blink");
    const doors = objectDoors({
      powers: ["query"],
      authorize: () => {
        throw failure;
      },
      onAuthorizeError: (error, at) => told.push([error, at]),
    });
    const door = guardObjectEndpoint(inner, "bob", doors);
    await expect(door.call("query", ["SELECT 1"])).rejects.toBeInstanceOf(AuthorizeFailed);
    expect(told).toEqual([[failure, { caller: "bob", action: "query", door: "host" }]]);
  });

  it("0117 later (6): a follow link's door tells the hook's failure with its action (door follow), not its refusals", async () => {
    const told: Array<[unknown, string]> = [];
    const failure = new Error("blink");
    const failing = tellingFailures(
      () => {
        throw failure;
      },
      (error, action) => told.push([error, action]),
    );
    expect(await allowed(failing, "push", "tab-1")).toBeInstanceOf(AuthorizeFailed);
    const refusing = tellingFailures(
      () => {
        throw new NotAuthorized("push", "not yours.");
      },
      (error, action) => told.push([error, action]),
    );
    expect(await allowed(refusing, "push", "tab-1")).toBeInstanceOf(NotAuthorized);
    expect(
      await allowed(
        tellingFailures(
          () => false,
          () => told.push(["false", "?"]),
        ),
        "push",
      ),
    ).toBeInstanceOf(NotAuthorized);
    // the hook still gets its arguments as before (a request only when there is one)
    const seen: unknown[][] = [];
    await allowed(
      tellingFailures(
        (...args: unknown[]) => {
          seen.push(args);
          return true;
        },
        () => {},
      ),
      "page-calls.claim",
      "tab-1",
      { conversationId: 3 },
    );
    expect(seen).toEqual([["page-calls.claim", "tab-1", { conversationId: 3 }]]);
    expect(told).toEqual([[failure, "push"]]);
  });

  it("0117 later (6): a browser worker's doors (serveHarness's onAuthorizeError through exposeHost) tell the page's caller", async () => {
    const served = createHost({
      database: "door",
      openStorage: async () => new MemoryStorage(),
      harness: { registry: createRegistry() },
      now: () => 0,
    });
    const told: Array<[unknown, AuthorizeErrorAt<WorkerCaller>]> = [];
    const failure = new Error("blink");
    const channel = new MessageChannel();
    channels.push(channel);
    exposeHost(served.service, channel.port1 as never, {
      authorize: (_caller, call) => {
        if (call.method === "listConversations") throw failure;
        return true;
      },
      onAuthorizeError: (error, at) => told.push([error, at]),
    });
    const client = new HostClient(wrapHost(channel.port2 as never));
    await client.ready();
    await expect(client.listConversations()).rejects.toBeInstanceOf(AuthorizeFailed);
    expect(told).toEqual([[failure, { caller: { from: "page" }, action: "listConversations", door: "host" }]]);
    await served.service.close();
  });
});
