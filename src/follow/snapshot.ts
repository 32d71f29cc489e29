/**
 * A tab rebuilt from its object's snapshot (docs/decisions/0047), platform-neutral. A tab that cannot follow the
 * object's log — its copy forked, it is a new device's (empty), or it is behind what the object's trimmed tail keeps —
 * asks for the object's copy whole instead: `follow.snapshot(place)` answers the first part of a snapshot at the
 * object's head P and the tab asks for the rest by its id, each part under the link's message limit. The object cuts
 * its copy's rows into parts as they fill and the tab parses each part's whole records as it arrives (decision 0079,
 * `snapshot-text.ts`: neither end holds the snapshot's whole text); the parts are checked as they arrive and the
 * snapshot as a whole (its digest, size, depth, shape, the history it claims) before one transaction writes it (`Storage.rebuild`); the tab's fork is kept first, and survives the rebuild. Then the tab
 * opens its harness again (read-only: the object holds the lease) and follows from P. Since decision 0084 the object
 * reads its rows as their stored text (`Storage.readSnapshotRows`) and a tab whose storage stages (`stageRebuild`)
 * writes each part's checked rows beside its copy as they arrive, then swaps them in with one transaction.
 *
 * ```ts
 * const head = await rebuildFromObject({ storage, link, place: "phone", now: clock.now() }, ctx); // harness closed
 * const harness = await Harness.open(storage, { registry, lease: { place: "phone", arbiter: remoteArbiter(link) } }, ctx);
 * const follower = new Follower({ harness, link, place: "phone" }); // follows from `head`
 * ```
 */
import type { Clock } from "../base/clock.ts";
import { type Context, waitFor } from "../base/context.ts";
import { type IdSource, randomIds } from "../base/ids.ts";
import type { Json } from "../base/json.ts";
import { SerialQueue } from "../base/serial.ts";
import { FollowMessageRefused, SnapshotPartsBusy, SnapshotUnavailable } from "../errors.ts";
import { markRebuilt } from "../harness-lifecycle.ts";
import { type Check, integer, record, text } from "../shape.ts";
import type { LogMark, Snapshot } from "../storage/records.ts";
import type { RebuildStage, Storage } from "../storage/storage.ts";
import { MAX_FOLLOW_MESSAGE_BYTES, MAX_PARTS } from "./chunks.ts";
import { deliverFork } from "./fork.ts";
import { SnapshotLimit, type SnapshotLimits } from "./snapshot-limit.ts";
import { StagedSnapshot } from "./snapshot-stage.ts";
import { endLine, headLine, MAX_SNAPSHOT_BYTES, PartCutter, rowLine, SnapshotReader, snapshotLines } from "./snapshot-text.ts";

export { MAX_SNAPSHOT_BYTES } from "./snapshot-text.ts";
/** The most a Durable Object serves (its 128 MB holds the copy's rows, their JSON and the parts at once). */
export const MAX_OBJECT_SNAPSHOT_BYTES = 16 << 20;
/** What an answer's envelope (its id, the part's id, place and counts) may take beside a part's text. */
const PART_ENVELOPE_BYTES = 2_048;
/** Snapshots an object keeps for the tabs reading them part by part; a newer one displaces the oldest. */
const KEPT_SNAPSHOTS = 2;
/** Take requests remembered with the snapshot they were answered with (decision 0070); the oldest forgotten first. */
const REMEMBERED_TAKES = 64;

/**
 * One part of a snapshot: `index` of `count`, of the snapshot `id` taken at `at` (the object's head then), whose
 * joined text's SHA-256 (UTF-8, lowercase hex) is `digest` (decision 0053).
 */
export interface SnapshotPart {
  id: string;
  at: LogMark;
  index: number;
  count: number;
  digest: string;
  text: string;
}

const mark = record({ epoch: integer(1, Number.MAX_SAFE_INTEGER), position: integer(1, Number.MAX_SAFE_INTEGER) });
/** Checks an object's `follow.snapshot` answer where it arrives (the tab). */
export const snapshotPart: Check = record({
  id: text({ max: 100 }),
  at: mark,
  index: integer(0, MAX_PARTS - 1),
  count: integer(1, MAX_PARTS),
  digest: text({ max: 64 }),
  text: text({ empty: true }),
});
const HEX_DIGEST = /^[0-9a-f]{64}$/;

