/**
 * Decision 0132 (the review of 0127, L2 and L3): what a rebuild under a lease opens, and what reads see while a `run`
 * that takes no `closeCopy` replaces the storage.
 *
 * - L2: a rebuild under a lease opens its copy again read-only and asks no lease — also when the lease is free at the
 *   object (taking it is `runHere`'s; decision 0127). Nothing pinned it: a rebuild that opened writable would pass every
 *   other test.
 * - L3: a `run(storage)` that declares no `closeCopy` cannot tell the host when the storage changes: before, the kept
 *   read-only copy answered reads from its memory while `run` replaced the rows under it (a read said what the storage no
 *   longer held). Now the copy closes before such a `run`: reads wait for the rebuilt copy and answer what it holds.
 */
import { expect, it } from "vitest";
import { LeaseNotHeld } from "../src/errors.ts";
import type { LeaseArbiter } from "../src/follow/arbiter.ts";
import { createHost } from "../src/host/host.ts";
import { createRegistry, MemoryStorage, type Storage } from "../src/index.ts";
import { flush, settled } from "./support.ts";

/** An arbiter whose object holds the lease at the first ask and lets it go after (`acquires` counts the asks). */
function freedAfterFirstAsk() {
  const asked = { acquires: 0 };
  const arbiter: LeaseArbiter = {
    acquire: async (place) => {
      if (++asked.acquires === 1) throw new LeaseNotHeld(place, "the object holds it");
      return { epoch: 2, ttlMs: 60_000 };
    },
    renew: async () => ({ epoch: 2, ttlMs: 60_000 }),
    release: async () => {},
  };
  return { arbiter, asked };
}

it("S5 (0127's review, L2): a rebuild under a lease opens its copy again read-only and asks no lease, though the object's lease is free now (fails if the rebuild opens writable)", async () => {
  const { arbiter, asked } = freedAfterFirstAsk();
  let rebuildNow: (() => void) | undefined;
  let runs = 0;
  const host = createHost({
    database: "tab",
    openStorage: async () => new MemoryStorage(),
    harness: { registry: createRegistry(), lease: { place: "tab", arbiter } },
    rebuild: {
      when: (listener) => void (rebuildNow = listener),
      closesCopy: true,
      run: async (_storage, closeCopy) => {
        runs++;
        await closeCopy();
      },
    },
    now: () => 0,
  });
  expect((await host.ready).readOnly).toBe(true);
  const statuses: string[] = [];
  host.service.onStatus((status) => void statuses.push(status.kind === "ready" ? `ready ${status.runs}` : status.kind));
  rebuildNow!();
  await expect.poll(() => runs).toBe(1);
  await flush(16);
  expect(statuses.at(-1)).toBe("ready elsewhere");
  expect(host.service.status()).toMatchObject({ kind: "ready", runs: "elsewhere" });
  expect(asked.acquires).toBe(1); // the rebuild asked none: the lease stays the object's until runHere takes it
  await host.service.close();
});

it("S5 (0127's review, L3): a rebuild run(storage) that declares no closeCopy replaces the rows: reads during it wait for the rebuilt copy and answer what the storage holds (before: the kept copy answered from its memory, the storage replaced under it)", async () => {
  // What the object's snapshot brings: one conversation.
  const seed = new MemoryStorage();
  const seeding = createHost({ database: "seed", openStorage: async () => seed, harness: { registry: createRegistry() }, now: () => 0 });
  await seeding.ready;
  const root = await seeding.service.rootConversation();
  const image = await seed.exportImage();
  await seeding.service.close();

  let inner = new MemoryStorage(); // a new device: empty
  const storage = new Proxy({} as Storage, {
    get: (_, key) => {
      const value = (inner as unknown as Record<PropertyKey, unknown>)[key];
      return typeof value === "function" ? value.bind(inner) : value;
    },
  });
  const { arbiter } = freedAfterFirstAsk();
  let rebuildNow: (() => void) | undefined;
  let replaced = () => {};
  const rowsReplaced = new Promise<void>((resolve) => (replaced = resolve));
  let finish = () => {};
  const finished = new Promise<void>((resolve) => (finish = resolve));
  const host = createHost({
    database: "tab",
    openStorage: async () => storage,
    harness: { registry: createRegistry(), lease: { place: "tab", arbiter } },
    rebuild: {
      when: (listener) => void (rebuildNow = listener),
      // The old one-parameter shape (TypeScript accepts it): the rows change, then the run goes on a while.
      run: async () => {
        inner = MemoryStorage.fromImage(image);
        replaced();
        await finished;
      },
    },
    now: () => 0,
  });
  expect((await host.ready).readOnly).toBe(true);
  expect(await host.service.listConversations()).toEqual([]);
  rebuildNow!();
  await rowsReplaced;
  const read = host.service.listConversations();
  const answered = settled(read, "ok");
  await flush(16);
  expect(answered.outcome).toBeUndefined(); // no copy open: it waits (before: [] from the replaced copy's memory)
  finish();
  expect((await read).map((conversation) => conversation.id)).toEqual([root]);
  await host.service.close();
});
