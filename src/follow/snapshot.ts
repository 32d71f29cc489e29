/**
 * A tab rebuilt from its object's snapshot (docs/decisions/0047), platform-neutral. A tab that cannot follow the
 * object's log — its copy forked, it is a new device's (empty), or it is behind what the object's trimmed tail keeps —
 * asks for the object's copy whole instead: `follow.snapshot(place)` answers the first part of a snapshot at the
 * object's head P and the tab asks for the rest by its id, each part under the link's message limit. The parts are
 * checked as they arrive and the joined snapshot as a whole (size, depth, shape, the history it claims) before one
 * transaction writes it (`Storage.rebuild`); the tab's fork is kept first, and survives the rebuild. Then the tab
 * opens its harness again (read-only: the object holds the lease) and follows from P.
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
import { sha256Text } from "../base/sha256.ts";
import { FollowMessageRefused, SnapshotPartsBusy, SnapshotUnavailable } from "../errors.ts";
import { MAX_DEPTH_LIMIT, walkJson } from "../limits.ts";
import { type Check, integer, record, text } from "../shape.ts";
import type { LogMark, Snapshot } from "../storage/records.ts";
import type { Storage } from "../storage/storage.ts";
import { batchProblem, MAX_BATCH_RECORDS } from "./batch-shape.ts";
import { MAX_FOLLOW_MESSAGE_BYTES, MAX_PARTS, sliceJsonText } from "./chunks.ts";
import { deliverFork } from "./fork.ts";
import { SnapshotLimit, type SnapshotLimits } from "./snapshot-limit.ts";

/** The most characters of one snapshot's JSON a tab joins (its memory for one rebuild). */
export const MAX_SNAPSHOT_BYTES = 64 << 20;
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
  /** One take at a time (decision 0058): each holds a whole copy in memory while it reads and serializes it. */
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
    const snapshot = await this.#storage.readSnapshot?.();
    if (!snapshot) throw new SnapshotUnavailable("empty", "the object's copy holds no history yet");
    const whole = JSON.stringify(snapshot);
    if (whole.length > this.#maxBytes)
      throw new SnapshotUnavailable(
        "size",
        `the object's copy is ${whole.length} characters, over the ${this.#maxBytes} a snapshot carries`,
      );
    const taken = {
      at: snapshot.batch.fence,
      digest: sha256Text(whole),
      parts: sliceJsonText(whole, MAX_FOLLOW_MESSAGE_BYTES - PART_ENVELOPE_BYTES),
    };
    const key = `${this.#prefix}:${++this.#next}`;
    this.#kept.set(key, taken);
    if (this.#kept.size > KEPT_SNAPSHOTS) this.#kept.delete(this.#kept.keys().next().value!);
    return [key, taken];
  }
}

/**
 * How many parts a snapshot of `bytes` characters is served in when none of its characters takes more than 3 bytes
 * in a part's JSON (`sliceJsonText` starts at a third of the part's budget): 51 for a Durable Object's 16 MiB, 202
 * for 64 MiB. A text of control characters or lone surrogates takes more parts.
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
 * in order, the total within `MAX_SNAPSHOT_BYTES`), then the whole: its SHA-256 the one every part carried
 * (`FollowMessageRefused("digest")`), then its content (`parseSnapshot`). `FollowMessageRefused` for
 * anything that is not the snapshot it claims to be; the object's `SnapshotUnavailable` or `ConnectionLost` as is.
 * With `retry` (decision 0064), a part answered `busy` is asked again after a backoff on `retry.clock`
 * (`SnapshotPartsBusy` once its retries are spent), and a part answered `gone` starts a new take (bounded); without
 * it, either ends the fetch.
 */
export async function fetchSnapshot(link: SnapshotLink, place: string, context: Context, retry?: SnapshotRetry): Promise<Snapshot> {
  const takes = retry ? bounded(retry.takes, RETRY_DEFAULTS.takes, 0, MAX_RETRY_ATTEMPTS) : 0;
  for (let take = 0; ; take++) {
    try {
      return await fetchTake(link, place, context, retry);
    } catch (error) {
      if (!(error instanceof TakeGone)) throw error;
      if (take >= takes) throw error.error;
    }
  }
}

async function fetchTake(link: SnapshotLink, place: string, context: Context, retry: SnapshotRetry | undefined): Promise<Snapshot> {
  const first = checkPart(await waitFor(link.call("follow", "snapshot", [place]), context), 0);
  const texts = [first.text];
  let chars = first.text.length;
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
    chars += part.text.length;
    if (chars > MAX_SNAPSHOT_BYTES) throw new FollowMessageRefused("size", `a snapshot of more than ${MAX_SNAPSHOT_BYTES} bytes`);
    texts.push(part.text);
  }
  const joined = texts.join("");
  // The whole the object serialized, before anything parses it (decision 0053): a part changed, lost or swapped on
  // the way joins into other text.
  const digest = sha256Text(joined);
  if (digest !== first.digest)
    throw new FollowMessageRefused("digest", `the snapshot's joined parts hash to ${digest}, not to the ${first.digest} the object said`);
  return parseSnapshot(joined, first.at);
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

/** A snapshot's JSON nests at most this deep: a stored value's own depth below the few levels of the snapshot. */
const MAX_SNAPSHOT_DEPTH = MAX_DEPTH_LIMIT + 16;

