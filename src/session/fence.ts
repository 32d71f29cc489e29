import { type Context, waitFor } from "../base/context.ts";
import { LeaseNotHeld, StaleEpoch } from "../errors.ts";
import type { Batch, LogMark } from "../storage/records.ts";

/**
 * Resolves once the place that could take the lease over holds this place's log up to `position` (it acknowledged
 * it): from then on a takeover recovers from a copy that has it. `LeaseOptions.confirm` (decision 0032).
 */
export type ConfirmPosition = (position: number, context: Context) => Promise<void>;

const CONFIRMED: Promise<void> = Promise.resolve();

/**
 * The lease a place holds, as its session sees it (docs/decisions/0029): the epoch every transaction of this
 * place is stamped with, the log's head, and until when the lease holds on the harness clock. A transaction gets
 * the next position only while the lease holds; once it is lost (expired, handed over, superseded) every later
 * one is refused with the reason, and nothing is written.
 */
export class Fence {
  readonly place: string;
  readonly epoch: number;
  /** Granted with no expiry (a pinned lease, decision 0039), whatever ends it here later. */
  readonly pinned: boolean;
  /** The last position stored under this lease (or before it, at open). */
  #head: number;
  /** Harness-clock time at which this place stops writing; counted from before it asked, so never after the arbiter's. */
  #expiresAt: number;
  #lost: Error | undefined;
  /**
   * Harness-clock time by which this place's page said it is leaving ends the lease here (decision 0113): a renewal
   * never moves the end past it.
   */
  #leavingEnd = Number.POSITIVE_INFINITY;
  /** Set when another place may take over after the expiry: effects wait for it (decision 0032). */
  readonly #confirm: ConfirmPosition | undefined;

  /**
   * `confirm` is given when another place may take over once the lease expires; absent (a pinned lease, or a
   * place whose own copy is the one a takeover recovers from) effects never wait. `resumed`: the epoch of the
   * copy's head again — a pinned lease this place held, reopened once its previous incarnation is gone (decision
   * 0039).
   */
  constructor(
    place: string,
    epoch: number,
    head: LogMark | undefined,
    expiresAt: number,
    confirm?: ConfirmPosition,
    readonly resumed = false,
  ) {
    // An acquire mints a new epoch: one the copy already holds was minted twice (the arbiter lost its record).
    if (head && (epoch < head.epoch || (epoch === head.epoch && !resumed))) throw new StaleEpoch(epoch, head.epoch, `${place}'s own copy`);
    this.place = place;
    this.epoch = epoch;
    this.#head = head?.position ?? 0;
    this.#expiresAt = expiresAt;
    this.pinned = !Number.isFinite(expiresAt);
    this.#confirm = confirm;
  }

  /** True when an effect waits for the other place's acknowledgement before it starts. */
  get confirms(): boolean {
    return this.#confirm !== undefined;
  }

  /**
   * Before an external effect (decision 0032): resolves once everything stored here so far is held where a
   * takeover would recover from — at once when no other place may take over. Rejects with the reason once the
   * lease is lost, and with the context's cancellation.
   */
  confirmed(context: Context): Promise<void> {
    if (this.#lost) return Promise.reject(this.#lost);
    const confirm = this.#confirm;
    if (!confirm || this.#head === 0) return CONFIRMED;
    return waitFor(confirm(this.#head, context), context);
  }

  /** Where the log stands: this epoch and the last position stored. */
  get mark(): LogMark {
    return { epoch: this.epoch, position: this.#head };
  }

  get expiresAt(): number {
    return this.#expiresAt;
  }

  /** Why this place may no longer write, once it may not (undefined while it holds the lease at `now`). */
  lost(now: number): Error | undefined {
    if (this.#lost === undefined && now >= this.#expiresAt) {
      const why =
        this.#expiresAt === this.#leavingEnd
          ? `its page said it is leaving, so its lease of epoch ${this.epoch} ended at ${this.#expiresAt} on the harness clock, before the object's grace could`
          : `its lease of epoch ${this.epoch} expired at ${this.#expiresAt} on the harness clock`;
      this.#lost = new LeaseNotHeld(this.place, why);
    }
    return this.#lost;
  }

  /**
   * This place's page said `lease.leaving` under `epoch` (decision 0101): the object takes the lease over a grace after
   * it heard the word, so this place stops writing by `end` (the word's send time on this clock plus the same grace:
   * never after the object's, decision 0113), whatever a renewal says after. False when `epoch` is not this lease's,
   * and for a pinned lease: the object does not take one over at the word (only the holder's release moves it).
   */
  leaving(epoch: number, end: number): boolean {
    if (epoch !== this.epoch || this.pinned) return false;
    this.#leavingEnd = Math.min(this.#leavingEnd, end);
    this.#expiresAt = Math.min(this.#expiresAt, this.#leavingEnd);
    return true;
  }

  /** Gives `batch` the next position under this epoch; throws why when the lease no longer holds. */
  stamp(batch: Batch, now: number): void {
    const lost = this.lost(now);
    if (lost) throw lost;
    batch.fence = { epoch: this.epoch, position: this.#head + 1 };
  }

  /** The stamped batch was stored: the head moves to it. */
  stored(batch: Batch): void {
    if (batch.fence) this.#head = batch.fence.position;
  }

  /** The arbiter renewed the lease, asked at `askedAt` for `ttlMs`. */
  renewed(askedAt: number, ttlMs: number): void {
    if (this.#lost === undefined) this.#expiresAt = Math.min(Math.max(this.#expiresAt, askedAt + ttlMs), this.#leavingEnd);
  }

  /** From now on nothing is written here, for `reason` (the first reason stays). */
  lose(reason: Error): void {
    this.#lost ??= reason;
  }
}
