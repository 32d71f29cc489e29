/**
 * Decision 0111: what a page's connection holds, as a Durable Object keeps it in the socket's attachment
 * (`serveMessages`' `onSubscriptions`, then `restore` in the instance that wakes, src/cloudflare/sockets.ts). A
 * subscribe the host answers later (a watch waiting for its conversation, decisions 0103 and 0107) was kept only once
 * answered, so an object evicted while it waited woke without it and never answered the page. Now it is kept, marked
 * `waiting`, and the instance that wakes answers it. Through raw frames, as the object's socket carries them.
 */
import fc from "fast-check";
import { describe, expect, it } from "vitest";
import type { HostEndpoint } from "../src/host/endpoint.ts";
import { type HeldSubscription, type HostMessage, serveMessages } from "../src/host/messages.ts";
import { pendingSubscription } from "../src/host/pending-subscription.ts";
import { waitingWatches } from "./support.ts";

/**
 * One instance of a host: `now` subscriptions are answered at once, `wait` ones once the conversation came (`come()`;
 * it is in the object's storage, so every later instance has it).
 */
function instance(conversation: { came: boolean }) {
  const watches = waitingWatches();
  const answered = new Map<number, (value: unknown) => void>();
  let ids = 0;
  const start = (emit: (value: unknown) => void) => {
    const id = ++ids;
    answered.set(id, emit);
    emit("first");
    return id;
  };
  const endpoint: HostEndpoint = {
    call: async () => null,
    subscribe(method, _args, emit) {
      if (method === "now" || conversation.came) return Promise.resolve(start(emit));
      return watches.wait(() => start(emit));
    },
    unsubscribe: (id) => void answered.delete(id),
  };
  return {
    endpoint,
    come: () => {
      conversation.came = true;
      watches.come();
    },
    held: () => watches.size + answered.size,
  };
}

/** A page's socket to an object that may be evicted: its attachment survives, the instance does not. */
function objectSocket() {
  const frames: HostMessage[] = [];
  let attachment: HeldSubscription[] = [];
  const conversation = { came: false };
  const serve = () => {
    const host = instance(conversation);
    const connection = serveMessages(host.endpoint, (message) => void frames.push(structuredClone(message)), {
      onSubscriptions: (held) => void (attachment = structuredClone(held)),
    });
    return { host, connection };
  };
  let current = serve();
  return {
    frames,
    get host() {
      return current.host;
    },
    send: (message: Parameters<typeof current.connection.receive>[0]) => current.connection.receive(message),
    /** The object is evicted and wakes: a new instance subscribes again what the attachment holds. */
    evict() {
      current = serve();
      current.connection.restore(structuredClone(attachment));
    },
    answersTo: (id: number) => frames.filter((frame) => frame.id === id && frame.type !== "event"),
    eventsTo: (id: number) => frames.filter((frame) => frame.id === id && frame.type === "event"),
  };
}

const turn = () => new Promise((resolve) => setTimeout(resolve, 0));

