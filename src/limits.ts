import { type CopySize, measuredClone } from "./base/json.ts";
import { InvalidInput } from "./errors.ts";

/**
 * How large a JSON value may be where it enters the harness (a task input, a submission's content, a tool's
 * arguments or result, a checkpoint, memo, document or entry written through a `Tx`, an app method's
 * arguments). Checked before anything commits; a value past a limit is an `InvalidInput` naming the limit.
 */
export interface JsonLimits {
  /** Levels of nesting: `1` is 0 levels, `[1]` is 1, `{ a: [1] }` is 2. */
  maxDepth: number;
  /** Bytes of the value serialized as JSON (UTF-8). */
  maxBytes: number;
}

/** The default nesting limit: far more than data needs, far less than any call stack or SQLite's JSON (1000). */
export const DEFAULT_MAX_DEPTH = 64;
/** The highest `maxDepth` a harness accepts: a stored row stays within SQLite's JSON depth of 1000. */
export const MAX_DEPTH_LIMIT = 512;
/** A stored row nested deeper than this is damaged (SQLite's own JSON functions refuse it too). */
export const STORED_DEPTH_LIMIT = 1000;
/** The default size limit on a Durable Object: a row holds at most 2 MB, and a task's input and checkpoint share one. */
export const DEFAULT_MAX_BYTES_ROW_LIMITED = 1 << 20;
/** The default size limit elsewhere (sqlite-wasm, memory): room for an image or a long file in one value. */
export const DEFAULT_MAX_BYTES = 8 << 20;

/** What a value is, for the message ("The input of a demo.count task"); a function is called only for a refusal. */
export type What = string | (() => string);

const named = (what: What) => (typeof what === "function" ? what() : what);

/**
 * What keeps a value from being plain JSON within a walk's bounds (`walkJson`), and where it is: the keys and
 * indexes from the root (`path`) and the value found there.
 * - `depth`: a container `maxDepth` levels down;
 * - `bytes`: more than `maxBytes` as JSON (known before the walk ends);
 * - `members`: more than `maxMembers` containers (a value shared widely rather than deep);
 * - `cycle`: a container inside itself;
 * - `toJSON`: a container with a `toJSON` method (JSON would call it);
 * - `class`: an object whose prototype is neither `Object.prototype` nor null;
 * - `undefined`: `undefined` in an array (JSON makes it null);
 * - `value`: a non-finite number, a function, a symbol, a BigInt, or `undefined` itself.
 */
export interface JsonFault {
  kind: "depth" | "bytes" | "members" | "cycle" | "toJSON" | "class" | "undefined" | "value";
  path: Array<string | number>;
  value: unknown;
}

/** How far `walkJson` goes: levels of nesting, and optionally bytes as JSON and containers visited. */
export interface JsonBounds {
  maxDepth: number;
  maxBytes?: number;
  maxMembers?: number;
}

/** A value on `walkJson`'s stack, with the way back to the root (read only to name a fault's place). */
interface Frame {
  value: unknown;
  depth: number;
  parent: Frame | undefined;
  key: string | number;
}

/** The most bytes one JavaScript number takes as JSON (`-1.2345678901234567e-308`). */
const NUMBER_BYTES = 24;

/**
 * The one walk of a caller's JSON: the first fault found in `value` (see `JsonFault`), and an
 * upper bound of its size as UTF-8 JSON (`high`; the exact size lies between the lower bound, checked
 * against `maxBytes` on the way, and this). Plain JSON: null, booleans, finite numbers, strings, arrays, and
 * objects whose prototype is `Object.prototype` or null (an `undefined` member is allowed: JSON drops it).
 * Iterative: a value of any depth, width or sharing is answered without growing the call stack.
 */
