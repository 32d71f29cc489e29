/**
 * How often an object takes a new snapshot for its callers (decision 0053), platform-neutral. A snapshot is the
 * object's whole copy read in one transaction and held in memory: a caller asking for new ones in a loop must not
 * pin the object. Each caller (the place it asks for, which the object's door vouched for) has a bucket of
 * `burst` takes that refills one every `everyMs` on the harness clock, and the object as a whole one more (so many
 * callers together cannot either). A refused take reads nothing and is `SnapshotUnavailable("busy")`, retryable:
 * ask again later. Parts of a snapshot already taken cost no read and are not counted.
 */
import type { Clock } from "../base/clock.ts";
import { SnapshotUnavailable } from "../errors.ts";

export interface SnapshotLimits {
  /** New snapshots one caller may take at once. Default 3. */
  burst?: number;
  /** A caller's bucket gains one take every this many ms. Default 10,000. */
  everyMs?: number;
  /** New snapshots all callers together may take at once. Default 6. */
  totalBurst?: number;
  /** The object's bucket gains one take every this many ms. Default 2,000. */
  totalEveryMs?: number;
}

/** Callers whose buckets are remembered; the one heard longest ago is forgotten first (its bucket starts full). */
const REMEMBERED_CALLERS = 1_024;

interface Bucket {
  tokens: number;
  at: number;
}

export class SnapshotLimit {
  readonly #clock: Clock;
  readonly #burst: number;
  readonly #everyMs: number;
  readonly #total: Bucket;
  readonly #totalBurst: number;
  readonly #totalEveryMs: number;
  readonly #callers = new Map<string, Bucket>();

  constructor(clock: Clock, limits: SnapshotLimits = {}) {
    this.#clock = clock;
    this.#burst = limits.burst ?? 3;
    this.#everyMs = limits.everyMs ?? 10_000;
    this.#totalBurst = limits.totalBurst ?? 6;
    this.#totalEveryMs = limits.totalEveryMs ?? 2_000;
    this.#total = { tokens: this.#totalBurst, at: clock.now() };
  }

  /** Counts one new snapshot for `caller`, or throws `SnapshotUnavailable("busy")` and counts nothing. */
  take(caller: string): void {
    const now = this.#clock.now();
    const mine = this.#callers.get(caller) ?? { tokens: this.#burst, at: now };
    refill(mine, now, this.#burst, this.#everyMs);
    refill(this.#total, now, this.#totalBurst, this.#totalEveryMs);
    if (mine.tokens < 1)
      throw new SnapshotUnavailable("busy", `${caller} asked for new snapshots faster than one every ${this.#everyMs} ms`);
    if (this.#total.tokens < 1)
      throw new SnapshotUnavailable("busy", `the object serves at most one new snapshot every ${this.#totalEveryMs} ms`);
    mine.tokens -= 1;
    this.#total.tokens -= 1;
    this.#callers.delete(caller); // re-inserted: the map's order is the order callers were last heard
    this.#callers.set(caller, mine);
    if (this.#callers.size > REMEMBERED_CALLERS) this.#callers.delete(this.#callers.keys().next().value!);
  }
}

/** Adds the tokens `everyMs` earned since the bucket was last refilled, up to `burst` (a clock moved back adds none). */
function refill(bucket: Bucket, now: number, burst: number, everyMs: number): void {
  if (now <= bucket.at) return;
  const earned = Math.floor((now - bucket.at) / everyMs);
  if (earned === 0) return;
  bucket.tokens = Math.min(burst, bucket.tokens + earned);
  bucket.at = bucket.tokens === burst ? now : bucket.at + earned * everyMs;
}
