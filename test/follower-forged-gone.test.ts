/**
 * Decision 0137, item 2 (decision 0132's "Not done"): a `gone` on a follower's connection that is not its leader's —
 * posted by anyone who learned the connection's name (it goes in clear on the database's channel) — no longer drops
 * the link. The leader names each connection (`session`, in its `accepted` and its `gone`); an accepted link takes only
 * the `gone` that says it. A link dropped by a `gone` asks who leads, so one taken before the leader accepted (where no
 * name is known yet) costs a reconnect, never a tab left waiting for the lock. Real `serveTabs` and `tabsEndpoint` over
 * Node's BroadcastChannel and the Web Locks stand-in.
 */
import fc from "fast-check";
import { expect, it } from "vitest";
import { tabsEndpoint } from "../src/browser/tabs/follower.ts";
import { serveTabs } from "../src/browser/tabs/leader.ts";
import { HostClient } from "../src/host/client.ts";
import { createHost } from "../src/host/host.ts";
import type { HarnessService } from "../src/host/protocol.ts";
import { createRegistry, MemoryStorage } from "../src/index.ts";
import { boundedClock } from "./tabs-bounded-clock.ts";
import { macrotask, tabsTestScope, until, waitingOwnWorker } from "./tabs-support.ts";

const { cleanups } = tabsTestScope();
const settle = async () => {
  for (let i = 0; i < 20; i++) await macrotask();
};

/**
 * A leader tab and a follower tab on one database; `connects` counts the follower's `connect`s (a spy on the
 * database's channel), `heard` what the leader sent on the connection (a spy on it), `forge` posts on it.
 * `lifeLock` stands in for the host's (a test holds the leader's `accepted` back with it).
 */
async function world(lifeLock?: (own: () => Promise<string | undefined>) => Promise<string | undefined>) {
  const database = `forged-gone-${crypto.randomUUID()}`;
  const served = createHost({
    database,
    openStorage: async () => new MemoryStorage(),
    harness: { registry: createRegistry() },
    now: () => 0,
  });
  const service: HarnessService = lifeLock
    ? new Proxy(served.service, {
        get: (target, key) =>
          key === "lifeLock"
            ? () => lifeLock(() => target.lifeLock())
            : (Reflect.get(target, key) as (...args: unknown[]) => unknown)?.bind?.(target),
      })
    : served.service;
  cleanups.push(() => served.service.close().catch(() => {}));
  const connections: string[] = [];
  const heard: unknown[] = [];
  const spy = new BroadcastChannel(`pi-durable-web:tabs:${database}`);
  let forger: BroadcastChannel | undefined;
  spy.onmessage = ({ data }) => {
    if (data?.type !== "connect") return;
    connections.push(data.connection);
    forger?.close();
    forger = new BroadcastChannel(data.connection);
    forger.onmessage = ({ data: frame }) => {
      const type = (frame as { type?: unknown } | null)?.type;
      if (type !== "call" && type !== "subscribe" && type !== "unsubscribe" && type !== "bye") heard.push(frame);
    };
  };
  cleanups.push(() => {
    spy.close();
    forger?.close();
  });
  serveTabs(service, database);
  await served.ready;
  const clock = boundedClock(0);
  const endpoint = tabsEndpoint(waitingOwnWorker(database), { clock });
  cleanups.push(() => endpoint.close());
  const client = new HostClient(endpoint);
  const following = () => client.status.kind === "ready" && client.status.role === "follower";
  const forge = (frame: unknown) => forger!.postMessage(frame);
  return { client, endpoint, following, connections, heard, forge, served, clock };
}

it("0137: forged gones on an accepted link (no session, another, not a string) are ignored — the link kept, one connect, a call answered (fails before: the first dropped it, the tab waiting for the lock)", async () => {
  const { client, following, connections, forge } = await world();
  await until(following, "following");
  forge({ type: "gone" });
  forge({ type: "gone", session: "not-the-leaders" });
  forge({ type: "gone", session: 42 });
  await settle();
  expect(following()).toBe(true);
  expect(connections).toHaveLength(1);
  await expect(client.listConversations()).resolves.toEqual([]);
});

it("0137: forged byes on the connection (no session, another) do not make the leader drop the follower — a call is still answered (fails before: the leader dropped it at the first, the call unanswered for good)", async () => {
  const { client, following, forge } = await world();
  await until(following, "following");
  forge({ type: "bye" });
  forge({ type: "bye", session: "not-the-followers" });
  await settle();
  let answered = false;
  void client.listConversations().then(() => (answered = true));
  await until(() => answered, "answered");
});

