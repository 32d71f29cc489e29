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
import type { Clock } from "../../base/clock.ts";
import { databaseLock } from "../ownership.ts";

/**
 * How long `query()` may take, once it has had a turn of the event loop, before Web Locks is taken as unable to say
 * (`unknown`): a query that never settled (a broken stand-in, a browser bug) left every announcement unfollowed, the
 * tab waiting for the lock for good (the review of decision 0141, L1). A browser answers in milliseconds.
 */
export const QUERY_MS = 1_000;

/** One turn of the event loop (a macrotask: every microtask queued before it has run). */
const turn = () => new Promise<void>((resolve) => setTimeout(resolve, 0));

/**
 * `query()`, bounded: its answer, or `undefined` when it failed or did not answer within `QUERY_MS`. The bound's timer
 * is set only when the query has not answered after a turn of the event loop — a query that answers at once (the tests'
 * stand-in, settled in microtasks) never races a timer on the clock, so a test firing the clock's timers cannot turn a
 * check into `unknown` (the flake that kept L1 out before).
 */
async function boundedQuery(locks: LockManager, clock: Clock): Promise<LockManagerSnapshot | undefined> {
  let answered = false;
  const answer = locks.query().then(
    (snapshot) => {
      answered = true;
      return snapshot;
    },
    () => {
      answered = true;
      return undefined;
    },
  );
  await Promise.race([answer, turn()]);
  if (answered) return answer;
  let cancel = () => {};
  const late = new Promise<undefined>((resolve) => (cancel = clock.setTimer(QUERY_MS, () => resolve(undefined))));
  try {
    return await Promise.race([answer, late]);
  } finally {
    cancel();
  }
}

/** The lock a tabs leader holds for its worker's life, named after its id on the database's channel. */
export const leaderMark = (database: string, id: string) => `pi-durable-web:tabs:${database}:leader:${id}`;

/**
 * What Web Locks says of a leader id (and of the life lock an `accepted` names): `genuine`, held by the database's
 * holder; `forged`, that holder holds marks and not this one; `unknown` when it cannot tell — no `query()`, no client
 * ids, no answer in `QUERY_MS`, nobody holds the database, or its holder holds no mark (a leader of a build before 0141, or one still starting).
 */
export type LeaderVerdict = "genuine" | "forged" | "unknown";

/** The names of the locks the database's holder holds, or undefined when Web Locks cannot say who that is. */
async function holderLocks(locks: LockManager, database: string, clock: Clock): Promise<Set<string> | undefined> {
  if (typeof locks.query !== "function") return undefined;
  let held: LockInfo[];
  try {
    const snapshot = await boundedQuery(locks, clock);
    if (!snapshot) return undefined;
    held = snapshot.held ?? [];
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
export async function checkLeader(
  locks: LockManager,
  clock: Clock,
  database: string,
  id: string,
  lifeLock?: string,
): Promise<LeaderVerdict> {
  const names = await holderLocks(locks, database, clock);
  const prefix = leaderMark(database, "");
  if (!names || ![...names].some((name) => name.startsWith(prefix))) return "unknown";
  return names.has(leaderMark(database, id)) && (lifeLock === undefined || names.has(lifeLock)) ? "genuine" : "forged";
}
