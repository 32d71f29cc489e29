/** The lease's holder as the object's own record names it (decision 0057), in a push and in a status (decision 0067). */
import type { HeldBy } from "../host/protocol.ts";
import type { LeaseRecord } from "./arbiter.ts";
import { type LeaseHolder, leaseHolder } from "./wire.ts";

/** The holder a lease record names, `object` when it is `objectPlace` (decision 0057); undefined while it is free. */
export function holderOf(record: Pick<LeaseRecord, "holder">, objectPlace: string): LeaseHolder | undefined {
  return record.holder === undefined ? undefined : { place: record.holder, object: record.holder === objectPlace };
}

/**
 * The holder a lease record names as a status carries it (`heldBy`, decision 0067): only a place of the wire's shape
 * (1–200 characters, what a tab reads in `follow.from`), anything else names no holder.
 */
export function heldByOf(record: Pick<LeaseRecord, "holder">, objectPlace: string): HeldBy | undefined {
  const holder = holderOf(record, objectPlace);
  if (!holder || leaseHolder(holder, "holder") !== undefined) return undefined;
  return { kind: holder.object ? "object" : "tab", place: holder.place };
}
