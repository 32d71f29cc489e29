/**
 * A snapshot's text, row by row (decision 0079; follow wire version 6). The object's copy is written as records, one
 * JSON text a line, each ending in "\n" (`JSON.stringify` never writes a raw newline): first the header — the
 * snapshot with its batch's five row lists left out — then one `[list, row]` per row, list by list, and last
 * `["end", rows]`, the number of row records (a text cut after a whole record is not a smaller snapshot). The object
 * serializes row after row and cuts parts as they fill (`PartCutter`), hashing as it goes; the tab hashes each part as
 * it arrives and parses the whole records it completes (`SnapshotReader`). Neither end ever holds the snapshot's
 * whole JSON text: the object holds the parts it keeps for the tabs (since decision 0084 its rows arrive as their
 * stored text, `rowLine`, never parsed), the tab the rows parsed since the last part (staged into its storage,
 * `drain`, or all of them for a storage that does not stage) and the one record a part ended in the middle of.
 *
 * ```ts
 * const cutter = new PartCutter(budget, MAX_OBJECT_SNAPSHOT_BYTES);
 * for (const line of snapshotLines(snapshot)) cutter.add(line);
 * const { parts, digest } = cutter.finish();
 * const reader = new SnapshotReader();
 * for (const part of parts) reader.add(part);
 * reader.finish(snapshot.batch.fence, digest); // the snapshot, checked
 * ```
 */
import { TextSha256 } from "../base/sha256.ts";
import { FollowMessageRefused, SnapshotUnavailable } from "../errors.ts";
import { MAX_DEPTH_LIMIT, walkJson } from "../limits.ts";
import type { LogMark, Snapshot, SnapshotHead, SnapshotList } from "../storage/records.ts";
import { batchProblem, MAX_BATCH_RECORDS } from "./batch-shape.ts";
import { MAX_PARTS, sliceJsonText } from "./chunks.ts";

/** The most characters of one snapshot's text a tab reads (its memory for one rebuild). */
export const MAX_SNAPSHOT_BYTES = 64 << 20;
/** A snapshot's record nests at most this deep: a stored value's own depth below the few levels of a row. */
const MAX_SNAPSHOT_DEPTH = MAX_DEPTH_LIMIT + 16;
/** The batch's row lists, in the order the object writes them; each row is a record of its own. */
const LISTS = ["tasks", "conversations", "entries", "submissions", "documents"] as const;
type ListName = (typeof LISTS)[number];
/** The last record, `["end", rows]`: a text cut after any whole record is not taken for a smaller snapshot. */
const END = "end";

/** The records of `snapshot`'s text, in order, each a line ending in "\n": its header, then its rows list by list. */
export function* snapshotLines(snapshot: Snapshot): Generator<string> {
  const batch: Record<string, unknown> = { ...snapshot.batch };
  const lists: Array<[ListName, unknown[]]> = [];
  for (const name of LISTS) {
    const rows = batch[name];
    // A list that is not an array (only a hostile test writes one) stays in the header, which the reader refuses.
    if (Array.isArray(rows)) {
      lists.push([name, rows]);
      delete batch[name];
    }
  }
  yield headLine({ ...snapshot, batch } as unknown as SnapshotHead);
  let count = 0;
  for (const [name, rows] of lists)
    for (const row of rows) {
      count++;
      yield `${JSON.stringify([name, row])}\n`;
    }
  yield endLine(count);
}

/** A snapshot's first record: its head (the snapshot without its rows). */
export const headLine = (head: SnapshotHead): string => `${JSON.stringify(head)}\n`;
/**
 * A row's record, `[list, row]`, made from the row's JSON text as it is (decision 0084: the object hands its stored
 * record text over unparsed; the text `JSON.stringify([list, row])` would make of the row it stores).
 */
export const rowLine = (list: SnapshotList, record: string): string => `["${list}",${record}]\n`;
/** A snapshot's last record, `["end", rows]`. */
export const endLine = (rows: number): string => `${JSON.stringify([END, rows])}\n`;

/**
 * The object's half: takes a snapshot's lines in order and cuts them into parts whose JSON string literal each
 * takes at most `budget` UTF-8 bytes, several whole records a part where they fit and a record larger than a part
 * across several, hashing each part as it is cut. `SnapshotUnavailable("size")` as soon as the text passes
 * `maxChars` characters or the parts `MAX_PARTS` (nothing larger is built).
 */
export class PartCutter {
  readonly #parts: string[] = [];
  readonly #hash = new TextSha256();
  readonly #budget: number;
  readonly #maxChars: number;
  #pieces: string[] = [];
  #bytes = 0;
  #chars = 0;

  constructor(budget: number, maxChars: number) {
    this.#budget = budget;
    this.#maxChars = maxChars;
  }