export function walkJson(value: unknown, bounds: JsonBounds): { fault: JsonFault | undefined; high: number } {
  const { maxDepth, maxBytes = Number.POSITIVE_INFINITY, maxMembers = Number.POSITIVE_INFINITY } = bounds;
  // `leave` marks the end of a container's members: it is no longer an ancestor (a value shared by two
  // members is JSON; a value inside itself is a cycle).
  const stack: Array<Frame | { leave: object }> = [{ value, depth: 0, parent: undefined, key: "" }];
  const open = new Set<object>();
  let members = 0;
  let low = 0;
  let high = 0;
  const fault = (kind: JsonFault["kind"], frame: Frame | undefined, found: unknown = frame?.value) => ({
    fault: { kind, path: pathOf(frame), value: found },
    high,
  });
  while (stack.length > 0) {
    const frame = stack.pop()!;
    if ("leave" in frame) {
      open.delete(frame.leave);
      continue;
    }
    const item = frame.value;
    switch (typeof item) {
      case "string":
        low += item.length + 2;
        high += item.length * 6 + 2; // a control character is \u00XX
        break;
      case "boolean":
        low += 4;
        high += 5;
        break;
      case "number":
        if (!Number.isFinite(item)) return fault("value", frame);
        low += 1;
        high += NUMBER_BYTES;
        break;
      case "object": {
        if (item === null) {
          low += 4;
          high += 4;
          break;
        }
        if (frame.depth >= maxDepth) return fault("depth", frame);
        if (open.has(item)) return fault("cycle", frame);
        if (++members > maxMembers) return fault("members", undefined, value);
        const array = Array.isArray(item);
        if (!array) {
          const prototype = Object.getPrototypeOf(item);
          if (prototype !== Object.prototype && prototype !== null) return fault("class", frame);
        }
        if (typeof (item as { toJSON?: unknown }).toJSON === "function") return fault("toJSON", frame);
        open.add(item);
        stack.push({ leave: item });
        if (array) {
          low += 1 + Math.max(item.length, 1); // brackets and commas
          high += 1 + Math.max(item.length, 1);
          for (let index = item.length - 1; index >= 0; index--) {
            const member = item[index];
            if (member === undefined) return fault("undefined", { value: member, depth: frame.depth + 1, parent: frame, key: index });
            stack.push({ value: member, depth: frame.depth + 1, parent: frame, key: index });
          }
          break;
        }
        low += 1; // {} is 2 bytes, and n members have n - 1 commas: counting one per member, start at 1
        high += 2;
        const keys = Object.keys(item);
        for (let index = keys.length - 1; index >= 0; index--) {
          const key = keys[index]!;
          const member = (item as Record<string, unknown>)[key];
          if (member === undefined) continue;
          low += key.length + 4; // "key": and a comma
          high += key.length * 6 + 4;
          stack.push({ value: member, depth: frame.depth + 1, parent: frame, key });
        }
        break;
      }
      default:
        return fault("value", frame);
    }
    if (low > maxBytes) return fault("bytes", undefined, value);
  }
  return { fault: undefined, high };
}

/** The keys and indexes from the root to `frame` (empty for the root). */
function pathOf(frame: Frame | undefined): Array<string | number> {
  const path: Array<string | number> = [];
  for (let at = frame; at?.parent; at = at.parent) path.push(at.key);
  return path.reverse();
}

/**
 * Refuses a value that is not plain JSON or is past `limits`, with an `InvalidInput` that names `what` and
 * the limit (`walkJson`). A value of any depth (or a cycle) is refused without growing the call stack,
 * after at most `maxBytes` members.
 */
export function checkJson(value: unknown, limits: JsonLimits, what: What = "A value"): void {
  const { fault, high } = walkJson(value, limits);
  if (fault) {
    if (fault.kind === "depth") throw tooDeep(what, limits.maxDepth);
    if (fault.kind === "bytes") throw tooLarge(what, limits.maxBytes, `over ${limits.maxBytes}`);
    throw notJson(what, holds(fault));
  }
  if (high <= limits.maxBytes) return;
  // Rare: close to the limit. Safe to serialize now: the value is plain JSON within maxDepth.
  const bytes = utf8Length(JSON.stringify(value));
  if (bytes > limits.maxBytes) throw tooLarge(what, limits.maxBytes, String(bytes));
}