/** A snapshot the object took: where, its whole's SHA-256, its parts. */
interface Taken {
  at: LogMark;
  digest: string;
  parts: string[];
}

/** The object's half: takes snapshots of its copy and serves them part by part. */
export class SnapshotServer {
  readonly #storage: Storage;
  readonly #maxBytes: number;
  readonly #kept = new Map<string, Taken>();
  /** Each answered take's request (caller, place, request id) and its snapshot's key. */
  readonly #answered = new Map<string, string>();
  readonly #prefix: string;
  readonly #limit: SnapshotLimit;
  /**
   * One take at a time (decision 0058): each holds the parts it cuts, a whole copy's size (and, on a storage without
   * `readSnapshotRows`, the copy's rows too while it reads and cuts them; decision 0084).
   */
  readonly #taking = new SerialQueue();
  #next = 0;

  /** `newId`: the random part of this instance's snapshot ids (decision 0078). */
  constructor(storage: Storage, clock: Clock, limits?: SnapshotLimits, newId: IdSource = randomIds) {
    this.#storage = storage;
    this.#prefix = newId();
    this.#maxBytes = storage.maxRowBytes === undefined ? MAX_SNAPSHOT_BYTES : MAX_OBJECT_SNAPSHOT_BYTES;
    // Parts (decision 0058): a caller may fetch the largest snapshot this object serves twice at once, all callers four times.
    const most = snapshotParts(this.#maxBytes);
    this.#limit = new SnapshotLimit(clock, { partBurst: 2 * most, totalPartBurst: 4 * most, ...limits });
  }

  /** The positions of the snapshots kept: a tab rebuilt from one follows from there (the feed keeps the log after it). */
  positions(): number[] {
    return [...this.#kept.values()].map((kept) => kept.at.position);
  }

  /**
   * Part `index` of snapshot `id`; without an id, a new snapshot of the copy (read in one transaction) and its first
   * part. `SnapshotUnavailable`: the copy has no history yet, `id` is not kept (ask again without it), the copy is
   * larger than a snapshot carries, or `caller` (or all callers together) asked for new snapshots (decision 0053) or
   * for parts (decision 0058) too often (`busy`: nothing is read or counted).
   */
  async part(id: string | undefined, index = 0, caller = "", request?: string): Promise<SnapshotPart> {
    if (id === undefined && index !== 0) throw new SnapshotUnavailable("gone", "a new snapshot is asked for by its first part");
    // A take asked again under a request already answered (the link's resend crossed the answer, decision 0070) is
    // that take's first part again, counted as a part: before, it was a new take, and spent one of the caller's.
    const earlier = id === undefined && request !== undefined ? this.#answered.get(request) : undefined;
    if (earlier !== undefined && this.#kept.has(earlier)) return this.part(earlier, 0, caller);
    if (id === undefined) this.#limit.take(caller);
    // A new snapshot is named by its own key: another take may have finished while this one was read.
    const [key, kept] = id === undefined ? await this.#taking.run(() => this.#take()) : [id, this.#kept.get(id)];
    if (id === undefined && request !== undefined) {
      this.#answered.delete(request);
      this.#answered.set(request, key);
      if (this.#answered.size > REMEMBERED_TAKES) this.#answered.delete(this.#answered.keys().next().value!);
    }
    if (!kept) throw new SnapshotUnavailable("gone", `snapshot ${JSON.stringify(id)} is no longer kept`);
    if (!Number.isSafeInteger(index) || index < 0 || index >= kept.parts.length)
      throw new SnapshotUnavailable("gone", `snapshot ${key} has ${kept.parts.length} parts, not ${index + 1}`);
    if (id !== undefined) this.#limit.part(caller); // decision 0058: parts of a snapshot already taken are counted too
    return { id: key, at: kept.at, index, count: kept.parts.length, digest: kept.digest, text: kept.parts[index]! };
  }

  async #take(): Promise<[string, Taken]> {
    // Row by row into parts as they fill, hashed as they are cut (decision 0079): the whole text is never built. Where
    // the storage hands its rows over as their stored text (decision 0084), no row is parsed either.
    const cutter = new PartCutter(MAX_FOLLOW_MESSAGE_BYTES - PART_ENVELOPE_BYTES, this.#maxBytes);
    const at = await cutSnapshot(this.#storage, cutter);
    if (!at) throw new SnapshotUnavailable("empty", "the object's copy holds no history yet");
    const { parts, digest } = cutter.finish();
    const taken = { at, digest, parts };
    const key = `${this.#prefix}:${++this.#next}`;
    this.#kept.set(key, taken);
    if (this.#kept.size > KEPT_SNAPSHOTS) this.#kept.delete(this.#kept.keys().next().value!);
    return [key, taken];
  }
}

/** Adds `storage`'s snapshot's records to `cutter`, in one read transaction; where it is, or undefined (no history). */
async function cutSnapshot(storage: Storage, cutter: PartCutter): Promise<LogMark | undefined> {
  if (storage.readSnapshotRows) {
    let at: LogMark | undefined;
    let rows = 0;
    const found = await storage.readSnapshotRows(
      (head) => {
        at = head.batch.fence;
        cutter.add(headLine(head));
      },
      (list, record) => {
        rows++;
        cutter.add(rowLine(list, record));
      },
    );
    if (!found || !at) return undefined;
    cutter.add(endLine(rows));
    return at;
  }
  const snapshot = await storage.readSnapshot?.();
  if (!snapshot) return undefined;
  for (const line of snapshotLines(snapshot)) cutter.add(line);
  return snapshot.batch.fence;
}

/**
 * The most parts a snapshot of `bytes` characters is served in when none of its characters takes more than 3 bytes
 * in a part's JSON: 51 for a Durable Object's 16 MiB, 202 for 64 MiB. Since decision 0079 a part packs whole records
 * up to its budget (a 15.7 MB ASCII copy of 2 KB rows is 16 parts, not 47), and a record larger than a part is
 * sliced at a third of it as before, so this stays the bound the parts limits are sized by. A text of control
 * characters or lone surrogates takes more parts.
 */
export function snapshotParts(bytes: number): number {
  return Math.ceil(bytes / Math.floor((MAX_FOLLOW_MESSAGE_BYTES - PART_ENVELOPE_BYTES) / 3));
}

/** What the tab calls the object through (its `FollowLink`). */
export interface SnapshotLink {
  call(topic: string, method: string, args: Json[]): Promise<Json>;
}

/**
 * How `fetchSnapshot` waits out a `busy` part (decision 0064), on the harness clock: the first retry after
 * `firstDelayMs`, each next one after twice the last (at most `maxDelayMs`), at most `attempts` retries of one part;
 * a part the object no longer keeps (`gone`: its instance restarted, or newer takes displaced it) starts a new take,
 * at most `takes` times.
 */
export interface SnapshotRetry {
  clock: Clock;
  attempts?: number;
  firstDelayMs?: number;
  maxDelayMs?: number;
  takes?: number;
}

const RETRY_DEFAULTS = { attempts: 6, firstDelayMs: 250, maxDelayMs: 4_000, takes: 2 };
/** Bounds on what a caller passes (a retry count or delay from an app's options is still bounded). */
const MAX_RETRY_ATTEMPTS = 32;
const MAX_RETRY_DELAY_MS = 60_000;

/** A take the object no longer keeps, found at a later part: start a new one. */
class TakeGone {
  constructor(readonly error: unknown) {}
}

/**
 * Reads the object's snapshot over `link` for `place`: every part checked as it arrives (shape, the same snapshot,
 * in order, the total within `MAX_SNAPSHOT_BYTES`) and its whole records parsed as it arrives (`SnapshotReader`,
 * decision 0079), then the whole: its SHA-256 the one every part carried (`FollowMessageRefused("digest")`), then its
 * content. `FollowMessageRefused` for
 * anything that is not the snapshot it claims to be; the object's `SnapshotUnavailable` or `ConnectionLost` as is.
 * With `retry` (decision 0064), a part answered `busy` is asked again after a backoff on `retry.clock`
 * (`SnapshotPartsBusy` once its retries are spent), and a part answered `gone` starts a new take (bounded); without
 * it, either ends the fetch.
 */
export async function fetchSnapshot(link: SnapshotLink, place: string, context: Context, retry?: SnapshotRetry): Promise<Snapshot> {
  return fetchInto(link, place, context, retry, () => new SnapshotReader());
}

/**
 * Where a take's parts go as they arrive (after the first part came): parsed into memory (`SnapshotReader`), or
 * staged into the tab's storage (`StagedSnapshot`, decision 0084); `finish` checks the whole after the digest.
 */
interface TakeSink<T> {
  add(text: string): void | Promise<void>;
  finish(at: LogMark, digest: string): T;
}

/** `fetchSnapshot` into a sink of each take's own (a `gone` take starts again with a new one). */
async function fetchInto<T>(
  link: SnapshotLink,
  place: string,
  context: Context,
  retry: SnapshotRetry | undefined,
  sink: () => TakeSink<T> | Promise<TakeSink<T>>,
): Promise<T> {
  const takes = retry ? bounded(retry.takes, RETRY_DEFAULTS.takes, 0, MAX_RETRY_ATTEMPTS) : 0;
  for (let take = 0; ; take++) {
    try {
      return await fetchTake(link, place, context, retry, sink);
    } catch (error) {
      if (!(error instanceof TakeGone)) throw error;
      if (take >= takes) throw error.error;
    }
  }
}

async function fetchTake<T>(
  link: SnapshotLink,
  place: string,
  context: Context,
  retry: SnapshotRetry | undefined,
  sink: () => TakeSink<T> | Promise<TakeSink<T>>,
): Promise<T> {
  const first = checkPart(await waitFor(link.call("follow", "snapshot", [place]), context), 0);
  // Each part hashed and its whole records parsed as it arrives (decision 0079): the joined text is never built.
  const reader = await sink();
  await reader.add(first.text);
  for (let index = 1; index < first.count; index++) {
    const part = checkPart(await askPart(link, place, first.id, index, context, retry), index);
    if (
      part.id !== first.id ||
      part.count !== first.count ||
      part.digest !== first.digest ||
      part.at.epoch !== first.at.epoch ||
      part.at.position !== first.at.position
    )
      throw new FollowMessageRefused("shape", `part ${index} of snapshot ${first.id} belongs to another snapshot`);
    await reader.add(part.text);
  }
  // The whole the object serialized, before its content is judged (decision 0053): a part changed, lost or swapped
  // on the way hashes to another digest.
  return reader.finish(first.at, first.digest);
}

/** Part `index` of take `id`, its `busy` answers retried after a backoff on the harness clock (decision 0064). */
async function askPart(
  link: SnapshotLink,
  place: string,
  id: string,
  index: number,
  context: Context,
  retry: SnapshotRetry | undefined,
): Promise<Json> {
  const attempts = retry ? bounded(retry.attempts, RETRY_DEFAULTS.attempts, 0, MAX_RETRY_ATTEMPTS) : 0;
  let delay = retry ? bounded(retry.firstDelayMs, RETRY_DEFAULTS.firstDelayMs, 0, MAX_RETRY_DELAY_MS) : 0;
  const most = retry ? bounded(retry.maxDelayMs, RETRY_DEFAULTS.maxDelayMs, 0, MAX_RETRY_DELAY_MS) : 0;
  for (let attempt = 0; ; attempt++) {
    try {
      return await waitFor(link.call("follow", "snapshot", [place, id, index]), context);
    } catch (error) {
      if (!retry || !(error instanceof SnapshotUnavailable)) throw error;
      if (error.reason === "gone") throw new TakeGone(error);
      if (error.reason !== "busy") throw error;
      if (attempt >= attempts) throw new SnapshotPartsBusy(id, index, attempt + 1);
      await pause(retry.clock, Math.min(delay, most), context);
      delay = Math.min(delay * 2, most);
    }
  }
}

/** Waits `ms` on `clock` (the core's only timer), or rejects as `context` is cancelled (the timer cleared). */
async function pause(clock: Clock, ms: number, context: Context): Promise<void> {
  let cancel: (() => void) | undefined;
  try {
    await waitFor(new Promise<void>((resolve) => (cancel = clock.setTimer(ms, resolve))), context);
  } finally {
    cancel?.();
  }
}

function bounded(value: number | undefined, fallback: number, least: number, most: number): number {
  if (value === undefined || !Number.isFinite(value)) return fallback;
  return Math.min(most, Math.max(least, Math.floor(value)));
}

function checkPart(value: Json, index: number): SnapshotPart {
  const problem = snapshotPart(value, "the object's follow.snapshot answer");
  if (problem) throw new FollowMessageRefused("shape", problem);
  const part = value as unknown as SnapshotPart;
  if (!HEX_DIGEST.test(part.digest))
    throw new FollowMessageRefused("shape", "a snapshot part's digest must be 64 lowercase hex digits (SHA-256)");
  if (part.index !== index) throw new FollowMessageRefused("shape", `the object answered part ${part.index} when part ${index} was asked`);
  return part;
}

export interface RebuildOptions {
  /** The tab's storage; no writable harness may be open on it (a read-only one is closed by `fetched`, and reopened after). */
  storage: Storage;
  link: SnapshotLink;
  /** The tab's place in the lease. */
  place: string;
  /** When the fork, if any, is found (the harness clock's now). */
  now: number;
  /** Retries a `busy` part on this clock and starts a new take for a `gone` one (decision 0064); without it, either ends the rebuild. */
  clock?: Clock;
  /**
   * Called once the snapshot is fetched and checked, before the fork is kept and the copy replaced (decision 0127: the
   * host closes the read-only copy that answered reads during the fetch). Not called when the fetch fails.
   */
  fetched?: () => Promise<void>;
}

/**
 * Rebuilds the tab's copy from the object's snapshot (decision 0047): fetched and checked first, then this copy's
 * fork against the snapshot's history kept (never lost: it is in `pi_durable_forks` before anything is replaced),
 * then the copy replaced in one transaction. Resolves with the head it holds now, P: open the harness on the storage
 * again and follow from there. Rejects (nothing replaced) with what `fetchSnapshot` refused or the storage's error.
 */
export async function rebuildFromObject(options: RebuildOptions, context: Context): Promise<LogMark> {
  const { storage } = options;
  if (!storage.rebuild)
    throw new TypeError(`${storage.label} cannot be rebuilt from a snapshot: use a storage with rebuild (MemoryStorage, SqliteStorage).`);
  const retry = options.clock ? { clock: options.clock } : undefined;
  if (storage.stageRebuild) return rebuildStaged(options, storage.stageRebuild.bind(storage), retry, context);
  const snapshot = await fetchSnapshot(options.link, options.place, context, retry);
  await options.fetched?.();
  await deliverFork(storage, { head: snapshot.batch.fence, epochs: snapshot.epochs }, options.now, true);
  await storage.rebuild(snapshot);
  markRebuilt(storage);
  return { ...snapshot.batch.fence };
}

/**
 * The rebuild staged part by part (decision 0084): each take's rows written beside the copy as its parts arrive (a
 * new take's stage starts empty), then the fork kept and the copy replaced in one transaction. What was staged is
 * dropped when the rebuild fails; a crash leaves it for the next rebuild to clear.
 */
async function rebuildStaged(
  options: RebuildOptions,
  stageRebuild: () => Promise<RebuildStage>,
  retry: SnapshotRetry | undefined,
  context: Context,
): Promise<LogMark> {
  let staged: StagedSnapshot | undefined;
  try {
    const head = await fetchInto(options.link, options.place, context, retry, async () => {
      await staged?.discard();
      staged = new StagedSnapshot(await stageRebuild());
      return staged;
    });
    await options.fetched?.();
    await deliverFork(options.storage, { head: head.batch.fence, epochs: head.epochs }, options.now, true);
    await staged!.commit(head);
    markRebuilt(options.storage);
    return { ...head.batch.fence };
  } catch (error) {
    await staged?.discard().catch(() => undefined);
    throw error;
  }
}
