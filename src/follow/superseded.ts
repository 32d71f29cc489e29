/**
 * An object harness whose lease another place took (decision 0149): an idle object's lease lapsed (its renewal let
 * pass, decision 0052) and a tab was granted it under a newer epoch. That harness writes nothing more (its fence
 * expired), but while it is open the object's copy cannot take the new holder's pushes: they are answered `NotReady`
 * (decision 0145). Only the instance's end lets the next one follow the new holder and store them — so the object's
 * end tells its platform (`ObjectEndOptions.onSuperseded`) once, as soon as it knows, rather than leave that to a
 * platform's alarm (Cloudflare's) that another host does not have.
 */
import { safely } from "../base/safely.ts";
import type { Harness } from "../harness.ts";
import type { LeaseRecord } from "./arbiter.ts";

/**
 * Whether `holder` (the writable harness open here, if any) holds an epoch the lease's record has moved past: another
 * place was granted the lease since. Not while the harness is still opening (it holds no epoch yet: decision 0149's
 * takeover case, where the open ends read-only and the object follows on) or after a hand-back (no holder here).
 */
export function supersededHere(holder: Harness | undefined, record: Pick<LeaseRecord, "epoch">): boolean {
  const epoch = holder?.lease?.epoch;
  return epoch !== undefined && record.epoch !== epoch;
}

/** Tells `superseded` once, the first time `check` finds the harness open here superseded. */
export class Supersession {
  #told = false;
  readonly #superseded: (() => void) | undefined;

  constructor(superseded?: () => void) {
    this.#superseded = superseded;
  }

  /** After a lease call or a push: tells the platform once if `holder` is superseded by `record`. */
  check(holder: Harness | undefined, record: Pick<LeaseRecord, "epoch">): void {
    if (this.#told || !supersededHere(holder, record)) return;
    this.#told = true;
    // The platform's failure to end its instance changes no caller's answer (and it is not told again).
    if (this.#superseded) safely(this.#superseded);
  }
}