/** What a value that is not JSON holds, for `notJson`'s message. */
function holds(fault: JsonFault): string {
  const found = fault.value;
  switch (fault.kind) {
    case "cycle":
      return "a reference to itself";
    case "toJSON":
      return Array.isArray(found) ? "an array with a toJSON method" : "an object with a toJSON method";
    case "class":
      return `a ${className(found as object)}`;
    case "undefined":
      return "undefined in an array";
    default:
      if (typeof found === "number") return `the number ${String(found)}`;
      return typeof found === "undefined" ? "undefined" : `a ${typeof found}`;
  }
}

/**
 * The detached copy `cloneJson` makes, refused (as `InvalidInput`) when it is past `limits` or not JSON at
 * all. What every kernel boundary stores. The value is copied first (`toJSON`, dropped members), then checked.
 * `frozen`: the copy is deep-frozen as it is made (a committed record's parts are, decision 0041).
 */
export function admitJson<T>(value: T, limits: JsonLimits, what: What, frozen = false): T {
  // One measure for every admission but one made inside another (a `toJSON` that admits): a step admits its
  // checkpoint, and this saves an object on each (decision 0077). Read into locals and released at once.
  const shared = !sharedSizeTaken;
  let size: CopySize;
  if (shared) {
    sharedSizeTaken = true;
    size = sharedSize;
    size.depth = 0;
    size.low = 0;
    size.high = 0;
    size.freeze = frozen;
  } else size = { depth: 0, low: 0, high: 0, freeze: frozen };
  let copy: T;
  try {
    copy = measuredClone(value, size);
  } catch (error) {
    if (shared) sharedSizeTaken = false;
    // A cycle (TypeError), a BigInt, or a value with toJSON too deep for the round trip (RangeError).
    const reason = error instanceof RangeError ? `nested deeper than the call stack allows` : (error as Error).message;
    throw new InvalidInput(`${named(what)} is not JSON (${reason}); nothing was written.`, "shape", { cause: error });
  }
  const { depth, low, high } = size;
  if (shared) sharedSizeTaken = false;
  if (depth < 0) {
    if (copy !== undefined) checkJson(copy, limits, what); // the round trip's result, not measured on the way
    return copy;
  }
  // Measured while copying: plain JSON, so the fast path needs no second walk.
  if (depth > limits.maxDepth) throw tooDeep(what, limits.maxDepth);
  if (high <= limits.maxBytes) return copy;
  const bytes = low > limits.maxBytes ? low : utf8Length(JSON.stringify(copy));
  if (bytes > limits.maxBytes) throw tooLarge(what, limits.maxBytes, low > limits.maxBytes ? `over ${limits.maxBytes}` : String(bytes));
  return copy;
}

/** `admitJson`'s one reused measure, and whether an admission is using it now. */
const sharedSize: CopySize = { depth: 0, low: 0, high: 0, freeze: false };
let sharedSizeTaken = false;

/**
 * Refuses a value nested deeper than any harness accepts (`MAX_DEPTH_LIMIT`) with `InvalidInput` (maxDepth):
 * on the page before a call is sent (structured clone and JSON overflow the stack on such a value) and at
 * the host before its arguments are checked further. Without recursion; a cycle counts as too deep.
 */
export function refuseTooDeep(value: unknown, what: What): void {
  if (depthExceeds(value, MAX_DEPTH_LIMIT)) {
    throw new InvalidInput(
      `${named(what)} nests deeper than ${MAX_DEPTH_LIMIT} levels, more than any harness accepts (settings.limits.maxDepth); nothing was sent or written. Flatten the value.`,
      "maxDepth",
    );
  }
}

/** `refuseTooDeep` for each argument of a call the page is about to send. */
export function refuseUnsendable(method: string, args: readonly unknown[]): void {
  for (let index = 0; index < args.length; index++) refuseTooDeep(args[index], () => `Argument ${index + 1} of ${method}`);
}

