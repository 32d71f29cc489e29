/**
 * Decision 0148, property: a hostile caller's random interleaving of subscribes (answered at once, waiting for a
 * conversation, or at a door whose hook answers late or never), unsubscribes, give-ups before the answer, the
 * conversation and the late doors coming, and closes, through raw frames at `serveMessages` (as a socket or a follower
 * tab sends them). Whatever the order: what the host holds or still works on for it never passes its bound (a give-up
 * keeps its place until the host answers it: the review of 0148, M1); every refusal is `TooManySubscriptions` and comes
 * exactly when its open and given-up-but-unanswered subscriptions are at the bound; after a close the host holds nothing
 * of it; another caller on the same host is never refused.
 */
import fc from "fast-check";
import { describe, expect, it } from "vitest";
import type { HostEndpoint } from "../src/host/endpoint.ts";
import { type HostMessage, serveMessages } from "../src/host/messages.ts";
import { pendingSubscription } from "../src/host/pending-subscription.ts";
import { NotFound } from "../src/index.ts";

const BOUND = 3;

/**
 * A host shared by every caller: "now" is answered at once, "wait" once `come()` (given up: refused at once, as a watch
 * is, decision 0107); "door" once `come()` too, but like a door whose `authorize` hook waits: giving it up does not stop
 * it (decision 0148 after review); "stuck" is such a door whose hook never answers. Counts per caller (args[0]) what it
 * holds (listeners and waiting watches) and the work it started (that, and the doors still deciding).
 */
function sharedHost() {
  const live = new Map<number, string>();
  const waiting = new Set<{ caller: string; answer: () => void; refuse: (error: unknown) => void }>();
  const doors = new Set<{ caller: string; answer: () => void }>();
  const stuck: string[] = [];
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
      if (method === "stuck") {
        stuck.push(caller);
        return pendingSubscription(new Promise<number>(() => {}), () => {});
      }
      if (method === "door") {
        let door!: { caller: string; answer: () => void };
        const decided = new Promise<number>((resolve) => {
          door = { caller, answer: () => resolve(start(caller)) };
        });
        doors.add(door);
        return pendingSubscription(decided, () => {}); // the hook goes on: giving up does not end it
      }
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
  const holds = (caller: string) =>
    [...live.values()].filter((who) => who === caller).length + [...waiting].filter((entry) => entry.caller === caller).length;
  return {
    endpoint,
    come() {
      for (const entry of [...waiting]) {
        waiting.delete(entry);
        entry.answer();
      }
      for (const door of [...doors]) {
        doors.delete(door);
        door.answer();
      }
    },
    holds,
    /** What `caller` holds and the doors still deciding for it (a stuck one for good). */
    working: (caller: string) =>
      holds(caller) + [...doors].filter((door) => door.caller === caller).length + stuck.filter((who) => who === caller).length,
  };
}

type Action =
  | { kind: "subscribe"; method: "now" | "wait" | "door" | "stuck" }
  | { kind: "unsubscribe"; pick: number }
  | { kind: "come" }
  | { kind: "close" }
  | { kind: "other" };

const action: fc.Arbitrary<Action> = fc.oneof(
  {
    weight: 5,
    arbitrary: fc.record({
      kind: fc.constant("subscribe" as const),
      method: fc.constantFrom("now" as const, "wait" as const, "door" as const, "stuck" as const),
    }),
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
  it("0148 property: held + waiting + doors still deciding ≤ bound for any interleaving of subscribe/unsubscribe/give-up/come/close, a give-up keeping its place until the host answers it (review M1: before, a give-up while the door's hook waited freed it at once); each refusal is TooManySubscriptions at the bound; nothing held after close; the other caller is never refused", async () => {
    await fc.assert(
      fc.asyncProperty(fc.array(action, { maxLength: 40 }), async (actions) => {
        const host = sharedHost();
        const limits = { maxSubscriptions: BOUND, maxCallsInFlight: BOUND };
        const open = (bounded = true) => {
          const frames: HostMessage[] = [];
          return { frames, connection: serveMessages(host.endpoint, (frame) => void frames.push(frame), bounded ? { limits } : {}) };
        };
        let connections = 0;
        /** One caller name per connection of the hostile page: a stuck door of a closed one stays that one's. */
        let caller = `hostile-${++connections}`;
        let hostile = open();
        const other = open(false); // the defaults: 1,024
        /** The hostile caller's page ids it has not given up and the host has not refused, with their method. */
        let mine: Array<{ id: number; method: string }> = [];
        /** Its doors not answered yet ("door" ones until the next `come`, "stuck" ones for good). */
        let deciding = new Set<number>();
        /** Given up while their door decided: each keeps its place until the door answers. */
        let givenUp: Array<{ id: number; method: string }> = [];
        let nextId = 0;
        let others = 0;
        for (const step of actions) {
          if (step.kind === "subscribe") {
            const id = ++nextId;
            const atBound = mine.length + givenUp.length >= BOUND;
            hostile.connection.receive({ type: "subscribe", id, method: step.method, args: [caller] });
            const answers = hostile.frames.filter((frame) => frame.id === id && frame.type === "error");
            // Refused exactly at the bound, at once, with the typed error.
            expect(answers.length).toBe(atBound ? 1 : 0);
            if (atBound) expect((answers[0] as { error: { name: string } }).error.name).toBe("TooManySubscriptions");
            else {
              mine.push({ id, method: step.method });
              if (step.method === "door" || step.method === "stuck") deciding.add(id);
            }
          } else if (step.kind === "unsubscribe") {
            if (mine.length === 0) continue;
            const [gone] = mine.splice(step.pick % mine.length, 1);
            hostile.connection.receive({ type: "unsubscribe", id: gone!.id }); // before its answer too: a give-up (decision 0107)
            if (deciding.has(gone!.id)) givenUp.push(gone!);
          } else if (step.kind === "come") {
            host.come();
            for (const { id, method } of [...mine, ...givenUp]) if (method === "door") deciding.delete(id);
            givenUp = givenUp.filter(({ method }) => method === "stuck");
          } else if (step.kind === "close") {
            hostile.connection.close();
            await flush();
            expect(host.holds(caller)).toBe(0);
            caller = `hostile-${++connections}`;
            hostile = open(); // the page connects again: a fresh connection, nothing held
            mine = [];
            givenUp = [];
            deciding = new Set();
          } else {
            const id = ++others;
            other.connection.receive({ type: "subscribe", id, method: "now", args: ["other"] });
          }
          await flush();
          // What this connection started at the host, held, waiting or still at its door: never past its bound.
          expect(host.working(caller)).toBeLessThanOrEqual(BOUND);
          expect(host.working(caller)).toBe(mine.length + givenUp.length);
        }
        // The other caller, whatever the hostile one did: every subscribe answered, none refused.
        expect(other.frames.filter((frame) => frame.type === "error")).toEqual([]);
        expect(host.holds("other")).toBe(others);
        hostile.connection.close();
        other.connection.close();
        host.come(); // the late doors answer: what they subscribed for a caller gone is ended at once
        await flush();
        for (let i = 1; i <= connections; i++) expect(host.holds(`hostile-${i}`)).toBe(0);
        expect(host.holds("other")).toBe(0);
      }),
      { numRuns: 150, seed: 148 },
    );
  });
});
