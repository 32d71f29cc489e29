/**
 * Decision 0117 (a seam left by 0114's review): a page's listener that throws is its owner's bug. It must not keep the
 * other listeners of the same list from being told — a `ConversationView`'s `onLost` listeners, its state listeners,
 * `HostClient`'s status listeners — nor escape into the transport's frame handler, where it would stop the frame's
 * other work (the socket's `message` listener, `messageEndpoint.receive`). Driven through the page's messages, as a
 * host's frames reach it.
 */
import { describe, expect, it } from "vitest";
import type { ConversationViewState } from "../src/agent/view/view.ts";
import { HostClient } from "../src/host/client.ts";
import { type ClientMessage, type HostMessage, messageEndpoint } from "../src/host/messages.ts";
import type { HarnessStatus } from "../src/host/protocol.ts";
import { snapshot } from "./react-fake-client.ts";
import { settle } from "./socket-support.ts";

const ready = (openMs: number) =>
  ({ kind: "ready", database: "db", recovered: [], recovery: { stop: "close", interrupted: [] }, openMs }) as never as HarnessStatus;

/** A page whose host answers every subscribe at once (a status, a view's snapshot); `ids` names each by method. */
function pageOfFrames() {
  const ids = new Map<string, number>();
  const page = messageEndpoint((message: ClientMessage) => {
    if (message.type !== "subscribe") return;
    ids.set(message.method, message.id);
    queueMicrotask(() => {
      page.receive({ type: "result", id: message.id, value: null });
      const value = message.method === "onStatus" ? ready(1) : snapshot(message.args[0] as number);
      page.receive({ type: "event", id: message.id, value });
    });
  });
  const client = new HostClient(page.endpoint, "page-1");
  /** Delivers a host frame as the socket's message listener does: what it throws is what the socket would. */
  const deliver = (frame: HostMessage) => page.receive(frame);
  return { client, ids, deliver };
}

/** A listener that throws from its second call on (its first is in the caller's own `subscribe`). */
const throwsLater = () => {
  let calls = 0;
  return () => {
    if (calls++ > 0) throw new Error("the app's listener is broken");
  };
};

describe("a listener that throws stops neither the others nor the transport (decision 0117)", () => {
  it("0117: two onLost listeners of a view, the first throws: the second is told, and the host's error frame is handled without a throw (before: the second never heard, the frame handler threw)", async () => {
    const { client, ids, deliver } = pageOfFrames();
    await client.ready();
    const view = await client.openConversation(7);
    view.onLost(() => {
      throw new Error("the app's onLost is broken");
    });
    const told: Error[] = [];
    view.onLost((error) => told.push(error));
    expect(() =>
      deliver({ type: "error", id: ids.get("watchConversation")!, error: { name: "NotFound", message: "Conversation 7 is gone." } }),
    ).not.toThrow();
    expect(told).toHaveLength(1);
    expect(told[0]!.name).toBe("NotFound");
    expect(view.lost).toBe(told[0]);
  });

  it("0117: two state listeners of a view, the first throws: the second gets every state, the frame is handled without a throw", async () => {
    const { client, ids, deliver } = pageOfFrames();
    await client.ready();
    const view = await client.openConversation(7);
    view.subscribe(throwsLater());
    const states: ConversationViewState[] = [];
    view.subscribe((state) => states.push(state));
    const id = ids.get("watchConversation")!;
    expect(() => deliver({ type: "event", id, value: snapshot(7, [{ id: 1, text: "one" }]) })).not.toThrow();
    expect(() => deliver({ type: "event", id, value: snapshot(7, [{ id: 2, text: "two" }]) })).not.toThrow();
    expect(states.map((state) => state.entries.map((entry) => entry.id))).toEqual([[], [1], [2]]);
  });

  it("0117: two status listeners of a client, the first throws: the second hears every status, the frame is handled without a throw", async () => {
    const { client, ids, deliver } = pageOfFrames();
    await client.ready();
    client.onStatus(throwsLater());
    const heard: number[] = [];
    client.onStatus((status) => status.kind === "ready" && heard.push(status.openMs));
    expect(() => deliver({ type: "event", id: ids.get("onStatus")!, value: ready(2) })).not.toThrow();
    expect(() => deliver({ type: "event", id: ids.get("onStatus")!, value: ready(3) })).not.toThrow();
    await settle();
    expect(heard).toEqual([1, 2, 3]);
    expect(client.status).toMatchObject({ kind: "ready", openMs: 3 });
  });
});
