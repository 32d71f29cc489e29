/**
 * The world of a page refused its own worker's status while another tab leads (decision 0142 and its review): the
 * leader a real `createHost` behind `serveTabs`'s door, holding the database; this tab's page a `HarnessClient` over a
 * MessagePort to `exposeHost`'s door on a real `createHost` that waits for the lock (and serves tabs, as the browser's
 * worker does); `navigator.locks` the stand-in of `tabsTestScope()`.
 */
import { HarnessClient } from "../src/browser/client.ts";
import { exposeHost } from "../src/browser/comlink.ts";
import { serveTabs } from "../src/browser/tabs/leader.ts";
import { createHost } from "../src/host/host.ts";
import type { Ownership } from "../src/host/ownership.ts";
import { createRegistry } from "../src/index.ts";
import { sqliteMemoryBackend } from "./support.ts";
import { type tabsTestScope, until } from "./tabs-support.ts";

type Caller = { from: "page" | "tab" };
/** An app's `authorize` hook. */
export type Hook = (caller: Caller, call: { method: string }) => boolean | Promise<boolean>;

/** Another tab's worker that holds `database` and leads it behind `serveTabs`'s door (`hook`), its life lock held. */
export async function leaderTab({ locks, cleanups }: ReturnType<typeof tabsTestScope>, database: string, hook: Hook) {
  const leaderLife = `life:${crypto.randomUUID()}`;
  void locks.request(leaderLife, () => new Promise<never>(() => {}));
  const leader = createHost({
    database,
    openStorage: () => sqliteMemoryBackend.create(),
    harness: { registry: createRegistry() },
    ownership: {
      acquire: async () => () => {},
      cancel: () => {},
      requestTakeover: () => {},
      onTakeoverRequest: () => {},
      lifeLock: async () => leaderLife,
    },
    now: () => 0,
  });
  serveTabs(leader.service, database, { authorize: hook as never });
  cleanups.push(() => leader.service.close().catch(() => {}));
  await leader.ready;
  return { leader, leaderLife };
}

/**
 * The leader's tab (`leaderHook` its door) and this tab's page over its own worker (`ownHook`), which waits for the
 * lock until `leaderGoes()`: the leader's worker closed, its life lock let go, this tab's worker granted the database —
 * a fresh one, or with `shared` the leader's (its image as the leader closed, as one OPFS file is to both tabs).
 */
export async function refusedPageWorld(
  { locks, cleanups }: ReturnType<typeof tabsTestScope>,
  database: string,
  leaderHook: Hook,
  ownHook: Hook,
  methods?: Record<string, (...a: never[]) => unknown>,
  { shared = false }: { shared?: boolean } = {},
) {
  const { leader, leaderLife } = await leaderTab({ locks, cleanups }, database, leaderHook);

  const lifeLock = `life:${crypto.randomUUID()}`;
  void locks.request(lifeLock, () => new Promise<never>(() => {}));
  let end!: (release: (() => void) | undefined) => void;
  const granted = new Promise<(() => void) | undefined>((resolve) => (end = resolve));
  const ownership: Ownership = {
    async acquire(waiting) {
      waiting();
      return granted;
    },
    cancel: () => end(undefined),
    requestTakeover: () => {},
    onTakeoverRequest: () => {},
    lifeLock: async () => lifeLock,
  };
  let image: Uint8Array | undefined;
  const own = createHost({
    database,
    openStorage: () => (image ? sqliteMemoryBackend.fromImage(image) : sqliteMemoryBackend.create()),
    harness: { registry: createRegistry() },
    ownership,
    now: () => 0,
    ...(methods ? { methods: methods as never } : {}),
  });
  const channel = new MessageChannel();
  exposeHost(own.service, channel.port1 as never, { authorize: ownHook as never });
  serveTabs(own.service, database, { authorize: ownHook as never });
  const client = new HarnessClient(Object.assign(channel.port2, { terminate() {} }) as unknown as Worker);
  cleanups.push(async () => {
    client.terminate();
    channel.port1.close();
    channel.port2.close();
    await own.service.close().catch(() => {});
  });
  await until(() => own.service.status().kind === "waiting-for-lock", "the own worker waits for the lock");
  const leaderGoes = async () => {
    if (shared) image = await leader.service.exportDatabase();
    await leader.service.close();
    locks.die(leaderLife);
    end(() => {});
  };
  return { leader, own, client, leaderGoes };
}
