import type { Clock } from "../base/clock.ts";
import { LeaseNotHeld, StaleEpoch } from "../errors.ts";
import type { LogMark } from "../storage/records.ts";

/** What an arbiter grants: the epoch to write under, and for how long on the arbiter's clock (Infinity: pinned). */
export interface LeaseGrant {
  epoch: number;
  ttlMs: number;
}

/**
 * The one place that mints lease epochs for a log (docs/decisions/0029; a conversation's Durable Object is the
 * natural one). Every call is judged on the arbiter's own clock and record, so two places can never both be
 * granted the same epoch, and an epoch is never granted twice.
 */
export interface LeaseArbiter {
  /**
   * Grants `place`, which holds the log up to position `head`, the next epoch: when the lease is free (released at
   * a position no later than `head`), expired, or `place`'s own (a restarted place takes a new epoch, so its dead
   * incarnation's commits are stale). Otherwise `LeaseNotHeld`, saying who holds it or what `place` lacks.
   * `epoch`: the epoch that wrote `head` in `place`'s log, so a log that left the arbiter's history (a fork) is
   * refused too (decision 0039).
   */
  acquire(place: string, head: number, epoch?: number): Promise<LeaseGrant>;
  /** Extends `place`'s lease of `epoch`; `StaleEpoch` or `LeaseNotHeld` when it is no longer its own. */
  renew(place: string, epoch: number): Promise<LeaseGrant>;
  /**
   * `place` gives up its lease of `epoch` having pushed everything up to `position` (to `heir`, when it hands the
   * lease to that place: then only the heir may take it): the next holder must hold the log up to there. Sending it
   * again is harmless; `StaleEpoch` when `epoch` is not the current one.
   */
  release(place: string, epoch: number, position: number, heir?: string): Promise<void>;
}

/** What an arbiter keeps durably: the last epoch minted, its holder and until when, or where it was released. */
export interface LeaseRecord {
  epoch: number;
  holder?: string;
  /**
   * On the arbiter's clock: when the holder's lease ends, or an heir's reservation (one lease's time; under a pinned
   * lease, `DEFAULT_LEASE_TTL_MS`).
   */
  expiresAt?: number;
  /** The position the last holder released at (the lease is free). */
  releasedAt?: number;
  /** The place it was released to: only that place may take it (until `expiresAt`, then any place may). */
  heir?: string;
  /**
   * The holder's page said it is leaving (decision 0101) at this position, which the arbiter's copy held: its lease
   * ends a grace after that (`expiresAt`), and each renewal until its release gives it one grace more, no longer.
   */
  leaving?: number;
}

/**
 * The arbiter's rules over a record it stores itself: `load`/`save` must be atomic (the object keeps it in its own
 * storage; tests in memory). Calls are serialized by the caller's single thread: each reads, decides and saves
 * without yielding.
 */
export class LeaseBook implements LeaseArbiter {
  readonly #clock: Pick<Clock, "now">;
  readonly #ttlMs: number;
  readonly #load: () => LeaseRecord;
  readonly #save: (record: LeaseRecord) => void;
  readonly #copyHead: (() => number | LogMark) | undefined;
  readonly #firstEpoch: (() => number) | undefined;
  readonly #graceMs: number;

  /**
   * `copyHead`: where the log of the copy kept beside the arbiter stands (the object's copy, decision 0039). A place
   * whose head is behind it lacks part of the history: were it to write, it would write at positions the copy already
   * holds. It is refused the lease however it stands (free, expired or its own) until it caught up. With the copy's
   * head as a mark (its epoch too) and the taker's head epoch given, a taker at or past the copy's head whose log
   * left its history is refused as well: at the copy's head under another epoch, or past it under an older one
   * (it wrote that position under an epoch the copy superseded: a fork, decision 0032).
   */
  constructor(options: {
    clock: Pick<Clock, "now">;
    ttlMs: number;
    load(): LeaseRecord;
    save(record: LeaseRecord): void;
    copyHead?(): number | LogMark;
    /**
     * The first epoch this book mints, when its record is new (decision 0074). Default: 1. A Durable Object passes a
     * random one (`randomFirstEpoch`): an object whose storage was reset mints again from a new base, so its history
     * and the one before it never share an epoch — a tab of the old history finds a fork against the new one instead
     * of reading it as its own continuation (both would otherwise begin at epoch 1).
     */
    firstEpoch?(): number;
    /**
     * Told after a save that names another holder than the record before it (a grant to another place, a release, an
     * expired lease taken; not a renewal): the object's pages are told the new holder at once (decision 0075).
     */
    onHolder?(holder: string | undefined): void;
    /** How long a holder whose page said it is leaving keeps its lease for its own release (decision 0101). */
    leavingGraceMs?: number;
  }) {
    this.#clock = options.clock;
    this.#ttlMs = options.ttlMs;
    this.#load = options.load;
    const save = options.save;
    const onHolder = options.onHolder;
    this.#save = onHolder
      ? (record) => {
          const before = this.#load().holder;
          save(record);
          if (record.holder !== before) onHolder(record.holder);
        }
      : save;
    this.#copyHead = options.copyHead;
    this.#firstEpoch = options.firstEpoch;
    this.#graceMs = options.leavingGraceMs ?? LEAVING_GRACE_MS;
  }