describe("a waiting subscription in a hibernating object's socket attachment (decision 0111)", () => {
  it("S4/0111: a watch that waits when the object is evicted is answered by the instance that wakes, once its conversation comes (before: never answered)", async () => {
    const page = objectSocket();
    page.send({ type: "subscribe", id: 1, method: "now", args: [] });
    page.send({ type: "subscribe", id: 2, method: "wait", args: [9] });
    await turn();
    expect(page.answersTo(1)).toEqual([{ type: "result", id: 1, value: null }]);
    expect(page.answersTo(2)).toEqual([]);
    page.evict();
    await turn();
    expect(page.host.held()).toBe(2); // before: 1, the waiting watch was not in the attachment
    expect(page.answersTo(1)).toHaveLength(1); // the page has its answer: none again
    page.host.come();
    await turn();
    expect(page.answersTo(2)).toEqual([{ type: "result", id: 2, value: null }]);
    expect(page.eventsTo(2)).toEqual([{ type: "event", id: 2, value: "first" }]);
    // Answered now: a later eviction restores it without answering it again.
    page.evict();
    await turn();
    expect(page.answersTo(2)).toHaveLength(1);
    expect(page.host.held()).toBe(2);
  });

  it("0111 review: a restored subscription the earlier instance had answered stays in the attachment while the new instance subscribes it again behind the doors' authorize, so a second eviction in that window keeps it (before: it was dropped from the attachment and lost for good)", async () => {
    // Like the object's doors: every subscribe is answered after `authorize` (here a gate the test opens).
    const gatedHost = () => {
      const gates: Array<() => void> = [];
      const held = new Set<number>();
      let ids = 0;
      const endpoint: HostEndpoint = {
        call: async () => null,
        subscribe: (_method, _args, emit) =>
          pendingSubscription(
            new Promise<number>((resolve) =>
              gates.push(() => {
                const id = ++ids;
                held.add(id);
                resolve(id);
                emit("first");
              }),
            ),
            () => {},
          ),
        unsubscribe: (id) => void held.delete(id),
      };
      return { endpoint, held: () => held.size, open: () => gates.shift()?.() };
    };
    let attachment: HeldSubscription[] = [];
    const answers: HostMessage[] = [];
    const serve = () => {
      const host = gatedHost();
      const connection = serveMessages(host.endpoint, (message) => void (message.type !== "event" && answers.push(message)), {
        onSubscriptions: (held) => void (attachment = structuredClone(held)),
      });
      return { host, connection };
    };
    let current = serve();
    const open = () => current.host.open();
    current.connection.receive({ type: "subscribe", id: 1, method: "status", args: [] });
    current.connection.receive({ type: "subscribe", id: 2, method: "status", args: [] });
    open();
    open();
    await turn();
    expect(attachment.map((held) => held.id)).toEqual([1, 2]);
    current = serve(); // the first eviction
    current.connection.restore(structuredClone(attachment));
    open(); // 1 is answered again; 2 is still being authorized
    await turn();
    expect(attachment.map((held) => held.id)).toEqual([1, 2]); // before: [1]
    current = serve(); // the second eviction, before 2's authorize answered
    current.connection.restore(structuredClone(attachment));
    open();
    open();
    await turn();
    expect(current.host.held()).toBe(2); // before: 1
    expect(attachment.map((held) => held.id)).toEqual([1, 2]);
    expect(answers.map((answer) => answer.id)).toEqual([1, 2]); // the page was answered once each, by the first instance
  });

  it("S4/0111 property: across any evictions, every subscribe the page sent is answered exactly once, and each instance holds exactly what the page still holds", async () => {
    const action = fc.oneof(
      fc.record({ kind: fc.constantFrom("now" as const, "wait" as const) }),
      fc.constant({ kind: "evict" as const }),
      fc.constant({ kind: "come" as const }),
      fc.record({ kind: fc.constant("unsubscribe" as const), which: fc.nat(20) }),
    );
    await fc.assert(
      fc.asyncProperty(fc.array(action, { maxLength: 16 }), async (actions) => {
        const page = objectSocket();
        let ids = 0;
        const live = new Set<number>();
        const gone = new Set<number>();
        for (const step of actions) {
          if (step.kind === "now" || step.kind === "wait") {
            const id = ++ids;
            live.add(id);
            page.send({ type: "subscribe", id, method: step.kind, args: [] });
          } else if (step.kind === "evict") page.evict();
          else if (step.kind === "come") page.host.come();
          else if ("which" in step) {
            const id = [...live][step.which % Math.max(1, live.size)];
            if (id === undefined) continue;
            live.delete(id);
            gone.add(id);
            page.send({ type: "unsubscribe", id });
          }
          await turn();
        }
        expect(page.host.held()).toBe(live.size);
        page.host.come();
        await turn();
        for (const id of live) expect(page.answersTo(id)).toEqual([{ type: "result", id, value: null }]);
        // One given up was answered once too: started before, or refused (given up before its answer).
        for (const id of gone) expect(page.answersTo(id)).toHaveLength(1);
        expect(page.host.held()).toBe(live.size);
      }),
      {
        numRuns: 80,
        // Decision 0114: found by this property under CI's load, one run in two or three — a waiting one restored
        // first wrote the attachment without the answered one after it, which the second eviction then lost.
        examples: [[[{ kind: "wait" }, { kind: "now" }, { kind: "evict" }, { kind: "evict" }]]],
      },
    );
  });
});