/**
 * Checks a joined snapshot before anything is written: JSON within `MAX_SNAPSHOT_BYTES` and `MAX_SNAPSHOT_DEPTH`,
 * `{ batch, epochs }` with a batch a stored transaction is (its rows' ids, kinds, statuses; `batchProblem`) at
 * `at` with an id counter past every row's id, and a history that leads to `at` (epochs rising, each starting after
 * the one before, the last `at`'s epoch, starting at or before `at`). `FollowMessageRefused` otherwise.
 */
export function parseSnapshot(joined: string, at: LogMark): Snapshot {
  if (joined.length > MAX_SNAPSHOT_BYTES) throw new FollowMessageRefused("size", `a snapshot of more than ${MAX_SNAPSHOT_BYTES} bytes`);
  let value: unknown;
  try {
    value = JSON.parse(joined);
  } catch {
    throw new FollowMessageRefused("json", "the snapshot's parts do not join into JSON");
  }
  const { fault } = walkJson(value, { maxDepth: MAX_SNAPSHOT_DEPTH });
  if (fault)
    throw fault.kind === "depth"
      ? new FollowMessageRefused("depth", `the snapshot nests deeper than ${MAX_SNAPSHOT_DEPTH} levels`)
      : new FollowMessageRefused("json", `the snapshot holds ${fault.kind}`);
  const problem = snapshotProblem(value, at);
  if (problem) throw new FollowMessageRefused("shape", problem);
  return value as Snapshot;
}

function snapshotProblem(value: unknown, at: LogMark): string | undefined {
  if (typeof value !== "object" || value === null || Array.isArray(value)) return "the snapshot must be an object";
  const { batch, epochs, ...rest } = value as { batch?: unknown; epochs?: unknown };
  if (Object.keys(rest).length > 0) return `the snapshot has no field ${JSON.stringify(Object.keys(rest)[0])}`;
  const wrong = batchProblem(batch, "the snapshot's batch");
  if (wrong) return wrong;
  const rows = batch as Snapshot["batch"];
  if (rows.fence.epoch !== at.epoch || rows.fence.position !== at.position)
    return `the snapshot's batch is at ${rows.fence.epoch}/${rows.fence.position}, not at ${at.epoch}/${at.position} as its parts said`;
  if (!Number.isSafeInteger(rows.nextId) || rows.nextId < 1) return "the snapshot's batch.nextId must be a positive integer";
  for (const list of [rows.tasks, rows.conversations, rows.entries, rows.submissions])
    for (const row of list) if (row.id >= rows.nextId) return `the snapshot's row id ${row.id} is not below its nextId ${rows.nextId}`;
  for (const document of rows.documents) if (document.value === null) return "the snapshot's documents hold a deletion";
  const twice = duplicateRow(rows);
  if (twice) return `the snapshot holds ${twice} twice: a copy stores each row once`;
  if (!Array.isArray(epochs) || epochs.length === 0 || epochs.length > MAX_BATCH_RECORDS)
    return `the snapshot's epochs must be a list of 1 to ${MAX_BATCH_RECORDS} stretches`;
  let previous = { epoch: 0, start: 0 };
  for (const stretch of epochs as unknown[]) {
    const { epoch, start, ...extra } = (typeof stretch === "object" && stretch !== null ? stretch : {}) as {
      epoch?: unknown;
      start?: unknown;
    };
    if (!Number.isSafeInteger(epoch) || !Number.isSafeInteger(start) || Object.keys(extra).length > 0)
      return "each of the snapshot's epochs must be { epoch, start } (integers)";
    if ((epoch as number) <= previous.epoch || (start as number) <= previous.start)
      return "the snapshot's epochs must rise, each starting after the one before";
    previous = { epoch: epoch as number, start: start as number };
  }
  if (previous.epoch !== at.epoch || previous.start > at.position) return `the snapshot's epochs do not lead to ${at.epoch}/${at.position}`;
  return undefined;
}

/** A row a snapshot names twice (a table's key, or a submission's request id in its conversation), or undefined. */
function duplicateRow(rows: Snapshot["batch"]): string | undefined {
  const keyed: Array<[string, Array<string | number | undefined>]> = [
    ["task", rows.tasks.map((row) => row.id)],
    ["conversation", rows.conversations.map((row) => row.id)],
    ["entry", rows.entries.map((row) => row.id)],
    ["submission", rows.submissions.map((row) => row.id)],
    [
      "submission request",
      rows.submissions.map((row) => (row.requestId === undefined ? undefined : `${row.conversationId}/${row.requestId}`)),
    ],
    ["document", rows.documents.map((row) => JSON.stringify([row.scope, row.key]))],
  ];
  for (const [what, keys] of keyed) {
    const seen = new Set<string | number>();
    for (const key of keys) {
      if (key === undefined) continue;
      if (seen.has(key)) return `the ${what} ${JSON.stringify(key)}`;
      seen.add(key);
    }
  }
  return undefined;
}

export interface RebuildOptions {
  /** The tab's storage; no writable harness may be open on it (close the read-only one first, and reopen it after). */
  storage: Storage;
  link: SnapshotLink;
  /** The tab's place in the lease. */
  place: string;
  /** When the fork, if any, is found (the harness clock's now). */
  now: number;
  /** Retries a `busy` part on this clock and starts a new take for a `gone` one (decision 0064); without it, either ends the rebuild. */
  clock?: Clock;
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
  const snapshot = await fetchSnapshot(options.link, options.place, context, options.clock ? { clock: options.clock } : undefined);
  await deliverFork(storage, { head: snapshot.batch.fence, epochs: snapshot.epochs }, options.now, true);
  await storage.rebuild(snapshot);
  return { ...snapshot.batch.fence };
}
