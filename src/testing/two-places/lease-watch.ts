/**
 * The two-place sweep's lease book (sweep.ts), in memory, watched for decision 0101's path: the object taking the
 * lease because the tab's page said it is leaving, with no release from its worker.
 */
import type { Clock } from "../../base/clock.ts";
import { LeaseBook, type LeaseRecord } from "../../follow/arbiter.ts";
import type { HandOverMessage } from "../../follow/handover.ts";

/** A memory lease book; `takenAtLeaving()` says whether the page's word alone handed the lease to the object. */
export function watchedLeaseBook(clock: Pick<Clock, "now">, ttlMs: number): { book: LeaseBook; takenAtLeaving(): boolean } {
  let record: LeaseRecord = { epoch: 0 };
  let taken = false;
  /** When the tab's lease would have ended had its page said nothing (its last grant or renewal before the leaving). */
  let wholeLeaseEnds = Number.NEGATIVE_INFINITY;
  const book = new LeaseBook({
    clock,
    ttlMs,
    load: () => record,
    save: (next) => {
      if (next.holder === "tab" && next.leaving === undefined) wholeLeaseEnds = next.expiresAt ?? Number.POSITIVE_INFINITY;
      // The object takes the lease of a holder whose page said it is leaving, whose worker never released it (a
      // release writes a record without a holder first), before that holder's whole lease would have ended.
      if (record.leaving !== undefined && record.holder === "tab" && next.holder === "object" && clock.now() < wholeLeaseEnds) taken = true;
      record = next;
    },
  });
  return { book, takenAtLeaving: () => taken };
}

/** A frame of the page's `lease.leaving` (FollowingTab.sayLeaving names its ids so): on the page's own socket. */
export function isPageLeaving(message: HandOverMessage | string): boolean {
  return typeof message === "string" && message.includes('"id":"page-leaving-');
}
