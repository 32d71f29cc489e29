/**
 * Decision 0148, property: a hostile caller's random interleaving of subscribes (answered at once, or waiting for a
 * conversation), unsubscribes, give-ups before the answer, the conversation coming and closes, through raw frames at
 * `serveMessages` (as a socket or a follower tab sends them). Whatever the order: what the host holds for it, held and
 * waiting, never passes its bound; every refusal is `TooManySubscriptions` and comes exactly when its open
 * subscriptions are at the bound; after a close the host holds nothing of it; another caller on the same host is never
 * refused.
 */
import fc from "fast-check";
import { describe, expect, it } from "vitest";
import type { HostEndpoint } from "../src/host/endpoint.ts";
import { type HostMessage, serveMessages } from "../src/host/messages.ts";
import { pendingSubscription } from "../src/host/pending-subscription.ts";
import { NotFound } from "../src/index.ts";

const BOUND = 3;

/** A host shared by every caller: "now" is answered at once, "wait" once `come()`; counts what it holds per caller (args[0]). */
function sharedHost() {
  const live = new Map<number, string>();
  const waiting = new Set<{ caller: string; answer: () => void; refuse: (error: unknown) => void }>();
  let ids = 0;
  const start = (caller: string) => {
    const id = ++ids;
    live.set(id, caller);
    return id;
  };
  const endpoint: HostEndpoint = {
    call: async () => null,
    subscribe(method, args) {
      const caller = String(args[0]);
      if (method === "now") return Promise.resolve(start(caller));
      let entry!: { caller: string; answer: () => void; refuse: (error: unknown) => void };
      const answered = new Promise<number>((resolve, reject) => {
        entry = { caller, answer: () => resolve(start(caller)), refuse: reject };
      });
      waiting.add(entry);
      return pendingSubscription(answered, () => {
        if (waiting.delete(entry)) entry.refuse(new NotFound("no longer watched"));
      });
    },
    unsubscribe: (id) => void live.delete(id),
  };
  return {
    endpoint,
    come() {
      for (const entry of [...waiting]) {
        waiting.delete(entry);
        entry.answer();
      }
    },
    heldBy: (caller: string) =>
      [...live.values()].filter((who) => who === caller).length + [...waiting].filter((entry) => entry.caller === caller).length,
  };
}

type Action =
  | { kind: "subscribe"; method: "now" | "wait" }
  | { kind: "unsubscribe"; pick: number }
  | { kind: "come" }
  | { kind: "close" }
  | { kind: "other" };

const action: fc.Arbitrary<Action> = fc.oneof(
  {
    weight: 5,
    arbitrary: fc.record({ kind: fc.constant("subscribe" as const), method: fc.constantFrom("now" as const, "wait" as const) }),
  },
  { weight: 3, arbitrary: fc.record({ kind: fc.constant("unsubscribe" as const), pick: fc.nat(20) }) },
  { weight: 1, arbitrary: fc.constant({ kind: "come" as const }) },
  { weight: 1, arbitrary: fc.constant({ kind: "close" as const }) },
  { weight: 1, arbitrary: fc.constant({ kind: "other" as const }) },
);

const flush = async () => {
  for (let i = 0; i < 5; i++) await Promise.resolve();
  await new Promise((resolve) => setImmediate(resolve));
};

describe("a hostile caller's subscriptions stay within its bound (decision 0148, property)", () => {
  it("0148 property: held + waiting ≤ bound for any interleaving of subscribe/unsubscribe/give-up/come/close; each refusal is TooManySubscriptions at the bound; nothing held after close; the other caller is never refused", async () => {
    await fc.assert(
      fc.asyncProperty(fc.array(action, { maxLength: 40 }), async (actions) => {
        const host = sharedHost();
        const limits = { maxSubscriptions: BOUND, maxCallsInFlight: BOUND };
        const open = (bounded = true) => {
          const frames: HostMessage[] = [];
          return { frames, connection: serveMessages(host.endpoint, (frame) => void frames.push(frame), bounded ? { limits } : {}) };
        };
        let hostile = open();
        const other = open(false); // the defaults: 1,024
        /** The hostile caller's page ids it has not given up and the host has not refused. */
        let mine: number[] = [];
        let nextId = 0;
        let others = 0;
        for (const step of actions) {
          if (step.kind === "subscribe") {
            const id = ++nextId;
            const atBound = mine.length >= BOUND;
            hostile.connection.receive({ type: "subscribe", id, method: step.method, args: ["hostile"] });
            const answers = hostile.frames.filter((frame) => frame.id === id && frame.type === "error");
            // Refused exactly at the bound, at once, with the typed error.
            expect(answers.length).toBe(atBound ? 1 : 0);
            if (atBound) expect((answers[0] as { error: { name: string } }).error.name).toBe("TooManySubscriptions");
            else mine.push(id);
          } else if (step.kind === "unsubscribe") {
            if (mine.length === 0) continue;
            const [id] = mine.splice(step.pick % mine.length, 1);
            hostile.connection.receive({ type: "unsubscribe", id: id! }); // before its answer too: a give-up (decision 0107)
          } else if (step.kind === "come") {
            host.come();
          } else if (step.kind === "close") {
            hostile.connection.close();
            await flush();
            expect(host.heldBy("hostile")).toBe(0);
            hostile = open(); // the page connects again: a fresh connection, nothing held
            mine = [];
          } else {
            const id = ++others;
            other.connection.receive({ type: "subscribe", id, method: "now", args: ["other"] });
          }
          await flush();
          expect(host.heldBy("hostile")).toBeLessThanOrEqual(BOUND);
          expect(host.heldBy("hostile")).toBe(mine.length);
        }
        // The other caller, whatever the hostile one did: every subscribe answered, none refused.
        expect(other.frames.filter((frame) => frame.type === "error")).toEqual([]);
        expect(host.heldBy("other")).toBe(others);
        hostile.connection.close();
        other.connection.close();
        await flush();
        expect(host.heldBy("hostile") + host.heldBy("other")).toBe(0);
      }),
      { numRuns: 150, seed: 148 },
    );
  });
});
