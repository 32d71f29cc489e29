/**
 * Transactions on a follow link under the message limit (docs/decisions/0031): whole when one fits in a
 * message, otherwise its JSON text split into parts that each do, sent in order and joined by the receiver
 * before it is checked and applied. Pushes are packed greedily: as many whole transactions and parts, in log
 * order, as fit in one message, then the next.
 */
import { FollowMessageRefused } from "../errors.ts";
import { utf8Length } from "../limits.ts";
import type { LoggedBatch } from "./handover.ts";

/**
 * The most UTF-8 bytes of one message on a follow link: under a Worker's WebSocket message limit (1 MiB) and
 * half of a Durable Object's row (2 MB), so nothing a link carries needs a larger row or frame.
 */
export const MAX_FOLLOW_MESSAGE_BYTES = 1_000_000;
/** What a push's envelope (type, sender, epoch, the lists' brackets) may take beside its transactions. */
const ENVELOPE_BYTES = 1_024;
/** The most bytes of transactions (whole or parts, as JSON) in one push. */
export const PUSH_BUDGET_BYTES = MAX_FOLLOW_MESSAGE_BYTES - ENVELOPE_BYTES;
/** The most bytes of one transaction's JSON a receiver joins from parts (its memory for one transaction). */
export const MAX_TRANSACTION_BYTES = 64 << 20;
/**
 * The most bytes of one transaction's JSON a Durable Object joins: its log tail stores a transaction of any size in
 * rows under its 2 MB limit (decision 0039), but the whole is held and parsed in its 128 MB of memory.
 */
export const MAX_OBJECT_TRANSACTION_BYTES = 16 << 20;
/** The most parts of one transaction. */
export const MAX_PARTS = 4_096;

/** A slice of one transaction's JSON text: part `index` of `count`, for log position `position`. */
export interface BatchPart {
  epoch: number;
  position: number;
  index: number;
  count: number;
  text: string;
}

/** What one push carries: whole transactions and parts of larger ones, in log order. */
export interface PushLoad {
  batches: LoggedBatch[];
  parts: BatchPart[];
}

/** Splits `text` into slices whose JSON string literals each take at most `budget` bytes. */
export function sliceJsonText(text: string, budget: number): string[] {
  const out: string[] = [];
  let at = 0;
  // A character takes at most 6 bytes as a JSON string (\u00XX): start at a third of the budget, halve on excess.
  let size = Math.max(1, Math.floor(budget / 3));
  while (at < text.length) {
    let slice = text.slice(at, at + size);
    while (slice.length > 1 && utf8Length(JSON.stringify(slice)) > budget) {
      size = Math.max(1, Math.floor(size / 2));
      slice = text.slice(at, at + size);
    }
    out.push(slice);
    at += slice.length;
  }
  return out;
}

/** A whole transaction's JSON when its sender already has it (its log row's text, decision 0093), else undefined. */
export type TextOf = (batch: LoggedBatch) => string | undefined;

/** A transaction as a push carries it: its log mark and its JSON text (its log row's, decision 0093). */
export interface LoggedText {
  epoch: number;
  position: number;
  text: string;
}

/** The JSON texts of one push's whole transactions, in order, and their UTF-8 bytes in all. */
export interface LoadTexts {
  texts: string[];
  bytes: number;
}

/** One push as `pack` makes it: the indices of its whole transactions, their texts, and its parts. */
interface PackedLoad {
  wholes: number[];
  whole: LoadTexts;
  parts: BatchPart[];
}

/**
 * Packs `count` transactions (in log order; `epochOf`, `positionOf` and `textOf` tell each one's) into pushes of at
 * most `budget` bytes of transactions each: a transaction whose JSON does not fit in one goes as parts, each in a
 * push of its own or beside others that fit. `textOf` is called once per transaction, in order.
 */
function pack(
  count: number,
  budget: number,
  epochOf: (index: number) => number,
  positionOf: (index: number) => number,
  textOf: (index: number) => string,
): PackedLoad[] {
  const loads: PackedLoad[] = [];
  let load: PackedLoad = { wholes: [], whole: { texts: [], bytes: 0 }, parts: [] };
  let used = 0;
  const add = (bytes: number) => {
    if (used > 0 && used + bytes + 1 > budget) {
      loads.push(load);
      load = { wholes: [], whole: { texts: [], bytes: 0 }, parts: [] };
      used = 0;
    }
    used += bytes + 1;
  };
  for (let index = 0; index < count; index++) {
    const text = textOf(index);
    const bytes = utf8Length(text);
    if (bytes <= budget) {
      add(bytes);
      load.wholes.push(index);
      load.whole.texts.push(text);
      load.whole.bytes += bytes;
      continue;
    }
    const epoch = epochOf(index);
    const position = positionOf(index);
    // A part's own fields (epoch, position, index, count) take well under 100 bytes.
    const pieces = sliceJsonText(text, budget - 100);
    pieces.forEach((piece, at) => {
      const part: BatchPart = { epoch, position, index: at, count: pieces.length, text: piece };
      add(utf8Length(JSON.stringify(part)));
      load.parts.push(part);
    });
  }
  if (used > 0) loads.push(load);
  return loads;
}

/**
 * Packs `batches` (in log order) into pushes of at most `budget` bytes of transactions each: a transaction
 * whose JSON does not fit in one goes as parts, each in a push of its own or beside others that fit. `textOf` gives
 * a transaction's JSON when it is known (else it is serialized here); `texts`, when given, receives for each push the
 * JSON of its whole transactions (what `pushFrames` joins).
 */
