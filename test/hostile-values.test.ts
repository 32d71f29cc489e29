/**
 * Values a stranger shapes to break code that turns them into text before checking them (CI, 08:21: `String(x)` on
 * `{"toString": null}` threw). Each boundary answers such a value with its own typed error, no internals, and goes on.
 */
import fc from "fast-check";
import { afterEach, describe, expect, it } from "vitest";
import type { Json } from "../src/base/json.ts";
import { exposeHost, wrapHost } from "../src/browser/comlink.ts";
import { rpcError } from "../src/cloudflare/rpc.ts";
import { submitThroughObject } from "../src/follow/copy-writes.ts";
import { HostClient } from "../src/host/client.ts";
import { guardEndpoint } from "../src/host/doors.ts";
import { deserializeError, serializeError } from "../src/host/error-wire.ts";
import { AuthorizeFailed, ConversationBusy, DurableError, MemoryStorage, NotFound, UnknownMethod } from "../src/index.ts";
import { served } from "./doors-support.ts";
import { copyWorld } from "./follow-copy-world.ts";
import { ctx, HOSTILE_OBJECTS, hostileJson, openHarness, runUntil } from "./support.ts";

const channels: MessageChannel[] = [];
afterEach(() => {
  for (const channel of channels.splice(0)) {
    channel.port1.close();
    channel.port2.close();
  }
});

