/**
 * Decision 0111 (section 4, and its review): `HostClient.openConversation(id).cancel()` — and
 * `watchConversation(...).cancel()`, which opens the same way — gives the open up whenever it comes: the promise
 * rejects NotFound ("no longer watched") even when the host had answered the watch and its snapshot was still on its
 * way, and a view that opens after it (or had opened before it) is closed, whatever the transport does with a cancel
 * that comes after its answer.
 */
import { describe, expect, it } from "vitest";
import type { ConversationViewUpdate } from "../src/agent/view/view.ts";
import { HostClient } from "../src/host/client.ts";
import type { HostEndpoint } from "../src/host/endpoint.ts";
import { type ClientMessage, messageEndpoint } from "../src/host/messages.ts";
import { pendingSubscription } from "../src/host/pending-subscription.ts";
import { snapshot } from "./react-fake-client.ts";
import { settled } from "./support.ts";

const settle = async () => {
  for (let i = 0; i < 3; i++) await new Promise((resolve) => setTimeout(resolve, 0));
};

/**
 * An endpoint whose conversation watch the test answers (`answer(id)`) and feeds (`emit`); a cancel after its answer
 * does nothing (the in-process host's plain promise for a conversation that is there), so only an unsubscribe ends it.
 */
function answeringEndpoint() {
  const control: { answer?: (id: number) => void; emit?: (update: ConversationViewUpdate) => void; unsubscribed: number[] } = {
    unsubscribed: [],
  };
  const endpoint: HostEndpoint = {
    call: async () => null,
    subscribe(method, _args, emit) {
      if (method !== "watchConversation") return Promise.resolve(1); // the client's status
      control.emit = emit as (update: ConversationViewUpdate) => void;
      return pendingSubscription(new Promise<number>((resolve) => (control.answer = resolve)), () => {});
    },
    unsubscribe: (id) => void control.unsubscribed.push(id),
  };
  return { endpoint, control };
}

describe("openConversation(...).cancel() whenever it comes (decision 0111 review)", () => {
  it("0107/0111: cancel() after the host answered the watch, before its snapshot: the promise rejects NotFound and the watch is unsubscribed (before: the promise never settled)", async () => {
    const { endpoint, control } = answeringEndpoint();
    const opening = new HostClient(endpoint).openConversation(7);
    const state = settled(opening, "opened");
    await settle();
    control.answer?.(42);
    await settle();
    opening.cancel();
    await settle();
    expect(state.outcome).toBe("NotFound");
    expect(control.unsubscribed).toEqual([42]);
    control.emit?.(snapshot(7)); // late: nobody hears it, nothing is unsubscribed twice
    await settle();
    expect(control.unsubscribed).toEqual([42]);
  });

  it("0107/0111: over messages, cancel() between the subscribe's result and its snapshot: the promise rejects, and the snapshot that crossed the unsubscribe opens nothing (before: the promise never settled)", async () => {
    const sent: ClientMessage[] = [];
    const link = messageEndpoint((message) => void sent.push(message));
    const opening = new HostClient(link.endpoint).openConversation(7);
    const state = settled(opening, "opened");
    await settle();
    const watch = sent.find((message) => message.type === "subscribe" && message.method === "watchConversation");
    if (!watch) throw new Error("no watch sent");
    link.receive({ type: "result", id: watch.id, value: null });
    await settle();
    opening.cancel();
    await settle();
    link.receive({ type: "event", id: watch.id, value: snapshot(7) as never });
    await settle();
    expect(state.outcome).toBe("NotFound");
    expect(sent.filter((message) => message.type === "unsubscribe" && message.id === watch.id)).toHaveLength(1);
  });

  it("0107/0111: cancel() after the view opened closes it, on a transport that does nothing with a cancel after its answer (before: the view stayed subscribed)", async () => {
    const { endpoint, control } = answeringEndpoint();
    const opening = new HostClient(endpoint).openConversation(7);
    await settle();
    control.answer?.(42);
    control.emit?.(snapshot(7));
    const view = await opening;
    const heard: unknown[] = [];
    view.subscribe((state) => heard.push(state));
    opening.cancel();
    await settle();
    expect(control.unsubscribed).toEqual([42]);
    view.close(); // the owner's own close after it: once
    control.emit?.(snapshot(7, [{ id: 1, text: "late" }]));
    expect(heard).toHaveLength(1); // the state it had when subscribed, nothing after
    expect(control.unsubscribed).toEqual([42]);
  });

  it("0107/0111: watchConversation(...).cancel() between the answer and the snapshot rejects too and leaves nothing subscribed (before: it never settled)", async () => {
    const { endpoint, control } = answeringEndpoint();
    const views: unknown[] = [];
    const watching = new HostClient(endpoint).watchConversation(7, (view) => views.push(view));
    const state = settled(watching);
    await settle();
    control.answer?.(42);
    await settle();
    watching.cancel();
    await settle();
    control.emit?.(snapshot(7));
    await settle();
    expect(state.outcome).toBe("NotFound");
    expect(views).toEqual([]);
    expect(control.unsubscribed).toEqual([42]);
  });
});