export function packPushes(batches: readonly LoggedBatch[], budget = PUSH_BUDGET_BYTES, textOf?: TextOf, texts?: LoadTexts[]): PushLoad[] {
  const loads = pack(
    batches.length,
    budget,
    (index) => batches[index]!.fence.epoch,
    (index) => batches[index]!.fence.position,
    (index) => textOf?.(batches[index]!) ?? JSON.stringify(batches[index]),
  );
  return loads.map(({ wholes, whole, parts }) => {
    texts?.push(whole);
    return { batches: wholes.map((index) => batches[index]!), parts };
  });
}

/** A push message's text and its UTF-8 bytes. */
export interface PushFrame {
  frame: string;
  bytes: number;
}

/**
 * The push frames of `batches` from `from` under `epoch`: each `encodeFollowMessage({ type: "push", from, epoch,
 * ...load })` of `packPushes`' loads, text for text, made of the transactions' JSON texts (`textOf`'s where it has
 * one) rather than serializing every transaction again inside the message, in one join, its bytes counted from the
 * texts' (decision 0093). None for no batches.
 */
export function pushFrames(
  from: string,
  epoch: number,
  batches: readonly LoggedBatch[],
  textOf?: TextOf,
  budget = PUSH_BUDGET_BYTES,
): PushFrame[] {
  const texts: LoadTexts[] = [];
  const loads = packPushes(batches, budget, textOf, texts);
  return framesOf(
    from,
    epoch,
    loads.map((load, index) => ({ whole: texts[index]!, parts: load.parts })),
  );
}

/**
 * `pushFrames` of transactions kept as their marks and texts only (the mirror's unacknowledged ones, decision 0122):
 * the same frames, byte for byte, as `pushFrames` of the batches whose marks and texts these are.
 */
export function textFrames(from: string, epoch: number, logged: readonly LoggedText[], budget = PUSH_BUDGET_BYTES): PushFrame[] {
  const loads = pack(
    logged.length,
    budget,
    (index) => logged[index]!.epoch,
    (index) => logged[index]!.position,
    (index) => logged[index]!.text,
  );
  return framesOf(from, epoch, loads);
}

/** Each push's frame: its whole transactions' texts joined inside the envelope, its parts serialized. */
function framesOf(from: string, epoch: number, loads: ReadonlyArray<{ whole: LoadTexts; parts: BatchPart[] }>): PushFrame[] {
  const head = `{"type":"push","from":${JSON.stringify(from)},"epoch":${JSON.stringify(epoch)},"batches":[`;
  const headBytes = utf8Length(head);
  return loads.map(({ whole, parts: loadParts }) => {
    const parts = loadParts.length === 0 ? "[]" : JSON.stringify(loadParts);
    const tail = `],"parts":${parts}}`;
    const count = whole.texts.length;
    if (count === 0) return { frame: head + tail, bytes: headBytes + utf8Length(tail) };
    // One join makes the frame one flat string (a string built of pieces is copied whole once more when it is sent).
    const pieces = whole.texts.slice();
    pieces[0] = head + pieces[0];
    pieces[count - 1] += tail;
    return { frame: pieces.join(","), bytes: headBytes + whole.bytes + count - 1 + utf8Length(tail) };
  });
}

/**
 * The receiver's half: joins the parts of the one transaction it needs next (log position `head` + 1). Parts of
 * any other position are dropped (the sender sends them again after the next acknowledgement); a part that
 * contradicts the ones held (another epoch or count) starts that position again.
 */
export class Reassembly {
  /** At most this many characters held for one transaction (at most its UTF-8 bytes). */
  readonly #limit: number;
  #position = 0;
  #epoch = 0;
  #texts: Array<string | undefined> = [];
  #held = 0;
  #chars = 0;

  /**
   * `maxBytes`: the largest transaction the receiver takes (`MAX_OBJECT_TRANSACTION_BYTES` on a Durable Object);
   * nothing larger is held while its parts arrive. Default `MAX_TRANSACTION_BYTES`.
   */
  constructor(maxBytes: number = MAX_TRANSACTION_BYTES) {
    this.#limit = Math.min(maxBytes, MAX_TRANSACTION_BYTES);
  }

  /**
   * Takes `part` for a copy at `head`; returns the transaction's JSON text once every part is there.
   * `FollowMessageRefused` (`size`) for a transaction past the limit or `MAX_PARTS`.
   */
  add(part: BatchPart, head: number): string | undefined {
    if (part.position !== head + 1) return undefined;
    if (part.count > MAX_PARTS || part.index >= part.count)
      throw new FollowMessageRefused("shape", `part ${part.index} of ${part.count} (at most ${MAX_PARTS} parts)`);
    if (part.position !== this.#position || part.epoch !== this.#epoch || part.count !== this.#texts.length) this.#reset(part);
    if (this.#texts[part.index] === undefined) {
      if (this.#chars + part.text.length > this.#limit) {
        this.#reset(part);
        throw new FollowMessageRefused("size", `a transaction of more than ${this.#limit} bytes`);
      }
      this.#texts[part.index] = part.text;
      this.#held++;
      this.#chars += part.text.length;
    }
    if (this.#held < this.#texts.length) return undefined;
    const text = this.#texts.join("");
    this.#reset({ position: 0, epoch: 0, count: 0 });
    return text;
  }

  #reset(part: Pick<BatchPart, "position" | "epoch" | "count">): void {
    this.#position = part.position;
    this.#epoch = part.epoch;
    this.#texts = new Array<string | undefined>(part.count).fill(undefined);
    this.#held = 0;
    this.#chars = 0;
  }
}
