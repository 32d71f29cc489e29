/// <reference lib="webworker" />
/**
 * Who leads, asked of Web Locks rather than of the channel (decision 0141). Everything posted on the tabs' channels is
 * in clear and anyone of the origin may post there: a `leader` announcement or an `accepted` says nothing by itself.
 * Web Locks does: the browser alone grants a lock, and `query()` names the client that holds each. The worker that has
 * the database open holds its lock (`databaseLock`, ../ownership.ts) and, from the start of `serveTabs`, a lock named
 * after its leader id (`leaderMark`), before it announces that id. An id is the leader's when the database's lock and
 * that id's mark are held by one client; a forger can hold a mark of its own, never in the client that holds the
 * database.
 */
import { databaseLock } from "../ownership.ts";

/** The lock a tabs leader holds for its worker's life, named after its id on the database's channel. */
export const leaderMark = (database: string, id: string) => `pi-durable-web:tabs:${database}:leader:${id}`;

/**
 * What Web Locks says of a leader id (and of the life lock an `accepted` names): `genuine`, held by the database's
 * holder; `forged`, that holder holds marks and not this one; `unknown` when it cannot tell — no `query()`, no client
 * ids, nobody holds the database, or its holder holds no mark (a leader of a build before 0141, or one still starting).
 */
export type LeaderVerdict = "genuine" | "forged" | "unknown";

/** The names of the locks the database's holder holds, or undefined when Web Locks cannot say who that is. */
async function holderLocks(locks: LockManager, database: string): Promise<Set<string> | undefined> {
  if (typeof locks.query !== "function") return undefined;
  let held: LockInfo[];
  try {
    held = (await locks.query()).held ?? [];
  } catch {
    return undefined;
  }
  const holder = held.find((lock) => lock.name === databaseLock(database))?.clientId;
  if (!holder) return undefined;
  return new Set(held.filter((lock) => lock.clientId === holder && typeof lock.name === "string").map((lock) => lock.name!));
}

/**
 * Checks the leader `id` against Web Locks; with `lifeLock`, that the database's holder holds that lock too (an
 * `accepted`'s: a forger's names a lock it frees when it likes, and the link would take that as the leader's death).
 */
export async function checkLeader(locks: LockManager, database: string, id: string, lifeLock?: string): Promise<LeaderVerdict> {
  const names = await holderLocks(locks, database);
  const prefix = leaderMark(database, "");
  if (!names || ![...names].some((name) => name.startsWith(prefix))) return "unknown";
  return names.has(leaderMark(database, id)) && (lifeLock === undefined || names.has(lifeLock)) ? "genuine" : "forged";
}
