/**
 * How often an object serves snapshots to its callers (decisions 0053, 0058), platform-neutral. A snapshot is the
 * object's whole copy read in one transaction and held in memory, then sent part by part (each under the link's
 * 1 MB frame): a caller asking in a loop must not pin the object, nor make it send its copy over and over.
 *
 * Two limits, each a bucket per caller (the place it asks for, which the object's door vouched for) and one for the
 * object as a whole (so many callers together cannot either), refilled on the harness clock:
 * - **takes**: new snapshots (a read of the whole copy): 3 per caller, one more every 10 s; 6 in all, one every 2 s.
 * - **parts**: parts of a snapshot already taken: per caller as many as two fetches of the largest snapshot the object
 *   serves (`SnapshotServer`, `snapshotParts`: 102 on a Durable Object, whose copy is at most 16 MiB in 51 parts of
 *   about a third of a megabyte; 404 elsewhere, 64 MiB in 202), one more every second; four such fetches in all, one
 *   more every 200 ms — past the bursts about a third of a megabyte a second per caller and 1.7 MB a second in all.
 *   The first part comes with its take and counts there. The object keeps its last parts (one whole fetch's worth, half
 *   a caller's burst) for callers that have drawn fewer than that from their own bucket lately (decision 0075):
 *   callers that drain the object together cannot starve a new device, which can still read one whole snapshot.
 * A refused call is `SnapshotUnavailable("busy")`, retryable: ask again later. It reads nothing and counts nothing.
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
  /** Parts of snapshots already taken one caller may read at once. Default 64 (`SnapshotServer`: two whole fetches). */
  partBurst?: number;
  /** A caller's parts bucket gains one every this many ms. Default 1,000. */
  partEveryMs?: number;
  /** Parts all callers together may read at once. Default 256 (`SnapshotServer`: four whole fetches). */
  totalPartBurst?: number;
  /** The object's parts bucket gains one every this many ms. Default 200. */
  totalPartEveryMs?: number;
  /**
   * The object's last parts, kept for callers that have drawn fewer than this many from their own bucket lately (a new
   * device): one that has drawn more is refused them. Default half of `partBurst` (rounded up), at most
   * `totalPartBurst − partBurst`; 0 keeps none.
   */
  partReserve?: number;
}

/** Callers whose buckets are remembered; the one heard longest ago is forgotten first (its bucket starts full). */
const REMEMBERED_CALLERS = 1_024;

interface Bucket {
  tokens: number;
  at: number;
}

/** A bucket per caller and one for all of them: `take(caller)` counts one in both, or refuses and counts nothing. */
class Buckets {
  readonly #clock: Clock;
  readonly #burst: number;
  readonly #everyMs: number;
  readonly #total: Bucket;
  readonly #totalBurst: number;
  readonly #totalEveryMs: number;
  readonly #callers = new Map<string, Bucket>();
  readonly #what: string;
  readonly #reserve: number;

  constructor(clock: Clock, what: string, burst: number, everyMs: number, totalBurst: number, totalEveryMs: number, reserve = 0) {
    this.#clock = clock;
    this.#reserve = reserve;
    this.#what = what;
    this.#burst = burst;
    this.#everyMs = everyMs;
    this.#totalBurst = totalBurst;
    this.#totalEveryMs = totalEveryMs;
    this.#total = { tokens: totalBurst, at: clock.now() };
  }

  take(caller: string): void {
    const now = this.#clock.now();
    const mine = this.#callers.get(caller) ?? { tokens: this.#burst, at: now };
    refill(mine, now, this.#burst, this.#everyMs);
    refill(this.#total, now, this.#totalBurst, this.#totalEveryMs);
    if (mine.tokens < 1)
      throw new SnapshotUnavailable("busy", `${caller} asked for ${this.#what} faster than one every ${this.#everyMs} ms`);
    if (this.#total.tokens < 1)
      throw new SnapshotUnavailable("busy", `the object serves at most one of ${this.#what} every ${this.#totalEveryMs} ms`);
    // The reserve (decision 0075): the object's last tokens go only to a caller that has drawn fewer than that many
    // from its own bucket lately (a new device: it can read one whole fetch), never to one that read more.
    if (this.#total.tokens - 1 < this.#reserve && this.#burst - mine.tokens >= this.#reserve)
      throw new SnapshotUnavailable(
        "busy",
        `the object keeps its last ${this.#reserve} ${this.#what} for callers that have read less lately`,
      );
    mine.tokens -= 1;
    this.#total.tokens -= 1;
    this.#callers.delete(caller); // re-inserted: the map's order is the order callers were last heard
    this.#callers.set(caller, mine);
    if (this.#callers.size > REMEMBERED_CALLERS) this.#callers.delete(this.#callers.keys().next().value!);
  }
}

export class SnapshotLimit {
  readonly #takes: Buckets;
  readonly #parts: Buckets;

  constructor(clock: Clock, limits: SnapshotLimits = {}) {
    this.#takes = new Buckets(
      clock,
      "new snapshots",
      limits.burst ?? 3,
      limits.everyMs ?? 10_000,
      limits.totalBurst ?? 6,
      limits.totalEveryMs ?? 2_000,
    );
    const partBurst = limits.partBurst ?? 64;
    const totalPartBurst = limits.totalPartBurst ?? 256;
    const reserve = limits.partReserve ?? Math.min(Math.ceil(partBurst / 2), totalPartBurst - partBurst);
    this.#parts = new Buckets(
      clock,
      "snapshot parts",
      partBurst,
      limits.partEveryMs ?? 1_000,
      totalPartBurst,
      limits.totalPartEveryMs ?? 200,
      Number.isFinite(reserve) ? Math.max(0, Math.floor(reserve)) : 0,
    );
  }

  /** Counts one new snapshot for `caller`, or throws `SnapshotUnavailable("busy")` and counts nothing. */
  take(caller: string): void {
    this.#takes.take(caller);
  }

  /** Counts one part of a snapshot already taken for `caller`, or throws `SnapshotUnavailable("busy")` and counts nothing. */
  part(caller: string): void {
    this.#parts.take(caller);
  }
}

/**
 * Adds the tokens `everyMs` earned since the bucket was last refilled, up to `burst`. A clock moved back adds none,
 * and the bucket counts from there: kept at the later time, it would earn nothing until the clock caught up (a
 * drained object refusing every caller for as long as the clock jumped).
 */
function refill(bucket: Bucket, now: number, burst: number, everyMs: number): void {
  if (now < bucket.at) bucket.at = now;
  if (now === bucket.at) return;
  const earned = Math.floor((now - bucket.at) / everyMs);
  if (earned === 0) return;
  bucket.tokens = Math.min(burst, bucket.tokens + earned);
  bucket.at = bucket.tokens === burst ? now : bucket.at + earned * everyMs;
}
