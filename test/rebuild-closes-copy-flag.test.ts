/**
 * The review of decision 0132, L2: the host told a rebuild's `run` that closes the copy itself from one that does not
 * by `run.length < 2`, which a default or rest parameter or a forwarding wrapper misreads. Now `run` says so
 * (`HostOptions.rebuild.closesCopy`, set by `TabFollow.rebuild`): with it, the read-only copy answers reads while the
 * snapshot is fetched (decision 0127); without it, the copy is closed before `run` and reads wait for the rebuilt copy,
 * whatever `run`'s parameters look like. A host under a refusing arbiter (read-only); the run's fetch held by the test.
 */
import { expect, it } from "vitest";
import { LeaseNotHeld } from "../src/errors.ts";
import type { LeaseArbiter } from "../src/follow/arbiter.ts";
import { createHost } from "../src/host/host.ts";
import { createRegistry, MemoryStorage, type Storage } from "../src/index.ts";
import { flush, settled } from "./support.ts";

const arbiter: LeaseArbiter = {
  acquire: async (place) => {
    throw new LeaseNotHeld(place, "the object holds it");
  },
  renew: async () => ({ epoch: 2, ttlMs: 60_000 }),
  release: async () => {},
};

type Run = (storage: Storage, closeCopy: () => Promise<void>) => Promise<void>;

/** Rebuilds a read-only copy with `run` (built around a body that fetches, calls `closeCopy`, replaces the rows). */
async function rebuildWith(shape: (body: (closeCopy?: () => Promise<void>) => Promise<void>) => Run, closesCopy?: boolean) {
  const seed = new MemoryStorage();
  const seeding = createHost({ database: "seed", openStorage: async () => seed, harness: { registry: createRegistry() }, now: () => 0 });
  await seeding.ready;
  await seeding.service.rootConversation();
  const image = await seed.exportImage();
  await seeding.service.close();
  let inner = new MemoryStorage();
  const storage = new Proxy({} as Storage, {
    get: (_, key) => {
      const value = (inner as unknown as Record<PropertyKey, unknown>)[key];
      return typeof value === "function" ? value.bind(inner) : value;
    },
  });
  let rebuildNow: (() => void) | undefined;
  let fetched = () => {};
  const fetchedGate = new Promise<void>((resolve) => (fetched = resolve));
  let fetching = () => {};
  const fetchingNow = new Promise<void>((resolve) => (fetching = resolve));
  const body = async (closeCopy?: () => Promise<void>) => {
    fetching();
    await fetchedGate;
    await closeCopy?.();
    inner = MemoryStorage.fromImage(image);
  };
  const host = createHost({
    database: "tab",
    openStorage: async () => storage,
    harness: { registry: createRegistry(), lease: { place: "tab", arbiter } },
    rebuild: { when: (listener) => void (rebuildNow = listener), run: shape(body), ...(closesCopy === undefined ? {} : { closesCopy }) },
    now: () => 0,
  });
  expect((await host.ready).readOnly).toBe(true);
  rebuildNow!();
  await fetchingNow;
  const duringFetch = settled(host.service.listConversations(), "ok");
  await flush(16);
  const answered = duringFetch.outcome ?? "waiting";
  fetched();
  await flush(16);
  const after = await host.service.listConversations();
  await host.service.close();
  return { answered, after: after.length };
}

const forwarding =
  (body: (closeCopy?: () => Promise<void>) => Promise<void>): Run =>
  async (...args) =>
    body(args[1]);
const defaulted =
  (body: (closeCopy?: () => Promise<void>) => Promise<void>): Run =>
  async (_storage, closeCopy = async () => {}) =>
    body(closeCopy);

it("0132 review L2: a run that says closesCopy keeps the copy reading during the fetch, whatever its parameters — a forwarding (...args) wrapper, a defaulted closeCopy (fails before: length 0 and 1 read as 'no closeCopy', reads waited)", async () => {
  expect(forwarding(async () => {}).length).toBe(0);
  expect(defaulted(async () => {}).length).toBe(1);
  expect(await rebuildWith(forwarding, true)).toEqual({ answered: "ok", after: 1 });
  expect(await rebuildWith(defaulted, true)).toEqual({ answered: "ok", after: 1 });
});

it("0132 review L2: a run that does not say closesCopy has the copy closed before it, even one declaring closeCopy: reads wait for the rebuilt copy (fails before: length 2 kept the copy reading)", async () => {
  const declared =
    (body: (closeCopy?: () => Promise<void>) => Promise<void>): Run =>
    async (_storage, closeCopy) =>
      body(closeCopy);
  expect(declared(async () => {}).length).toBe(2);
  expect(await rebuildWith(declared)).toEqual({ answered: "waiting", after: 1 });
  expect(await rebuildWith(declared, false)).toEqual({ answered: "waiting", after: 1 });
});
