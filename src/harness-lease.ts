import type { Clock } from "./base/clock.ts";
import { LeaseNotHeld, NotAuthorized, StaleEpoch } from "./errors.ts";
import type { LeaseOptions } from "./harness-types.ts";
import { Fence } from "./session/fence.ts";
import type { LogMark, PinnedLease } from "./storage/records.ts";
import type { Storage } from "./storage/storage.ts";

/**
 * How a harness takes its lease at open and keeps it while it runs (decisions 0029, 0032, 0039): the arbiter asked
 * knowing the log's stored head, a pinned lease resumed offline, renewals every third of the lease's time on the
 * harness clock. Apart from `harness.ts` because it is one protocol with its arbiter, and runs at open and on the
 * renewal timer, never on a step; what the harness does once the lease is lost stays in `harness.ts`.
 */

/** How long a resumed place waits before it tells its arbiter again, after it could not reach it. */
const RESUME_RETRY_MS = 1_000;

/** Takes the lease at open (`Session.open`'s `lease`), and remembers what the harness needs to keep it. */
export class LeaseTaking {
  /** The granted lease's time to live: `Infinity` when pinned or resumed (nothing to renew). */
  ttlMs = Infinity;
  /** The place wrote on under its pinned epoch without asking the arbiter: it tells it once reachable. */
  resumed = false;
  readonly #storage: Storage;
  readonly #lease: LeaseOptions;
  readonly #clock: Clock;

  constructor(storage: Storage, lease: LeaseOptions, clock: Clock) {
    this.#storage = storage;
    this.#lease = lease;
    this.#clock = clock;
  }

  /** A fence to write under, knowing the log's stored head; undefined when this place may only read. */
  async take(head: LogMark | undefined, pinned: PinnedLease | undefined): Promise<Fence | undefined> {
    const lease = this.#lease;
    const storage = this.#storage;
    const askedAt = this.#clock.now();
    // A pinned lease this place holds, nothing written since under another epoch: no one else may take it, and
    // its previous incarnation is gone (one writable harness per storage; in a browser the worker's Web Lock),
    // so it writes on at once — offline too — and tells its arbiter once reachable (decision 0039).
    if (lease.resumePinned && pinned?.place === lease.place && head?.epoch === pinned.epoch) {
      this.resumed = true;
      return new Fence(lease.place, pinned.epoch, head, Infinity, undefined, true);
    }
    try {
      const grant = await lease.arbiter.acquire(lease.place, head?.position ?? 0, head && head.position > 0 ? head.epoch : undefined);
      this.ttlMs = grant.ttlMs;
      const pins = !Number.isFinite(grant.ttlMs);
      if (lease.resumePinned && (pins || pinned))
        await storage.rememberLease?.(pins ? { place: lease.place, epoch: grant.epoch } : undefined);
      // Pinned (no expiry): no other place may take over, so effects do not wait for it.
      const confirm = Number.isFinite(grant.ttlMs) ? lease.confirm : undefined;
      return new Fence(lease.place, grant.epoch, head, askedAt + grant.ttlMs, confirm);
    } catch (error) {
      // Another place writes, or this caller may not write here (the arbiter's door refused it: a device that
      // may only watch): this one reads.
      if (error instanceof LeaseNotHeld || error instanceof NotAuthorized) return undefined;
      throw error;
    }
  }
}

/**
 * Keeps a lease that expires: renews it every third of its time on the harness clock until `stopped()`. Refused, or
 * expired while the arbiter is unreachable, the lease is lost (`lose`). Returns what cancels the renewal armed now.
 */
export function renewLease(
  lease: LeaseOptions,
  fence: Fence,
  ttlMs: number,
  clock: Clock,
  stopped: () => boolean,
  lose: (error: Error) => void,
): () => void {
  let cancel: (() => void) | undefined;
  const arm = () => {
    if (stopped()) return;
    cancel = clock.setTimer(
      ttlMs / 3,
      () => {
        const askedAt = clock.now();
        lease.arbiter.renew(lease.place, fence.epoch).then(
          (grant) => {
            fence.renewed(askedAt, grant.ttlMs);
            arm();
          },
          (error: unknown) => {
            if (error instanceof LeaseNotHeld || error instanceof StaleEpoch) return lose(error);
            // Unreachable: try again while the lease holds. Once it expired the place stops now, not at its next
            // commit: its effects may be waiting for an acknowledgement that cannot come (decision 0032).
            const expired = fence.lost(clock.now());
            if (expired) lose(expired);
            else arm();
          },
        );
      },
      "lease-renewal",
    );
  };
  arm();
  return () => cancel?.();
}

/**
 * Tells the arbiter that this place writes on under its pinned epoch (decision 0039): a renewal, asked until it is
 * answered. Refused — the lease was released or taken meanwhile (the app moved it) — the place stops as a crash stops.
 */
export function confirmResumed(
  lease: LeaseOptions,
  epoch: number,
  clock: Clock,
  stopped: () => boolean,
  lose: (error: Error) => void,
): void {
  const ask = () => {
    if (stopped()) return;
    lease.arbiter.renew(lease.place, epoch).then(
      () => {},
      (error: unknown) => {
        if (error instanceof LeaseNotHeld || error instanceof StaleEpoch) return lose(error);
        clock.setTimer(RESUME_RETRY_MS, ask); // unreachable: offline, or the call timed out
      },
    );
  };
  ask();
}

/** The harness's lease timers: the renewal's and the page's word's (decision 0113), each cancelled on close. */
export interface LeaseTimers {
  renewal?: () => void;
  leaving?: () => void;
}

export function cancelTimers(timers: LeaseTimers): void {
  timers.renewal?.();
  timers.leaving?.();
  timers.renewal = timers.leaving = undefined;
}

/**
 * The lease ends here by `end` (this place's page said it is leaving, decision 0113): `fence` stops stamping then, and
 * the place is told it lost the lease at `end` (at once when it passed) rather than at its next commit — a phase that
 * would print without committing first stops too. One timer at a time (`timers.leaving`, replaced by a later word);
 * one that fires while the clock still reads before the end (a wall clock stepped back) arms again. False when
 * `epoch` is not the fence's, or the lease is pinned (the object does not take a pinned lease at the page's word).
 */
export function leaveBy(
  fence: Fence,
  epoch: number,
  end: number,
  clock: Clock,
  stopped: () => boolean,
  lose: (error: Error) => void,
  timers: LeaseTimers,
): boolean {
  if (!fence.leaving(epoch, end)) return false;
  timers.leaving?.();
  timers.leaving = undefined;
  const check = () => {
    timers.leaving = undefined;
    if (stopped()) return;
    const now = clock.now();
    const lost = fence.lost(now);
    if (lost) lose(lost);
    else timers.leaving = clock.setTimer(fence.expiresAt - now, check);
  };
  check();
  return true;
}