describe("the host's door: a method name that is not text", () => {
  it("R9: a page's call through comlink naming its method with an object ({toString: null}, …) is UnknownMethod, never a TypeError; the next call is served", async () => {
    const host = await served();
    const channel = new MessageChannel();
    channels.push(channel);
    exposeHost(host.service, channel.port1 as never);
    const page = wrapHost(channel.port2 as never);
    for (const name of [...HOSTILE_OBJECTS, 5, null]) {
      const error = await page.call(name as never, []).then(
        () => undefined,
        (thrown: Error) => thrown,
      );
      expect(error, JSON.stringify(name)).toBeInstanceOf(UnknownMethod);
      expect(error!.message).not.toMatch(/Cannot convert|\[object|at .*\.ts/);
    }
    expect(await page.call("listConversations", [])).toEqual([expect.objectContaining({ id: host.root })]);
    await host.service.close();
  });
});

describe("the follow link: a holder's error answer with hostile details", () => {
  /**
   * A hostile holder's answer to a forward: an error of a library class whose details hold an own `__proto__`, and a
   * `message`, a `stack` and a `name` that are not text (JSON text, as the frame crosses).
   */
  const DETAILS =
    '{"__proto__": {"toString": null}, "message": {"toString": null}, "stack": {"valueOf": null}, "name": 5, "conversationId": 1}';
  const refuse = (frame: string, once: { done: boolean }) => {
    const message = JSON.parse(frame) as { type: string; id?: string; error?: unknown };
    if (message.type !== "answer" || !message.error || once.done) return frame; // the forward's refusal, below
    once.done = true;
    return `{"type":"answer","id":${JSON.stringify(message.id)},"error":{"name":"ConversationBusy","message":"busy","details":${DETAILS}}}`;
  };

  it("0097 R9: a device's copy.submit whose holder answers so is refused with that class and a text message, no internals; the object goes on", async () => {
    const once = { done: false };
    const w = await copyWorld(() => true, { tabFrames: (frame) => refuse(frame, once) });
    const call = (topic: string, method: string, args: Json[]) => w.phone.call(topic, method, args);
    const outcomes: unknown[] = [];
    const submit = (requestId: string) =>
      void submitThroughObject(call, w.root.id, { type: "input", content: "hi", requestId }).then(
        (value) => outcomes.push({ value }),
        (error: unknown) => outcomes.push(error),
      );
    w.holderAway.value = true; // the tab refuses the forward (it commits nothing); its refusal becomes the one above
    submit("r1");
    await runUntil(w.clock, () => outcomes.length === 1);
    w.holderAway.value = false;
    const [error] = outcomes as Error[];
    expect(error).toBeInstanceOf(ConversationBusy);
    expect(error).toMatchObject({ name: "ConversationBusy", message: "busy", conversationId: 1 });
    expect(Object.getPrototypeOf(error)).toBe(ConversationBusy.prototype);
    // The object goes on: the next submit is forwarded and answered.
    submit("r2");
    await runUntil(w.clock, () => outcomes.length === 2);
    expect(outcomes[1]).toEqual({ value: expect.any(Number) });
    w.mirror.stop();
  });
});

describe("the error wire (error-wire.ts): any shape a stranger sends", () => {
  it("R9 property: deserializeError of any name, message and details (hostile JSON) is an Error that turns into text and serializes again, of the named class with its own prototype", () => {
    fc.assert(
      fc.property(
        fc.oneof(fc.constantFrom("ConversationBusy", "NotFound", "TypeError", "__proto__", "constructor"), hostileJson(1)),
        fc.oneof(fc.string({ maxLength: 20 }), hostileJson(1)),
        hostileJson(2),
        (name, message, details) => {
          const error = deserializeError({ name, message, details } as never);
          expect(error).toBeInstanceOf(Error);
          expect(typeof error.message).toBe("string");
          expect(typeof String(error)).toBe("string");
          const again = serializeError(error);
          expect(typeof again.name === "string" && typeof again.message === "string").toBe(true);
          if (name === "ConversationBusy") expect(Object.getPrototypeOf(error)).toBe(ConversationBusy.prototype);
        },
      ),
      { numRuns: 300 },
    );
  });
});

describe("what a door says of a thrown value that is not an Error", () => {
  it("R9/0117: an authorize hook that throws {toString: null} fails the call with AuthorizeFailed (was a TypeError, then NotAuthorized: a hook's throw is no refusal); the next call is served", async () => {
    const host = await served();
    let hostile = true;
    const door = guardEndpoint(host.endpoint, "caller", {
      authorize: () => {
        if (hostile) throw JSON.parse('{"toString": null}');
        return true;
      },
    });
    await expect(door.call("listConversations", [])).rejects.toBeInstanceOf(AuthorizeFailed);
    hostile = false;
    expect(await door.call("listConversations", [])).toEqual([expect.objectContaining({ id: host.root })]);
    await host.service.close();
  });

  it("R9: an RPC caller's error for any thrown value (HOSTILE_OBJECTS, a BigInt) is an Error with a text message (rpcError)", () => {
    for (const thrown of [...HOSTILE_OBJECTS, 10n, undefined]) {
      const error = rpcError(thrown);
      expect(error).toBeInstanceOf(Error);
      expect(typeof error.message).toBe("string");
    }
  });
});

describe("an id handed on unchecked (a task's input, say)", () => {
  it("R9: a commit whose entry names an object as its conversation ({toString: null}) is NotFound, nothing written (was a TypeError); the next commit succeeds", async () => {
    const { harness } = await openHarness(new MemoryStorage());
    const root = await harness.root(ctx);
    for (const conversationId of HOSTILE_OBJECTS) {
      const error = await root
        .commit((tx) => void tx.appendEntry({ kind: "app.note", payload: 1, conversationId: conversationId as never }), ctx)
        .then(
          () => undefined,
          (thrown: Error) => thrown,
        );
      expect(error).toBeInstanceOf(NotFound);
      expect(error!.message).toMatch(/^Conversation an? (object|array) does not exist\.$/);
    }
    await root.commit((tx) => void tx.appendEntry({ kind: "app.note", payload: 1 }), ctx);
    expect((await root.entries(ctx)).map((entry) => entry.kind)).toEqual(["app.note"]);
    await harness.close(ctx);
  });
});

describe("the page's client: a failed open's error as its host sent it", () => {
  it("R9: a status whose error has a message that is not text ({toString: null}) rejects ready() with a DurableError whose message is text (was a TypeError)", async () => {
    const client = new HostClient({
      call: async () => undefined,
      subscribe: async (method, _args, emit) => {
        if (method === "onStatus") emit({ kind: "failed", error: { name: "SomethingElse", message: JSON.parse('{"toString": null}') } });
        return 1;
      },
      unsubscribe: () => {},
    });
    const error = await client.ready().then(
      () => undefined,
      (thrown: Error) => thrown,
    );
    expect(error).toBeInstanceOf(DurableError);
    expect(error).toMatchObject({ name: "SomethingElse", message: expect.any(String) });
  });
});