it("0137: the leader's own gone still drops the link (its host closed: the tab no longer follows it)", async () => {
  const { following, served, client } = await world();
  await until(following, "following");
  await served.service.close();
  await until(() => !following(), "left");
  expect(client.status.kind).toBe("waiting-for-lock");
});

it("0137: a gone before the leader accepted (no name known yet) is taken, and the link asks who leads — it follows the same leader again (fails before: waiting for the lock for good)", async () => {
  let hold = true;
  let release = () => {};
  const { following, connections, forge, clock } = await world(async (own) => {
    if (hold) {
      hold = false;
      await new Promise<void>((resolve) => (release = resolve));
    }
    return own();
  });
  await until(() => connections.length === 1, "asked to connect");
  await settle(); // the forger's channel is open
  forge({ type: "gone" });
  await settle();
  clock.advance(500); // who leads, asked again on the endpoint's backoff (the review of 0137, M2)
  await until(() => connections.length === 2, "asked who leads, connected again");
  release();
  await until(following, "following the same leader");
});

const forged = fc.oneof(
  fc.record(
    { type: fc.constant("bye"), session: fc.option(fc.oneof(fc.string(), fc.uuid()), { nil: undefined }) },
    { requiredKeys: ["type"] },
  ),
  fc.record(
    { type: fc.constant("gone"), session: fc.option(fc.oneof(fc.string(), fc.uuid(), fc.integer()), { nil: undefined }) },
    { requiredKeys: ["type"] },
  ),
  fc.record(
    {
      type: fc.constant("accepted"),
      session: fc.option(fc.uuid(), { nil: undefined }),
      lifeLock: fc.option(fc.oneof(fc.string(), fc.integer()), { nil: undefined }),
    },
    { requiredKeys: ["type"] },
  ),
  fc.record({
    type: fc.constantFrom("result", "error"),
    id: fc.oneof(fc.constant(null), fc.integer({ min: 100, max: 1e6 }), fc.string()),
    value: fc.jsonValue(),
  }),
  fc.record({ type: fc.string(), id: fc.jsonValue() }),
  fc.jsonValue(),
  fc.constant(null),
);

it("0137 (property, hostile frames): arbitrary forged frames (byes too: the leader hears them) and replays of what the leader sent, in any order, never drop an accepted link or wedge it — one connect, still following, a call answered (fails before: any gone dropped it)", async () => {
  await fc.assert(
    fc.asyncProperty(
      fc.array(
        fc.oneof(
          forged,
          fc.nat().map((replay) => ({ replay })),
        ),
        { minLength: 1, maxLength: 12 },
      ),
      async (frames) => {
        const { client, following, connections, heard, forge } = await world();
        try {
          await until(following, "following");
          for (const frame of frames) {
            const replay = frame && typeof frame === "object" && "replay" in frame && heard.length > 0;
            forge(replay ? heard[(frame as { replay: number }).replay % heard.length] : frame);
          }
          await settle();
          expect(following()).toBe(true);
          expect(connections).toHaveLength(1);
          let answered = false;
          void client.listConversations().then(() => (answered = true));
          await until(() => answered, "a call answered"); // a follower the leader dropped is answered never
        } finally {
          for (const cleanup of cleanups.splice(0).reverse()) await cleanup();
        }
      },
    ),
    { numRuns: 60, endOnFailure: true }, // no shrinking: each failing run waits 3 s for an answer that never comes
  );
}, 60_000);

it("0137: a leader from before 0137 (its accepted and gone carry no session): its gone still drops the link, which asks who leads and connects again", async () => {
  const database = `forged-gone-old-${crypto.randomUUID()}`;
  const channel = new BroadcastChannel(`pi-durable-web:tabs:${database}`);
  const ports: BroadcastChannel[] = [];
  cleanups.push(() => {
    channel.close();
    for (const port of ports) port.close();
  });
  // The old leader: announces itself, accepts each connection with no session, serves nothing else.
  channel.onmessage = ({ data }) => {
    if (data?.type === "who-leads") channel.postMessage({ type: "leader", leader: "old" });
    if (data?.type !== "connect" || data.leader !== "old") return;
    const port = new BroadcastChannel(data.connection);
    ports.push(port);
    port.postMessage({ type: "accepted" });
  };
  const clock = boundedClock(0);
  const endpoint = tabsEndpoint(waitingOwnWorker(database), { clock });
  cleanups.push(() => endpoint.close());
  await until(() => ports.length === 1, "connected");
  await settle();
  ports[0]!.postMessage({ type: "gone" });
  await settle();
  clock.advance(500); // the endpoint's backoff (the review of 0137, M2)
  await until(() => ports.length === 2, "asked who leads, connected again");
});
