/**
 * The lease as the object's own record tells it: its holder (decision 0057) in a push and in a status (decision 0067),
 * and when another place's lease expires (for the object's alarm).
 */
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

/**
 * When the lease another place holds (or was released to) expires, if it does: a pinned lease never does (its
 * `expiresAt` is Infinity, or null once it went through JSON), and the object's own is not its alarm's to watch.
 */
export function otherExpiry(record: Pick<LeaseRecord, "holder" | "heir" | "expiresAt">, objectPlace: string): number | undefined {
  const other = record.holder ?? record.heir;
  const at = record.expiresAt;
  return other !== undefined && other !== objectPlace && typeof at === "number" && Number.isFinite(at) ? at : undefined;
}
