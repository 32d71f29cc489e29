/// <reference lib="webworker" />
/**
 * One owner per database across the tabs of an origin, with Web Locks: the worker holds a lock named after
 * the database while it has it open, a second tab's worker waits for it (status `waiting-for-lock`), and a
 * takeover request over a BroadcastChannel asks the owner to close cleanly. A second lock, held for the
 * worker's whole life, lets the page tell a dead worker from a busy one.
 */
import type { Ownership } from "../host/ownership.ts";

/** Ownership by Web Locks, or undefined where there are none (old browsers, Node): then the app keeps one owner. */
export function webLocksOwnership(database: string): Ownership | undefined {
  const locks = (globalThis.navigator as Navigator | undefined)?.locks;
  if (!locks) return undefined;
  const lockName = `pi-durable-web:${database}`;
  const stopWaiting = new AbortController();
  const channel = typeof BroadcastChannel === "function" ? new BroadcastChannel(lockName) : undefined;
  return {
    acquire: (waiting) =>
      new Promise((resolve, reject) => {
        // Held until released: the lock callback's promise settles when the database is let go.
        const hold = () => new Promise<void>((release) => resolve(release));
        void locks
          .request(lockName, { ifAvailable: true }, async (lock) => {
            if (lock) return hold();
            waiting();
            locks.request(lockName, { signal: stopWaiting.signal }, hold).catch((error: unknown) => {
              if (stopWaiting.signal.aborted)
                resolve(undefined); // closed while waiting: nothing was opened
              else reject(error);
            });
          })
          .catch(reject);
      }),
    cancel: () => stopWaiting.abort(),
    requestTakeover: () => channel?.postMessage({ type: "takeover" }),
    onTakeoverRequest(handler) {
      if (channel) channel.onmessage = (event) => (event.data as { type?: string })?.type === "takeover" && handler();
    },
    lifeLock: lifeLock(locks),
  };
}

/**
 * Takes a lock for the worker's whole life: the page queues for it and is granted it exactly when the worker
 * dies (terminated, crashed, its page gone). Its name is told only once it is held: a page that asked for it
 * earlier could be granted it first.
 */
function lifeLock(locks: LockManager): () => Promise<string> {
  const name = `pi-durable-web:worker-life:${crypto.randomUUID()}`;
  const held = new Promise<string>((resolve) => {
    void locks.request(name, () => {
      resolve(name);
      return new Promise<never>(() => {});
    });
  });
  return () => held;
}
