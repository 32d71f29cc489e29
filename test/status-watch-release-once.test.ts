/**
 * The review of decision 0137, L1 and L2: `watchStatus(...).close()` releases the watched subscription at the place
 * once, and also when it is called from within `subscribe` itself (a place that answers there; a link closes its watch
 * on the leader's `closed`).
 */
import { afterEach, expect, it } from "vitest";
import { watchStatus } from "../src/browser/tabs/own-status.ts";
import { AuthorizeFailed } from "../src/errors.ts";
import { type HostEndpoint, hostEndpoint } from "../src/host/endpoint.ts";
import { createHost } from "../src/host/host.ts";
import { type ClientMessage, messageEndpoint, serveMessages } from "../src/host/messages.ts";
import { createRegistry, MemoryStorage } from "../src/index.ts";
import { boundedClock } from "./tabs-bounded-clock.ts";
import { macrotask, until } from "./tabs-support.ts";

const cleanups: Array<() => unknown> = [];
afterEach(async () => {
  for (const cleanup of cleanups.splice(0).reverse()) await cleanup();
});
const settle = async () => {
  for (let i = 0; i < 20; i++) await macrotask();
};

it("review 0137 L1: a watch closed by its listener at an answer given within subscribe (the re-ask's) releases that subscription — the place holds nothing (fails before: it held [2])", async () => {
  const held = new Set<number>();
  let lastId = 0;
  const place: HostEndpoint = {
    call: () => Promise.reject(new Error("none")),
    subscribe(_method, _args, emit) {
      const id = ++lastId;
      if (id === 1) return Promise.reject(new AuthorizeFailed("onStatus")); // the first ask waits; the re-ask answers at once
      held.add(id);
      emit({ kind: "closed", reason: "shutdown" });
      return Promise.resolve(id);
    },
    unsubscribe: (id) => void held.delete(id),
  };
  const clock = boundedClock(0);
  const told: string[] = [];
  const watch = watchStatus(
    place,
    (status) => {
      told.push(status.kind);
      if (status.kind === "closed") watch.close();
    },
    { clock },
  );
  await settle();
  expect(clock.waiting).toBe(true);
  clock.next(); // the re-ask
  await settle();
  expect(told).toEqual(["reconnecting", "closed"]);
  expect([...held]).toEqual([]);
  expect(clock.pending).toBe(0);
});

it("review 0137 L2: closing a served watch over messages sends one unsubscribe for it, and no cancel (fails before: two unsubscribes for the same id)", async () => {
  const served = createHost({
    database: `release-once-${crypto.randomUUID()}`,
    openStorage: async () => new MemoryStorage(),
    harness: { registry: createRegistry() },
    now: () => 0,
  });
  cleanups.push(() => served.service.close().catch(() => {}));
  await served.ready;
  const sent: ClientMessage[] = [];
  const page = messageEndpoint((message) => {
    sent.push(message);
    queueMicrotask(() => place.receive(message));
  });
  const place = serveMessages(hostEndpoint(served.service), (message) => queueMicrotask(() => page.receive(message)));
  let ready = false;
  const watch = watchStatus(page.endpoint, (status) => (ready ||= status.kind === "ready"), { clock: boundedClock(0) });
  await until(() => ready, "served");
  const before = sent.length;
  watch.close();
  await settle();
  expect(sent.slice(before)).toEqual([{ type: "unsubscribe", id: 1 }]);
});
