/**
 * The tabs module's stand-ins for Node (src/browser/tabs/): the part of Web Locks it uses. Shared by the tabs
 * tests (test/tabs.test.ts) and the hand-over sweep (test/tabs-sweep.test.ts).
 */
import { afterEach, beforeEach } from "vitest";
import type { HostEndpoint } from "../src/host/endpoint.ts";
import type { HarnessStatus } from "../src/host/protocol.ts";

/**
 * Web Locks, in one process: a lock is held until its callback's promise settles, or its holder `dies`. `client(id)` is
 * the same lock manager as one browsing context sees it: what it holds, `query()` names with its `clientId` (as
 * Chromium does); a lock asked of the manager itself has none (`query()` then cannot say who holds it).
 */
export class Locks {
  readonly #held = new Map<string, () => void>();
  readonly #holders = new Map<string, string | undefined>();
  readonly #queues = new Map<string, Array<() => void>>();

  request(name: string, ...rest: unknown[]): Promise<unknown> {
    return this.#request(undefined, name, rest);
  }

  /** This lock manager as the context `clientId` sees it (for `navigator.locks`). */
  client(clientId: string): LockManager {
    return {
      request: (name: string, ...rest: unknown[]) => this.#request(clientId, name, rest),
      query: () => this.query(),
    } as unknown as LockManager;
  }

  /** What is held, and by which client (`clientId` undefined for what the manager itself was asked). */
  async query(): Promise<{ held: Array<{ name: string; mode: "exclusive"; clientId?: string }>; pending: [] }> {
    return {
      held: [...this.#held.keys()].map((name) => ({ name, mode: "exclusive" as const, clientId: this.#holders.get(name) })),
      pending: [],
    };
  }

  #request(clientId: string | undefined, name: string, rest: unknown[]): Promise<unknown> {
    const callback = rest.pop() as (lock: { name: string } | null) => unknown;
    const options = (rest[0] ?? {}) as { signal?: AbortSignal; ifAvailable?: boolean };
    return new Promise((resolve, reject) => {
      const grant = () => {
        let released = false;
        const release = () => {
          if (released) return;
          released = true;
          this.#held.delete(name);
          this.#holders.delete(name);
          this.#queues.get(name)?.shift()?.();
        };
        this.#held.set(name, release);
        this.#holders.set(name, clientId);
        const held = Promise.resolve().then(() => callback({ name }));
        held.finally(release).catch(() => {});
        held.then(resolve, reject);
      };
      if (!this.#held.has(name)) return grant();
      if (options.ifAvailable) return void Promise.resolve(callback(null)).then(resolve, reject);
      const queue = this.#queues.get(name) ?? [];
      this.#queues.set(name, queue);
      queue.push(grant);
      options.signal?.addEventListener("abort", () => {
        const at = queue.indexOf(grant);
        if (at < 0) return;
        queue.splice(at, 1);
        reject(new DOMException("The request was aborted.", "AbortError"));
      });
    });
  }

  /** The holder of `name` is gone (its worker or page died): the next in line gets it. */
  die(name: string): void {
    this.#held.get(name)?.();
  }
}

/** One macrotask of real time (the channel's messages travel on those). */
export const macrotask = () => new Promise<void>((resolve) => setTimeout(resolve, 1));

/** Real time passes (the channel's messages, a slow hook) until `done`, or fails after 3 s. */
export async function until(done: () => boolean, what: string): Promise<void> {
  for (let i = 0; i < 3000 && !done(); i++) await macrotask();
  if (!done()) throw new Error(`never: ${what}`);
}

/** A tab's own worker that waits for the database's lock for good (another tab holds it): it only tells that status. */
export function waitingOwnWorker(database: string): HostEndpoint {
  return {
    call: () => new Promise(() => {}),
    subscribe: async (_method, _args, emit) => {
      emit({ kind: "waiting-for-lock", database } satisfies HarnessStatus);
      return 1;
    },
    unsubscribe: () => {},
  };
}

/**
 * The tabs tests' scope: one `Locks` stand-in as `navigator.locks` before each test of the file, and the cleanups the
 * test pushes run in reverse after it.
 */
export function tabsTestScope(): { locks: Locks; cleanups: Array<() => unknown> } {
  const locks = new Locks();
  const cleanups: Array<() => unknown> = [];
  beforeEach(() => {
    (globalThis as { navigator?: unknown }).navigator = { locks };
  });
  afterEach(async () => {
    for (const cleanup of cleanups.splice(0).reverse()) await cleanup();
  });
  return { locks, cleanups };
}
