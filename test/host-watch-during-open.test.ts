/**
 * Decision 0144: a `watchConversation` that reaches a host whose open is under way (`starting`, `opening`, `recovering`)
 * waits for what the open leads to, as a call does since 0138: started on the harness it opens, or — the host waiting
 * for the database another tab has — the host's own "not open" marked with that database, which a refused page's tabs
 * endpoint carries to the leading tab. Before, it failed at once "not open (status: starting)", and a page refused its
 * status that watched at load (its worker not yet asking for the lock) could not follow the leader with it.
 */
import { expect, it } from "vitest";
import { hostWaitingFor } from "../src/host/error-wire.ts";
import { createHost } from "../src/host/host.ts";
import type { Ownership } from "../src/host/ownership.ts";
import { createRegistry } from "../src/index.ts";
import { sqliteMemoryBackend } from "./support.ts";
import { macrotask } from "./tabs-support.ts";

/**
 * A host that starts until `ask()`; then, `held` by another tab, it waits for the lock (until closed), or it is
 * granted the database at once.
 */
function hostAskingLater(database: string, held: boolean) {
  let ask!: () => void;
  const asked = new Promise<void>((resolve) => (ask = resolve));
  let cancel!: () => void;
  const cancelled = new Promise<undefined>((resolve) => (cancel = () => resolve(undefined)));
  const ownership: Ownership = {
    async acquire(waiting) {
      await asked;
      if (!held) return () => {};
      waiting();
      return cancelled;
    },
    cancel: () => cancel(),
    requestTakeover: () => {},
    onTakeoverRequest: () => {},
    lifeLock: async () => undefined,
  };
  const served = createHost({
    database,
    openStorage: () => sqliteMemoryBackend.create(),
    harness: { registry: createRegistry() },
    ownership,
    now: () => 0,
  });
  served.ready.catch(() => {});
  return { served, ask };
}

const outcome = (subscribed: unknown) => {
  const seen = { value: "pending", error: undefined as unknown };
  Promise.resolve()
    .then(() => subscribed)
    .then(
      () => (seen.value = "watching"),
      (error: Error) => {
        seen.value = `${error.name}: ${error.message}`;
        seen.error = error;
      },
    );
  return seen;
};

it("0144 (S4, one owner): a watch made while the host starts waits; the host then waiting for another tab's database answers it with its 'not open' naming that database (fails before: 'not open (status: starting)' at once)", async () => {
  const database = `watch-open-${crypto.randomUUID()}`;
  const { served, ask } = hostAskingLater(database, true);
  expect(served.service.status().kind).toBe("starting");
  const seen = outcome(
    (() => {
      try {
        return served.service.watchConversation(1, () => {});
      } catch (error) {
        return Promise.reject(error);
      }
    })(),
  );
  for (let i = 0; i < 5; i++) await macrotask();
  expect(seen.value).toBe("pending");
  ask(); // the host asks for the lock: another tab holds it
  for (let i = 0; i < 20 && seen.value === "pending"; i++) await macrotask();
  expect(served.service.status().kind).toBe("waiting-for-lock");
  expect(seen.value).toMatch(/^DurableError: .*not open \(status: waiting-for-lock\)/);
  expect(hostWaitingFor(seen.error)).toBe(database);
  expect(served.listenerCount()).toBe(0);
  await served.service.close().catch(() => {});
});

it("0144: a watch made while the host starts, the host then granted the database, is answered by the harness it opened (fails before: 'not open (status: starting)')", async () => {
  const database = `watch-opened-${crypto.randomUUID()}`;
  const { served, ask } = hostAskingLater(database, false);
  const updates: unknown[] = [];
  const seen = outcome(
    (() => {
      try {
        return served.service.watchConversation(1, (update) => updates.push(update));
      } catch (error) {
        return Promise.reject(error);
      }
    })(),
  );
  for (let i = 0; i < 5; i++) await macrotask();
  expect(seen.value).toBe("pending");
  ask(); // granted at once
  await served.ready;
  for (let i = 0; i < 20 && seen.value === "pending"; i++) await macrotask();
  // Asked of the harness it opened (a fresh database: no conversation 1), not "not open".
  expect(seen.value).toMatch(/^NotFound: Conversation 1 /);
  expect(updates).toEqual([]);
  await served.service.close().catch(() => {});
});
