/**
 * Review of decision 0138, H1, on the real `serveTabs` and `tabsEndpoint` with a lock broker: another tab leads, this
 * tab's worker waits for the lock, and its door's hook throws once for this page's status (`reconnecting`). A call made
 * meanwhile waits and is answered by the leader once the status tells `waiting-for-lock` (before: it was sent to this
 * tab's own worker, which answered a non-retryable `DurableError` "not open (status: waiting-for-lock)").
 */
import { afterEach, beforeEach, expect, it } from "vitest";
import { tabsEndpoint } from "../src/browser/tabs/follower.ts";
import { serveTabs } from "../src/browser/tabs/leader.ts";
import { AuthorizeFailed, DurableError } from "../src/errors.ts";
import { HostClient } from "../src/host/client.ts";
import type { HostEndpoint } from "../src/host/endpoint.ts";
import { createHost } from "../src/host/host.ts";
import { createRegistry, MemoryStorage } from "../src/index.ts";
import { boundedClock } from "./tabs-bounded-clock.ts";
import { Locks, macrotask, until } from "./tabs-support.ts";

const locks = new Locks();
const cleanups: Array<() => unknown> = [];
beforeEach(() => {
  (globalThis as { navigator?: unknown }).navigator = { locks };
});
afterEach(async () => {
  for (const cleanup of cleanups.splice(0).reverse()) await cleanup();
  delete (globalThis as { navigator?: unknown }).navigator;
});

it("S2 (0138 review H1): a follower tab's call made while its own status ask is reconnecting waits, and the leader answers it (before: its own waiting worker's non-retryable 'not open')", async () => {
  const database = `h1-${crypto.randomUUID()}`;
  const served = createHost({
    database,
    openStorage: async () => new MemoryStorage(),
    harness: { registry: createRegistry() },
    now: () => 0,
  });
  serveTabs(served.service, database, { authorize: async () => true });
  cleanups.push(() => served.service.close().catch(() => {}));
  await served.ready;
  let ownAsks = 0;
  let ownCalls = 0;
  // This tab's worker waits for the lock; its door's hook throws for the page's status once (a store outage).
  const own: HostEndpoint = {
    call: async () => {
      ownCalls++;
      throw new DurableError("The database is not open (status: waiting-for-lock).");
    },
    subscribe: async (_m, _a, emit) => {
      if (ownAsks++ === 0) throw new AuthorizeFailed("onStatus");
      emit({ kind: "waiting-for-lock", database });
      return 1;
    },
    unsubscribe: () => {},
  };
  const clock = boundedClock(0);
  const endpoint = tabsEndpoint(own, { clock });
  const client = new HostClient(endpoint);
  cleanups.push(() => endpoint.close());
  await until(() => client.status.kind === "reconnecting", "reconnecting");
  let outcome = "pending";
  client.createConversation().then(
    (id) => (outcome = `id ${id}`),
    (e: Error) => (outcome = `${e.name}: ${e.message}`),
  );
  for (let i = 0; i < 20; i++) await macrotask();
  expect(outcome).toBe("pending");
  clock.advance(1_000);
  for (let i = 0; i < 200 && outcome === "pending"; i++) await macrotask();
  expect(outcome).toMatch(/^id \d+$/);
  expect(ownCalls).toBe(0);
  expect(client.status).toMatchObject({ kind: "ready", role: "follower" });
});
