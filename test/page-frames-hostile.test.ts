/**
 * The page's side of a message transport (decision 0114, after review): frames from the host are text from a socket.
 * One that is not JSON, not an object, an error frame for an id the page never had, or one whose `error` is not an
 * object (`null`, a number, `{"toString": null}`) never throws out of the page's frame handler and never ends another
 * subscription; a malformed error under a subscription's own id ends that one, told once with an Error.
 */
import fc from "fast-check";
import { describe, expect, it } from "vitest";
import type { Json } from "../src/base/json.ts";
import { type SocketLike, socketEndpoint } from "../src/browser/socket.ts";
import { type ClientMessage, type HostMessage, messageEndpoint } from "../src/host/messages.ts";
import { hostileJson } from "./support.ts";

/** A frame for none of the page's ids (1, 2: subscriptions; 3: a call), or not a frame at all. */
const strangeFrame: fc.Arbitrary<unknown> = fc.oneof(
  hostileJson(2),
  fc.record({
    type: fc.oneof(fc.constantFrom("error", "result", "event"), hostileJson(1)),
    id: fc.oneof(fc.integer({ min: 4 }), fc.constantFrom(0, -1, 1.5, null, "1"), hostileJson(1)),
    error: hostileJson(2),
    value: hostileJson(1),
  }),
);

const malformedError: fc.Arbitrary<Json> = fc.oneof(fc.constantFrom(null, 5, "NotFound", [], true), hostileJson(2));

describe("hostile host frames at the page (decision 0114, after review)", () => {
  it("R9 property: messageEndpoint.receive never throws on a strange frame, ends no other subscription; a malformed error under a subscription's id ends it once with an Error, under a call's id rejects the call with an Error", async () => {
    await fc.assert(
      fc.asyncProperty(fc.array(strangeFrame, { maxLength: 8 }), malformedError, malformedError, async (frames, forA, forCall) => {
        const { endpoint, receive } = messageEndpoint(() => {});
        const heard: unknown[] = [];
        const lostA: Error[] = [];
        const lostB: Error[] = [];
        const a = endpoint.subscribe(
          "watchTasks",
          [],
          () => {},
          (error) => lostA.push(error),
        );
        const b = endpoint.subscribe(
          "onReport",
          [],
          (value) => heard.push(value),
          (error) => lostB.push(error),
        );
        receive({ type: "result", id: 1, value: null });
        receive({ type: "result", id: 2, value: null });
        expect([await a, await b]).toEqual([1, 2]);
        const call = endpoint.call("status", []).then(
          () => undefined,
          (error: unknown) => error,
        );
        for (const frame of frames) expect(() => receive(frame as HostMessage)).not.toThrow();
        receive({ type: "event", id: 2, value: "still here" });
        expect(heard.at(-1)).toBe("still here");
        expect(lostA).toEqual([]);
        expect(() => receive({ type: "error", id: 1, error: forA } as never)).not.toThrow();
        expect(() => receive({ type: "error", id: 1, error: forA } as never)).not.toThrow();
        expect(lostA).toHaveLength(1);
        expect(lostA[0]).toBeInstanceOf(Error);
        expect(typeof `${lostA[0]}`).toBe("string");
        expect(() => receive({ type: "error", id: 3, error: forCall } as never)).not.toThrow();
        const refused = await call;
        expect(refused).toBeInstanceOf(Error);
        expect(typeof String(refused)).toBe("string");
        receive({ type: "event", id: 2, value: "still here after" });
        expect(heard.at(-1)).toBe("still here after");
        expect(lostB).toEqual([]);
      }),
      { numRuns: 100 },
    );
  });

  it("R9: the reconnecting socket: a frame that is not JSON, `null`, an error frame for an id it never had, do not throw out of its listener or end anything; `error: null` under a subscription's id ends only that one (lost once, an Error), and the next connection asks only the other", async () => {
    const sockets: Array<{ fire: (type: string, event?: unknown) => void; sent: ClientMessage[] }> = [];
    const connect = (): SocketLike => {
      const listeners: Record<string, Array<(event?: any) => void>> = { open: [], message: [], close: [], error: [] };
      const socket = {
        sent: [] as ClientMessage[],
        fire: (type: string, event?: unknown) => {
          for (const listener of listeners[type]!) listener(event);
        },
      };
      sockets.push(socket);
      return {
        send: (data: string) => void socket.sent.push(JSON.parse(data) as ClientMessage),
        close: () => socket.fire("close"),
        addEventListener: (type: string, listener: (event?: any) => void) => void listeners[type]!.push(listener),
      } as SocketLike;
    };
    const page = socketEndpoint(connect, { setTimer: (fire) => void queueMicrotask(fire), random: () => 0 });
    const frame = (data: string) => sockets.at(-1)!.fire("message", { data });
    const answerAll = () => {
      for (const sent of sockets.at(-1)!.sent.splice(0)) frame(JSON.stringify({ type: "result", id: sent.id, value: null }));
    };
    const lostA: Error[] = [];
    const lostB: Error[] = [];
    const heard: unknown[] = [];
    const a = page.subscribe(
      "watchTasks",
      [],
      () => {},
      (error) => lostA.push(error),
    );
    const b = page.subscribe(
      "onReport",
      [],
      (value) => heard.push(value),
      (error) => lostB.push(error),
    );
    sockets[0]!.fire("open");
    await new Promise((resolve) => setTimeout(resolve, 0));
    const [idA, idB] = sockets[0]!.sent.map((sent) => sent.id);
    answerAll();
    await Promise.all([a, b]);

    for (const data of [
      "not json",
      "null",
      "5",
      JSON.stringify({ type: "error", id: 99, error: null }),
      JSON.stringify({ type: "error", id: 98 }),
    ])
      expect(() => frame(data)).not.toThrow();
    frame(JSON.stringify({ type: "event", id: idB, value: "b" }));
    expect(heard).toEqual(["b"]);

    expect(() => frame(JSON.stringify({ type: "error", id: idA, error: null }))).not.toThrow();
    await new Promise((resolve) => setTimeout(resolve, 0));
    expect(lostA).toHaveLength(1);
    expect(lostA[0]).toBeInstanceOf(Error);
    expect(lostB).toEqual([]);

    // The next connection asks only the subscription that was not ended.
    sockets[0]!.fire("close");
    await new Promise((resolve) => setTimeout(resolve, 0));
    sockets.at(-1)!.fire("open");
    await new Promise((resolve) => setTimeout(resolve, 0));
    expect(sockets.at(-1)!.sent.map((sent) => sent.type === "subscribe" && sent.method)).toEqual(["onReport"]);
    const again = sockets.at(-1)!.sent[0]!.id;
    answerAll();
    await new Promise((resolve) => setTimeout(resolve, 0));
    frame(JSON.stringify({ type: "event", id: again, value: "b again" }));
    expect(heard).toEqual(["b", "b again"]);
    expect(lostA).toHaveLength(1);
    expect(lostB).toEqual([]);
    page.close();
  });
});
