/**
 * The `lease` topic at the object's end (object-end.ts, decisions 0029, 0031), platform-neutral: a tab's acquire,
 * renew and release answered from the object's `LeaseBook`, who may push to the object's copy, and the hand-back
 * (`lease.handBack`), which drains the object's harness (object-end.ts runs it in its line and moves its state).
 */
import { BACKGROUND_CONTEXT } from "../base/context.ts";
import type { Json } from "../base/json.ts";
import { LeaseNotHeld, NotAuthorized, NotReady, StaleEpoch } from "../errors.ts";
import type { Harness } from "../harness.ts";
import type { LogMark } from "../storage/records.ts";
import type { LeaseBook } from "./arbiter.ts";
import type { PushMessage } from "./wire.ts";

/** What a lease call needs of the object: its book, its own place, and how far its copy's log goes. */
export interface LeaseDesk {
  book: LeaseBook;
  place: string;
  head: number;
}

/**
 * `lease.acquire/renew/release/leaving(place, …)` from a tab. This object's own lease is its own to take (at a release or an
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
    throw new LeaseNotHeld(
      place,
      `it ${method === "leaving" ? "leaves" : "releases"} at log position ${position} and this object's copy holds only up to ${desk.head}`,
    );
  // The holder's page says it is leaving (decision 0101): its lease ends a grace later unless its worker releases first.
  if (method === "leaving") await desk.book.leaving(place, number, position);
  else await desk.book.release(place, number, position, heir);
  return null;
}

/**
 * Only the place that holds the lease under the push's epoch may push (or the one handing it over to here); `holding`:
 * a harness of this object's is open here. Otherwise `StaleEpoch` or `LeaseNotHeld`, and nothing is applied — except
 * for the holder of the current epoch while that harness is still open (decision 0145): an idle object's lease lapsed
 * (0052) and the pusher took it since, so this instance's harness writes nothing more and its alarm ends it. Its copy
 * cannot take the push while that harness holds it: `NotReady` (the pusher's mirror sends it again, and the next
 * instance, which follows the pusher, stores it). Before, `StaleEpoch`: the holder's mirror stopped for good.
 */
export function checkPusher(book: LeaseBook, place: string, holding: boolean, push: PushMessage): void {
  const record = book.record;
  // The object's own place never pushes to it: a push that says so is forged, and keeps its final refusal.
  const superseded = holding && push.epoch === record.epoch && record.holder === push.from && push.from !== place;
  if (push.epoch < record.epoch || (holding && !superseded)) throw new StaleEpoch(push.epoch, record.epoch, "the object's copy");
  if (push.epoch > record.epoch)
    throw new LeaseNotHeld(push.from, `epoch ${push.epoch} was never granted (the lease is at ${record.epoch})`);
  if (record.holder !== undefined && record.holder !== push.from)
    throw new LeaseNotHeld(push.from, `${record.holder} holds epoch ${record.epoch}`);
  if (record.holder === undefined && record.heir !== undefined && record.heir !== place)
    throw new LeaseNotHeld(push.from, `it was handed over to ${record.heir}`);
  if (superseded) throw new NotReady("the object is between its harnesses (its lapsed lease was taken): push again");
}

/**
 * Hands the lease back to `place` (a tab that follows this object, at `head`) from `holder`, the harness that holds it
 * here: it drains (parked, decision 0057: the tab that asked counts no restart for the phases stopped here) at position
 * P and the lease is released there to `place` (`draining` told as the drain begins). `mark` is set when this call handed it back (the caller then follows
 * again); a release already made to `place` is answered again without one. `LeaseNotHeld` when this object does not
 * hold the lease, or the tab's copy is past this object's log (it forked).
 */
export async function handBack(
  desk: LeaseDesk,
  holder: Harness | undefined,
  place: string,
  head: number,
  draining: () => void = () => {},
): Promise<{ epoch: number; position: number; mark?: LogMark }> {
  const record = desk.book.record;
  if (record.holder === undefined && record.heir === place && record.releasedAt !== undefined)
    return { epoch: record.epoch, position: record.releasedAt };
  if (!holder || record.holder !== desk.place)
    throw new LeaseNotHeld(place, `${record.holder ?? "no place"} holds the lease; only this object hands back its own`);
  if (head > desk.head) throw new LeaseNotHeld(place, `its copy (at ${head}) is past this object's log (at ${desk.head}): it forked`);
  draining();
  const mark = await holder.handOver(BACKGROUND_CONTEXT, { park: true });
  await desk.book.release(desk.place, mark.epoch, mark.position, place);
  return { epoch: mark.epoch, position: mark.position, mark };
}