  /** The record as it stands (for tests and diagnostics). */
  get record(): LeaseRecord {
    return { ...this.#load() };
  }

  async acquire(place: string, head: number, headEpoch?: number): Promise<LeaseGrant> {
    const record = this.#load();
    const now = this.#clock.now();
    const held = record.holder !== undefined && record.holder !== place && now < (record.expiresAt ?? Infinity);
    if (held) throw new LeaseNotHeld(place, `${record.holder} holds it, epoch ${record.epoch}, until ${record.expiresAt}`);
    // A hand-over reserves the lease for its heir for one lease's time: an heir that never comes (it crashed after
    // asking for the lease back, decision 0038) does not strand it.
    const reserved = record.heir !== undefined && record.heir !== place && now < (record.expiresAt ?? Infinity);
    if (record.holder === undefined && reserved) {
      throw new LeaseNotHeld(place, `it was handed over to ${record.heir} at log position ${record.releasedAt}`);
    }
    if (record.holder === undefined && record.releasedAt !== undefined && head < record.releasedAt) {
      throw new LeaseNotHeld(place, `it was released at log position ${record.releasedAt} and this place holds only up to ${head}`);
    }
    const copyMark = this.#copyHead?.() ?? 0;
    const copy = typeof copyMark === "number" ? copyMark : copyMark.position;
    if (head < copy) {
      throw new LeaseNotHeld(
        place,
        `this place holds the log only up to position ${head} and the arbiter's copy up to ${copy}: it must follow that history (or rebuild from its snapshot) before it takes the lease`,
      );
    }
    const copyEpoch = typeof copyMark === "number" || copy === 0 || copyMark.epoch < 1 ? undefined : copyMark.epoch;
    if (headEpoch !== undefined && copyEpoch !== undefined && (head === copy ? headEpoch !== copyEpoch : headEpoch < copyEpoch)) {
      throw new LeaseNotHeld(
        place,
        `its log (epoch ${headEpoch} at position ${head}) left the arbiter's copy's history (epoch ${copyEpoch} at ${copy}): it must keep its fork and rebuild from that history before it takes the lease`,
      );
    }
    // Every epoch of this book's history is one it minted, so none is past its record: a head written under a later
    // one was written in another history (this book's storage was reset since, decision 0074).
    if (headEpoch !== undefined && record.epoch > 0 && headEpoch > record.epoch) {
      throw new LeaseNotHeld(
        place,
        `its log was written under epoch ${headEpoch}, which this arbiter never minted (its last is ${record.epoch}): it belongs to another history, and must keep its fork and rebuild from this one before it takes the lease`,
      );
    }
    const epoch = record.epoch === 0 && this.#firstEpoch ? firstMinted(this.#firstEpoch(), headEpoch) : record.epoch + 1;
    this.#save({ epoch, holder: place, expiresAt: now + this.#ttlMs });
    return { epoch, ttlMs: this.#ttlMs };
  }

  async renew(place: string, epoch: number): Promise<LeaseGrant> {
    const record = this.#load();
    if (epoch !== record.epoch) throw new StaleEpoch(epoch, record.epoch, "the lease's arbiter");
    const now = this.#clock.now();
    if (record.holder !== place || now >= (record.expiresAt ?? Infinity))
      throw new LeaseNotHeld(place, `its lease of epoch ${epoch} ended`);
    // A leaving holder still heard from (its worker pushing the rest) is given one grace more, never a whole lease.
    const ttlMs = record.leaving === undefined ? this.#ttlMs : Math.min(this.#ttlMs, this.#graceMs);
    this.#save({ ...record, expiresAt: now + ttlMs });
    return { epoch, ttlMs };
  }

  /**
   * `place`'s page says it is leaving (decision 0101), its object's copy holding the log up to `position`: the lease
   * stays `place`'s for one grace (`leavingGraceMs`, on this book's clock) — its worker's own release, at any position
   * the copy holds by then, wins within it — and then lapses, and the copy's place takes it over as after a crash, from
   * what the copy holds (at least `position`). It only ever shortens the lease: said again, the grace does not move;
   * a pinned lease (no expiry) is not shortened at all (decision 0113, after review).
   * `StaleEpoch` when `epoch` is not the current one, `LeaseNotHeld` when `place` does not hold it (or the copy lacks
   * `position`); either way nothing changes.
   */
  async leaving(place: string, epoch: number, position: number): Promise<void> {
    const record = this.#load();
    if (epoch !== record.epoch) throw new StaleEpoch(epoch, record.epoch, "the lease's arbiter");
    const now = this.#clock.now();
    if (record.holder !== place || now >= (record.expiresAt ?? Infinity))
      throw new LeaseNotHeld(place, `epoch ${epoch} is not its own (held by ${record.holder ?? "no place"})`);
    const copyMark = this.#copyHead?.();
    const copy = copyMark === undefined ? undefined : typeof copyMark === "number" ? copyMark : copyMark.position;
    if (copy !== undefined && position > copy)
      throw new LeaseNotHeld(place, `it leaves at log position ${position} and the arbiter's copy holds only up to ${copy}`);
    // A pinned lease (decision 0039) moves only by its holder's own release, which carries its position: never by the
    // page's word, since its effects never waited for this copy's acknowledgement (decision 0113, after review).
    if (!Number.isFinite(record.expiresAt ?? Infinity)) return;
    const end = Math.min(record.expiresAt ?? Infinity, now + this.#graceMs);
    if (record.leaving !== undefined && end === record.expiresAt) return; // the same leaving again
    this.#save({ ...record, expiresAt: end, leaving: Math.max(position, record.leaving ?? 0) });
  }

  async release(place: string, epoch: number, position: number, heir?: string): Promise<void> {
    const record = this.#load();
    if (epoch !== record.epoch) throw new StaleEpoch(epoch, record.epoch, "the lease's arbiter");
    if (record.holder === undefined && record.releasedAt === position) return; // the same release again
    if (record.holder !== place) throw new LeaseNotHeld(place, `epoch ${epoch} is not its own`);
    const now = this.#clock.now();
    // A pinned lease keeps its holder for ever, but a reservation for an heir that has not come yet must end: an
    // heir that never comes (its tab crashed after asking for the lease back) would strand the lease for good.
    const reserved = Number.isFinite(this.#ttlMs) ? this.#ttlMs : DEFAULT_LEASE_TTL_MS;
    this.#save(heir === undefined ? { epoch, releasedAt: position } : { epoch, releasedAt: position, heir, expiresAt: now + reserved });
  }
}

/** The largest first epoch `randomFirstEpoch` picks: 2^40, leaving 2^53 − 2^40 epochs to mint after it. */
export const MAX_FIRST_EPOCH = 2 ** 40;

/**
 * A first epoch drawn from `random` (uniform in [0, 1), e.g. from the platform's CSPRNG) in [1, MAX_FIRST_EPOCH]:
 * two histories begun apart share their epochs with a chance of about one in 2^40 per pair.
 */
export function randomFirstEpoch(random: () => number): number {
  const drawn = Math.floor(random() * MAX_FIRST_EPOCH) + 1;
  return Number.isSafeInteger(drawn) && drawn >= 1 && drawn <= MAX_FIRST_EPOCH ? drawn : 1;
}

/**
 * The first epoch a new record mints: the one drawn, or past the taker's head epoch when its log is older than this
 * book (a place that wrote alone before it met its arbiter): a log's epochs only grow.
 */
function firstMinted(drawn: number, headEpoch: number | undefined): number {
  const first = Number.isSafeInteger(drawn) && drawn >= 1 && drawn <= MAX_FIRST_EPOCH ? drawn : 1;
  return headEpoch !== undefined && headEpoch >= first ? headEpoch + 1 : first;
}

/** An arbiter whose record lives in memory (for tests, and for both places of one process). */
export function memoryArbiter(options: {
  clock: Pick<Clock, "now">;
  ttlMs?: number;
  record?: LeaseRecord;
  copyHead?(): number | LogMark;
  firstEpoch?(): number;
  leavingGraceMs?: number;
}): LeaseBook {
  let record: LeaseRecord = options.record ?? { epoch: 0 };
  return new LeaseBook({
    clock: options.clock,
    ...(options.copyHead ? { copyHead: options.copyHead } : {}),
    ...(options.firstEpoch ? { firstEpoch: options.firstEpoch } : {}),
    ...(options.leavingGraceMs === undefined ? {} : { leavingGraceMs: options.leavingGraceMs }),
    ttlMs: options.ttlMs ?? DEFAULT_LEASE_TTL_MS,
    load: () => record,
    save: (next) => {
      record = next;
    },
  });
}

/**
 * How long a holder whose page said it is leaving keeps the lease for its worker's own release (decision 0101): 1 s
 * on the arbiter's clock. A worker that gets its task after `pagehide` sends the rest and the release within
 * milliseconds (decision 0035); one that does not never will.
 */
export const LEAVING_GRACE_MS = 1_000;

/** How long a lease lasts unless renewed: 30 s on the arbiter's clock (renewed every third of it). */
export const DEFAULT_LEASE_TTL_MS = 30_000;
