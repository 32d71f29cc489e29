/**
 * The `lease` topic at the object's end (object-end.ts, decisions 0029, 0031), platform-neutral: a tab's acquire,
 * renew and release answered from the object's `LeaseBook`, and who may push to the object's copy. The hand-back
 * (`lease.handBack`) drains the object's harness and stays in object-end.ts.
 */
import type { Json } from "../base/json.ts";
import { LeaseNotHeld, NotAuthorized, StaleEpoch } from "../errors.ts";
import type { LeaseBook } from "./arbiter.ts";
import type { PushMessage } from "./wire.ts";

/** What a lease call needs of the object: its book, its own place, and how far its copy's log goes. */
export interface LeaseDesk {
  book: LeaseBook;
  place: string;
  head: number;
}

/**
 * `lease.acquire/renew/release(place, …)` from a tab. This object's own lease is its own to take (at a release or an
 * expiry), never a caller's: `NotAuthorized` for its own place. A release past what this copy holds is refused
 * (`LeaseNotHeld`): no place could take the lease again (a taker's head must reach the release, and this object takes
 * only a release its copy holds), the conversation would be stranded for good.
 */
export async function leaseCall(desk: LeaseDesk, method: string, args: readonly Json[]): Promise<Json> {
  const [place, number, position, heir] = args as [string, number, number, string | undefined];
  if (place === desk.place) throw new NotAuthorized(`lease.${method}`, `the place ${JSON.stringify(place)} is this object's own.`);
  if (method === "acquire") return { ...(await desk.book.acquire(place, number, args[2] as number | undefined)) };
  if (method === "renew") return { ...(await desk.book.renew(place, number)) };
  if (position > desk.head)
    throw new LeaseNotHeld(place, `it releases at log position ${position} and this object's copy holds only up to ${desk.head}`);
  await desk.book.release(place, number, position, heir);
  return null;
}

/**
 * Only the place that holds the lease under the push's epoch may push (or the one handing it over to here); `holding`:
 * this object holds it itself. Otherwise `StaleEpoch` or `LeaseNotHeld`, and nothing is applied.
 */
export function checkPusher(book: LeaseBook, place: string, holding: boolean, push: PushMessage): void {
  const record = book.record;
  if (push.epoch < record.epoch || holding) throw new StaleEpoch(push.epoch, record.epoch, "the object's copy");
  if (push.epoch > record.epoch)
    throw new LeaseNotHeld(push.from, `epoch ${push.epoch} was never granted (the lease is at ${record.epoch})`);
  if (record.holder !== undefined && record.holder !== push.from)
    throw new LeaseNotHeld(push.from, `${record.holder} holds epoch ${record.epoch}`);
  if (record.holder === undefined && record.heir !== undefined && record.heir !== place)
    throw new LeaseNotHeld(push.from, `it was handed over to ${record.heir}`);
}