  add(line: string): void {
    this.#chars += line.length;
    if (this.#chars > this.#maxChars)
      throw new SnapshotUnavailable("size", `the object's copy is over the ${this.#maxChars} characters a snapshot carries`);
    // The line's bytes inside a JSON string literal, without the two quotes.
    const bytes = jsonStringBytes(line);
    if (this.#bytes + bytes <= this.#budget - 2) {
      this.#pieces.push(line);
      this.#bytes += bytes;
      return;
    }
    this.#flush();
    if (bytes <= this.#budget - 2) {
      this.#pieces.push(line);
      this.#bytes = bytes;
      return;
    }
    const slices = sliceJsonText(line, this.#budget);
    for (const slice of slices.slice(0, -1)) this.#emit(slice);
    const last = slices.at(-1)!;
    this.#pieces.push(last);
    this.#bytes = jsonStringBytes(last);
  }

  /** The parts and the SHA-256 of their joined text. */
  finish(): { parts: string[]; digest: string } {
    this.#flush();
    return { parts: this.#parts, digest: this.#hash.hex() };
  }

  #flush(): void {
    if (this.#pieces.length > 0) this.#emit(this.#pieces.join(""));
    this.#pieces = [];
    this.#bytes = 0;
  }

  #emit(part: string): void {
    if (this.#parts.length >= MAX_PARTS)
      throw new SnapshotUnavailable("size", `the object's copy takes more than the ${MAX_PARTS} parts a snapshot carries`);
    this.#hash.update(part);
    this.#parts.push(part);
  }
}

/**
 * The UTF-8 bytes `text` takes inside a JSON string literal (without its quotes), as `JSON.stringify` writes it,
 * counted without making that string: `"` and `\` escaped in two, other control characters in two or six, a lone
 * surrogate in six.
 */
export function jsonStringBytes(text: string): number {
  let bytes = 0;
  for (let index = 0; index < text.length; index++) {
    const code = text.charCodeAt(index);
    if (code === 0x22 || code === 0x5c) bytes += 2;
    else if (code < 0x20) bytes += code === 8 || code === 9 || code === 10 || code === 12 || code === 13 ? 2 : 6;
    else if (code < 0x80) bytes += 1;
    else if (code < 0x800) bytes += 2;
    else if (code >= 0xd800 && code <= 0xdbff && (text.charCodeAt(index + 1) & 0xfc00) === 0xdc00) {
      bytes += 4;
      index++;
    } else if (code >= 0xd800 && code <= 0xdfff) bytes += 6;
    else bytes += 3;
  }
  return bytes;
}

/**
 * The tab's half: takes a snapshot's parts in order, hashes each and parses each record it completes into the
 * rebuild's staging (the rows so far), then `finish` checks the whole. Every refusal is `FollowMessageRefused`:
 * `size` at once (past `MAX_SNAPSHOT_BYTES`, or one record past `maxRecord`); a record that is not JSON (`json`),
 * nests too deep (`depth`) or is not a header or a `[list, row]` (`shape`) stops the staging — its rows are dropped
 * — and is reported by `finish` after the digest, so a part changed on the way is always `digest`, as when the
 * whole was hashed before it was parsed (decision 0053).
 */
export class SnapshotReader {
  readonly #hash = new TextSha256();
  readonly #maxChars: number;
  #carry: string[] = [];
  #carried = 0;
  #chars = 0;
  #header: Record<string, unknown> | undefined;
  #rows: Record<ListName, unknown[]> = { tasks: [], conversations: [], entries: [], submissions: [], documents: [] };
  #problem: FollowMessageRefused | undefined;
  #count = 0;
  #ended = false;

  constructor(maxChars = MAX_SNAPSHOT_BYTES) {
    this.#maxChars = Math.min(maxChars, MAX_SNAPSHOT_BYTES);
  }

  /** The next part's text. */
  add(text: string): void {
    this.#chars += text.length;
    if (this.#chars > this.#maxChars) throw new FollowMessageRefused("size", `a snapshot of more than ${this.#maxChars} bytes`);
    this.#hash.update(text);
    if (this.#problem) return;
    let at = 0;
    for (let end = text.indexOf("\n"); end >= 0 && !this.#problem; end = text.indexOf("\n", at)) {
      const piece = text.slice(at, end);
      const line = this.#carry.length === 0 ? piece : this.#carry.join("") + piece;
      this.#carry = [];
      this.#carried = 0;
      const problem = this.#record(line);
      if (problem) this.#refuse(problem);
      at = end + 1;
    }
    if (at < text.length && !this.#problem) {
      this.#carry.push(at === 0 ? text : text.slice(at));
      this.#carried += text.length - at;
    }
  }

  /**
   * The snapshot the parts carried, at `at`: their joined text hashed to `digest` (when given) and then checked as
   * `parseSnapshot` checks it. The reader is spent.
   */
  finish(at: LogMark, digest?: string): Snapshot {
    const header = this.#whole(digest);
    const value = { ...header, batch: { ...header.batch, ...this.#rows } };
    const problem = snapshotProblem(value, at);
    if (problem) throw new FollowMessageRefused("shape", problem);
    return value as unknown as Snapshot;
  }

  /** The header once its record was read (unchecked until the end). */
  get header(): Readonly<Record<string, unknown>> | undefined {
    return this.#header;
  }

  /**
   * The rows parsed since the last drain, no longer held here (decision 0084: a staged rebuild writes them into the
   * tab's storage as each part arrives, and checks each row as it goes; `finishHead` checks the rest).
   */
  drain(): Record<SnapshotList, unknown[]> {
    const rows = this.#rows;
    this.#rows = { tasks: [], conversations: [], entries: [], submissions: [], documents: [] };
    return rows;
  }

  /** Refuses the snapshot for what a caller found in drained rows: `finish` reports it after the digest. */
  refuse(problem: FollowMessageRefused): void {
    if (!this.#problem) this.#refuse(problem);
  }

  /** As `finish` for a reader whose rows were drained (and checked) as they came: the snapshot's head, checked. */
  finishHead(at: LogMark, digest: string): SnapshotHead {
    const header = this.#whole(digest);
    const value = { ...header, batch: { ...header.batch, tasks: [], conversations: [], entries: [], submissions: [], documents: [] } };
    const problem = snapshotProblem(value, at);
    if (problem) throw new FollowMessageRefused("shape", problem);
    return header as unknown as SnapshotHead;
  }

  /** The header, once the digest, a refusal and the end were checked; the reader is spent. */
  #whole(digest: string | undefined): { batch: Record<string, unknown> } {
    const hashed = this.#hash.hex();
    if (digest !== undefined && hashed !== digest)
      throw new FollowMessageRefused("digest", `the snapshot's joined parts hash to ${hashed}, not to the ${digest} the object said`);
    if (this.#problem) throw this.#problem;
    if (this.#carried > 0 || !this.#header || !this.#ended)
      throw new FollowMessageRefused("json", "the snapshot's parts end before its last record (whole records, then its end)");
    const header = this.#header as { batch: Record<string, unknown> };
    this.#header = undefined;
    return header;
  }

  /** Stages one whole record; what is wrong with it, if anything. */
  #record(line: string): FollowMessageRefused | undefined {
    let value: unknown;
    try {
      value = JSON.parse(line);
    } catch {
      return new FollowMessageRefused("json", "the snapshot's parts do not join into JSON records");
    }
    const { fault } = walkJson(value, { maxDepth: MAX_SNAPSHOT_DEPTH });
    if (fault)
      return fault.kind === "depth"
        ? new FollowMessageRefused("depth", `the snapshot nests deeper than ${MAX_SNAPSHOT_DEPTH} levels`)
        : new FollowMessageRefused("json", `the snapshot holds ${fault.kind}`);
    if (!this.#header) {
      const batch = (value as { batch?: unknown } | null)?.batch;
      if (typeof value !== "object" || value === null || Array.isArray(value) || typeof batch !== "object" || batch === null)
        return new FollowMessageRefused("shape", "the snapshot's first record must be its header { batch, epochs }");
      const inside = LISTS.find((name) => name in batch);
      if (inside) return new FollowMessageRefused("shape", `the snapshot's header holds its ${inside}: rows come one a record`);
      this.#header = value as Record<string, unknown>;
      return undefined;
    }
    if (this.#ended) return new FollowMessageRefused("shape", "the snapshot has records after its end");
    if (Array.isArray(value) && value[0] === END) {
      if (value.length !== 2 || value[1] !== this.#count)
        return new FollowMessageRefused("shape", `the snapshot's end names other than the ${this.#count} rows it carried`);
      this.#ended = true;
      return undefined;
    }
    if (!Array.isArray(value) || value.length !== 2 || !LISTS.includes(value[0] as ListName))
      return new FollowMessageRefused(
        "shape",
        `each of the snapshot's records after its header must be [list, row], a list one of ${LISTS.join(", ")}`,
      );
    this.#rows[value[0] as ListName].push(value[1]);
    this.#count++;
    return undefined;
  }

  #refuse(problem: FollowMessageRefused): void {
    this.#problem = problem;
    this.#header = undefined;
    this.#rows = { tasks: [], conversations: [], entries: [], submissions: [], documents: [] };
    this.#carry = [];
    this.#carried = 0;
  }
}

/**
 * Checks a snapshot's whole text before anything is written: records within `MAX_SNAPSHOT_BYTES` and
 * `MAX_SNAPSHOT_DEPTH`, a header and rows making `{ batch, epochs }` with a batch a stored transaction is (its rows'
 * ids, kinds, statuses; `batchProblem`) at `at` with an id counter past every row's id, and a history that leads to
 * `at` (epochs rising, each starting after the one before, the last `at`'s epoch, starting at or before `at`).
 * `FollowMessageRefused` otherwise. The tab reads parts with `SnapshotReader` instead, never joining them.
 */
export function parseSnapshot(text: string, at: LogMark): Snapshot {
  const reader = new SnapshotReader();
  reader.add(text);
  return reader.finish(at);
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