/** True when a parsed stored value nests more than `limit` levels; without recursion. */
export function depthExceeds(value: unknown, limit: number): boolean {
  if (typeof value !== "object" || value === null) return false;
  const values: unknown[] = [value];
  const depths: number[] = [1];
  while (values.length > 0) {
    const item = values.pop() as Record<string, unknown>;
    const depth = depths.pop() as number;
    if (depth > limit) return true;
    const members = Array.isArray(item) ? item : Object.values(item);
    for (const member of members) {
      if (typeof member === "object" && member !== null) {
        values.push(member);
        depths.push(depth + 1);
      }
    }
  }
  return false;
}

/** The first UTF-16 unit that takes more than one UTF-8 byte. */
const NOT_ASCII = /[\u0080-\uffff]/;

/** UTF-8 bytes of a string as `TextEncoder` would encode it (a lone surrogate is U+FFFD, 3 bytes). */
export function utf8Length(text: string): number {
  // Most texts are ASCII (a log row, a push frame): one native scan finds the first unit that is not (decision 0093).
  const first = text.search(NOT_ASCII);
  if (first < 0) return text.length;
  let bytes = text.length;
  for (let index = first; index < text.length; index++) {
    const code = text.charCodeAt(index);
    if (code < 0x80) continue;
    if (code < 0x800) bytes += 1;
    else if (code >= 0xd800 && code <= 0xdbff && index + 1 < text.length) {
      const next = text.charCodeAt(index + 1);
      if (next >= 0xdc00 && next <= 0xdfff) {
        bytes += 2; // 4 bytes for the two units
        index++;
      } else bytes += 2;
    } else bytes += 2;
  }
  return bytes;
}

function tooDeep(what: What, maxDepth: number): InvalidInput {
  return new InvalidInput(
    `${named(what)} is nested deeper than ${maxDepth} levels (limits.maxDepth); nothing was written. Flatten it, or raise settings.limits.maxDepth (at most ${MAX_DEPTH_LIMIT}).`,
    "maxDepth",
  );
}

function tooLarge(what: What, maxBytes: number, size: string): InvalidInput {
  return new InvalidInput(
    `${named(what)} is ${size} bytes as JSON, over ${maxBytes} (limits.maxBytes); nothing was written. Keep large data out of it (a file in the environment, a reference), or raise settings.limits.maxBytes.`,
    "maxBytes",
  );
}

function notJson(what: What, found: string): InvalidInput {
  return new InvalidInput(`${named(what)} is not JSON: it holds ${found}; nothing was written. Pass plain JSON data.`, "shape");
}

function className(value: object): string {
  const name = (value as { constructor?: { name?: unknown } }).constructor?.name;
  return typeof name === "string" && name !== "" ? name : "object with a prototype";
}

/**
 * `text` cut into consecutive slices of at most `maxBytes` UTF-8 bytes each (at least 4), joined back by plain
 * concatenation. A surrogate pair is never cut (a lone half would not survive as UTF-8 text).
 */
export function utf8Slices(text: string, maxBytes: number): string[] {
  if (maxBytes < 4) throw new RangeError(`utf8Slices needs at least 4 bytes per slice, got ${maxBytes}`);
  if (text.length * 3 <= maxBytes) return [text];
  const slices: string[] = [];
  let start = 0;
  let bytes = 0;
  for (let index = 0; index < text.length; ) {
    const code = text.charCodeAt(index);
    const pair = code >= 0xd800 && code <= 0xdbff && index + 1 < text.length && (text.charCodeAt(index + 1) & 0xfc00) === 0xdc00;
    const units = pair ? 2 : 1;
    const size = pair ? 4 : code < 0x80 ? 1 : code < 0x800 ? 2 : 3;
    if (bytes + size > maxBytes) {
      slices.push(text.slice(start, index));
      start = index;
      bytes = 0;
    }
    bytes += size;
    index += units;
  }
  slices.push(text.slice(start));
  return slices;
}
