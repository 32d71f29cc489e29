/**
 * Whether a harness holding the lease at `epoch` may no longer write under it (decision 0143): the lease lapsed while
 * the object was idle (its renewal is parked, object-clock.ts) — `place` still holds the record and its expiry passed
 * at `now` — or another place took it since (a newer epoch). A release (a hand-back in progress) is no lapse: the
 * hand-back ends the instance itself. `epoch` undefined (no harness holds a lease here): never.
 */
export function leaseLapsed(
  epoch: number | undefined,
  record: { readonly holder?: string; readonly epoch: number; readonly expiresAt?: number },
  place: string,
  now: number,
): boolean {
  if (epoch === undefined) return false;
  if (record.epoch !== epoch) return true;
  const at = record.expiresAt;
  return record.holder === place && typeof at === "number" && Number.isFinite(at) && now >= at;
}
