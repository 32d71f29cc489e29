/**
 * Decision 0137, item 1: `watchStatus(...).close()` (src/browser/tabs/own-status.ts: this tab's own worker's status,
 * and the leader's over a follower link) ends the subscription at the place that serves it — the place sends no more
 * frames for it and holds nothing. Before, `close()` only stopped its own timers: a served status subscription stayed
 * at the place (told every status, kept in its held set) until that place or connection went.
 */
import fc from "fast-check";
import { expect, it } from "vitest";
import { watchStatus } from "../src/browser/tabs/own-status.ts";
import { AuthorizeFailed, NotAuthorized } from "../src/errors.ts";
import { type HostEndpoint, hostEndpoint } from "../src/host/endpoint.ts";
import { createHost } from "../src/host/host.ts";
import { type HeldSubscription, type HostMessage, type MessageConnection, messageEndpoint, serveMessages } from "../src/host/messages.ts";
import { pendingSubscription } from "../src/host/pending-subscription.ts";
import type { HarnessStatus } from "../src/host/protocol.ts";
import { createRegistry, MemoryStorage } from "../src/index.ts";
import { boundedClock } from "./tabs-bounded-clock.ts";
import { macrotask, until } from "./tabs-support.ts";

const settle = async () => {
  for (let i = 0; i < 10; i++) await macrotask();
};

it("0137 (S4's close, across a link): a closed status watch is unsubscribed at the place — no frame after it, nothing held there (fails before: the host's `closed` still sent, the subscription held)", async () => {
  const served = createHost({
    database: `watch-close-${crypto.randomUUID()}`,
    openStorage: async () => new MemoryStorage(),
    harness: { registry: createRegistry() },
    now: () => 0,
  });
  await served.ready;
  const frames: HostMessage[] = [];
  let held: HeldSubscription[] = [];
  // The page's side and the place's, over messages as a follower link or a socket carries them.
  const page = messageEndpoint((message) => queueMicrotask(() => place.receive(message)));
  const place: MessageConnection = serveMessages(
    hostEndpoint(served.service),
    (message) => {
      frames.push(message);
      queueMicrotask(() => page.receive(message));
    },
    { onSubscriptions: (now) => (held = now) },
  );
  const told: HarnessStatus[] = [];
  const watch = watchStatus(page.endpoint, (status) => told.push(status), { clock: boundedClock(0) });
  await until(() => told.some((status) => status.kind === "ready"), "served");
  expect(held.map((subscription) => subscription.method)).toEqual(["onStatus"]);

  watch.close();
  await settle();
  expect(held).toEqual([]);
  const before = frames.length;
  await served.service.close();
  await settle();
  expect(frames.slice(before)).toEqual([]); // the host's `closed` went to no one
  expect(told.map((status) => status.kind)).toEqual(["ready"]);
});

/** A place whose status asks the test answers one by one, in any order; it records what it holds. */
function scriptedPlace(cancellable: boolean) {
  interface Ask {
    id: number;
    emit: (value: unknown) => void;
    settle?: { resolve: (id: number) => void; reject: (error: unknown) => void };
    state: "asked" | "held" | "refused" | "released";
  }
  const asks: Ask[] = [];
  const endpoint: HostEndpoint = {
    call: () => Promise.reject(new Error("no calls here")),
    subscribe(_method, _args, emit) {
      const ask: Ask = { id: asks.length + 1, emit, state: "asked" };
      asks.push(ask);
      const answer = new Promise<number>((resolve, reject) => (ask.settle = { resolve, reject }));
      if (!cancellable) return answer;
      return pendingSubscription(answer, () => {
        if (ask.state !== "asked") return;
        ask.state = "released";
        ask.settle?.reject(new Error("given up"));
      });
    },
    unsubscribe(id) {
      const ask = asks[id - 1];
      if (ask?.state === "held") ask.state = "released";
    },
  };
  const answer = (ask: Ask, how: "serve" | "throw" | "refuse") => {
    if (ask.state !== "asked") return;
    if (how === "serve") {
      ask.state = "held";
      ask.emit({ kind: "ready", database: "d" });
      ask.settle?.resolve(ask.id);
    } else {
      ask.state = "refused";
      ask.settle?.reject(how === "throw" ? new AuthorizeFailed("onStatus") : new NotAuthorized("onStatus", "no."));
    }
  };
  return { endpoint, asks, answer };
}

const step = fc.oneof(
  fc.record({
    kind: fc.constant("answer" as const),
    pick: fc.nat(),
    how: fc.constantFrom("serve" as const, "throw" as const, "refuse" as const),
  }),
  fc.record({ kind: fc.constant("emit" as const), pick: fc.nat() }),
  fc.record({ kind: fc.constantFrom("clock" as const, "again" as const, "close" as const) }),
);

it("0137 (property, hostile orders): whatever the order of answers, late answers, re-asks on the clock, askAgain and close, once closed the place holds nothing and nothing more is told (fails before: a served ask stays held)", async () => {
  await fc.assert(
    fc.asyncProperty(
      fc.boolean(),
      fc.array(step, { maxLength: 14 }),
      fc.array(fc.constantFrom("serve" as const, "throw" as const, "refuse" as const), { maxLength: 6 }),
      async (cancellable, steps, late) => {
        const clock = boundedClock(0);
        const place = scriptedPlace(cancellable);
        const told: HarnessStatus[] = [];
        const watch = watchStatus(place.endpoint, (status) => told.push(status), { clock, refused: { firstMs: 5_000, maxMs: 60_000 } });
        const flush = async () => {
          for (let i = 0; i < 5; i++) await Promise.resolve();
        };
        let closed = false;
        let toldAtClose = 0;
        const close = () => {
          if (!closed) toldAtClose = told.length;
          closed = true;
          watch.close();
        };
        for (const command of steps) {
          const open = place.asks.filter((ask) => ask.state === "asked");
          if (command.kind === "answer" && open.length > 0) place.answer(open[command.pick % open.length]!, command.how);
          else if (command.kind === "emit") {
            const heldNow = place.asks.filter((ask) => ask.state === "held");
            if (heldNow.length > 0) heldNow[command.pick % heldNow.length]!.emit({ kind: "ready", database: "d" });
          } else if (command.kind === "clock" && clock.pending > 0) clock.next();
          else if (command.kind === "again") watch.again();
          else if (command.kind === "close") close();
          await flush();
        }
        close();
        await flush();
        // Late answers to asks still open (a place that ignores the cancel, or answers as it is given up).
        for (const [i, how] of late.entries()) {
          const open = place.asks.filter((ask) => ask.state === "asked");
          if (open.length > 0) place.answer(open[i % open.length]!, how);
          await flush();
        }
        for (const ask of place.asks.filter((ask) => ask.state === "asked")) place.answer(ask, "serve");
        await flush();
        for (const ask of place.asks.filter((ask) => ask.state === "held")) ask.emit({ kind: "ready", database: "d" });
        expect(place.asks.filter((ask) => ask.state === "held")).toEqual([]);
        expect(told.length).toBe(toldAtClose);
        expect(clock.pending).toBe(0);
      },
    ),
    { numRuns: 300 },
  );
});
