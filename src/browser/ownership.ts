/// <reference lib="webworker" />
/**
 * One owner per database across the tabs of an origin, with Web Locks: the worker holds a lock named after
 * the database while it has it open, and every other tab's worker queues for it (status `waiting-for-lock`;
 * its page is a follower meanwhile, ./tabs/). "Take over here" steals the lock (`steal: true`): the asking
 * worker is granted it ahead of the queue, and the owner, whose lock request rejects, closes cleanly (the
 * OPFS files stay its own until it has, so nothing is written twice; the new owner's open waits for them).
 * A second lock, held for the worker's whole life, lets a page tell a dead worker from a busy one.
 */
import type { Ownership } from "../host/ownership.ts";

/** The Web Lock the worker that has `database` open holds (the tabs check a leader's announcement against it). */
export const databaseLock = (database: string) => `pi-durable-web:${database}`;

/** Ownership by Web Locks, or undefined where there are none (old browsers, Node): then the app keeps one owner. */
export function webLocksOwnership(database: string): Ownership | undefined {
  const locks = (globalThis.navigator as Navigator | undefined)?.locks;
  if (!locks) return undefined;
  const lockName = databaseLock(database);
  let cancelled = false;
  let onTakeover: () => void = () => {};
  /** The wait in progress: its queued request, and how to jump the queue instead. */
  let waitingNow: { stop: AbortController; steal(): void } | undefined;
  return {
    acquire: (waiting) =>
      new Promise((resolve, reject) => {
        let granted = false;
        // Held until released: the lock callback's promise settles when the database is let go.
        const hold = () =>
          new Promise<void>((release) => {
            granted = true;
            waitingNow = undefined;
            resolve(release);
          });
        // A held lock whose request rejects was stolen: another tab took the database over.
        const lost = (error: unknown) => {
          if (granted) onTakeover();
          else if (cancelled) resolve(undefined);
          else reject(error);
        };
        if (cancelled) return resolve(undefined);
        void locks
          .request(lockName, { ifAvailable: true }, async (lock) => {
            if (lock) return hold();
            waiting();
            const stop = new AbortController();
            let stealing = false;
            waitingNow = {
              stop,
              steal() {
                stealing = true;
                stop.abort();
                locks.request(lockName, { steal: true }, hold).catch(lost);
              },
            };
            locks.request(lockName, { signal: stop.signal }, hold).catch((error: unknown) => stealing || lost(error));
          })
          .catch(lost);
      }),
    cancel() {
      cancelled = true;
      waitingNow?.stop.abort();
      waitingNow = undefined;
    },
    requestTakeover: () => waitingNow?.steal(),
    onTakeoverRequest(handler) {
      onTakeover = handler;
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
