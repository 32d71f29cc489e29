/** JSON values as stored: everything the harness persists must be one of these. */
export type Json = null | boolean | number | string | JsonArray | JsonObject;
/**
 * Json's composites are interfaces, not inline types: a recursive type through interfaces is one TypeScript
 * can map lazily, so the Workers runtime's RPC types (`Rpc.Stubify`, `Serializable`) type a stub's methods
 * that take or return Json (`getTask`, `inspect`, `query`) instead of failing with "excessively deep".
 */
export interface JsonArray extends Array<Json> {}
export interface JsonObject {
  [key: string]: Json;
}

/**
 * Deep equality of JSON values; key order is ignored, arrays compare by position. Iterative: a stored value
 * of any depth compares without growing the call stack.
 */
export function jsonEqual(a: unknown, b: unknown): boolean {
  // Pairs of members still to compare, made only when two members are distinct objects (decision 0077: the
  // no-progress check compares two checkpoints after every phase, most often of primitive members only).
  let pairs: unknown[] | undefined;
  let left = a;
  let right = b;
  for (;;) {
    if (left !== right) {
      if (!isObject(left) || !isObject(right)) return false;
      if (Array.isArray(left) !== Array.isArray(right)) return false;
      if (Array.isArray(left)) {
        const other = right as unknown[];
        if (left.length !== other.length) return false;
        for (let index = 0; index < left.length; index++) {
          const value = left[index];
          const otherValue = other[index];
          if (value === otherValue) continue;
          if (!isObject(value) || !isObject(otherValue)) return false;
          (pairs ??= []).push(value, otherValue);
        }
      } else {
        const l = left as Record<string, unknown>;
        const r = right as Record<string, unknown>;
        // Members that are undefined do not count (JSON drops them). Counted, not filtered into new arrays, and
        // walked with for…in over own keys only (the set Object.keys names): no key array per object.
        let defined = 0;
        for (const key in l) {
          if (!Object.hasOwn(l, key)) continue;
          const value = l[key];
          if (value === undefined) continue;
          if (!Object.hasOwn(r, key)) return false;
          defined++;
          const otherValue = r[key];
          if (value === otherValue) continue;
          if (!isObject(value) || !isObject(otherValue)) return false;
          (pairs ??= []).push(value, otherValue);
        }
        if (defined !== definedMembers(r)) return false;
      }
    }
    if (pairs === undefined || pairs.length === 0) return true;
    right = pairs.pop();
    left = pairs.pop();
  }
}

function isObject(value: unknown): value is object {
  return typeof value === "object" && value !== null;
}

function definedMembers(object: Record<string, unknown>): number {
  let count = 0;
  for (const key in object) if (Object.hasOwn(object, key) && object[key] !== undefined) count++;
  return count;
}

/**
 * A detached copy, equal to `JSON.parse(JSON.stringify(value))`; also proves the value is JSON (throws on
 * cycles, BigInt). Plain data — what checkpoints, memos and documents almost always are — is copied directly
 * (a checkpoint is copied on every step); anything JSON would transform (`toJSON`, a class instance, an
 * `undefined` member, a non-finite number, a `__proto__` key) takes the round trip itself. Deep plain data is
 * copied without recursion (a stored value of any depth copies; a cycle throws the round trip's TypeError).
 */
export function cloneJson<T>(value: T): T {
  return measuredClone(value, { depth: 0, low: 0, high: 0, freeze: false });
}

/**
 * What `measuredClone` learns while it copies: levels of nesting, and a lower and an upper bound of the
 * value's size as UTF-8 JSON (a string of n units is n + 2 to 6n + 2 bytes). `depth` is -1 when the copy
 * took the round trip (then nothing was measured). With `freeze` every object of the copy is frozen as it is
 * made: a deep-frozen copy without a second walk (`deepFreeze` of a fresh copy visits every member again).
 */
export interface CopySize {
  depth: number;
  low: number;
  high: number;
  freeze: boolean;
}

/** `cloneJson`, measuring the value into `size` on the way (the limits check of every boundary, src/limits.ts). */
export function measuredClone<T>(value: T, size: CopySize): T {
  if (value === undefined) return value;
  const copy = copyPlain(value, 0, size);
  if (copy !== ROUND_TRIP) return copy as T;
  const result = JSON.parse(JSON.stringify(value));
  size.depth = -1;
  return size.freeze ? deepFreeze(result) : result;
}

/** Returned by `copyPlain` where only the JSON round trip gives the exact answer. */
const ROUND_TRIP: unique symbol = Symbol("round trip");

/** The most bytes one JavaScript number takes as JSON (`-1.2345678901234567e-308`). */
const NUMBER_BYTES = 24;

function copyPlain(value: unknown, depth: number, size: CopySize): unknown {
  switch (typeof value) {
    case "string":
      size.low += value.length + 2;
      size.high += value.length * 6 + 2; // a control character is \u00XX
      return value;
    case "boolean":
      size.low += 4;
      size.high += 5;
      return value;
    case "number":
      size.low += 1;
      size.high += NUMBER_BYTES;
      return Number.isFinite(value) ? (value === 0 ? 0 : value) : ROUND_TRIP; // -0 becomes 0, as in JSON
    case "object": {
      if (value === null) {
        size.low += 4;
        size.high += 4;
        return null;
      }
      if (depth > 32) return copyDeep(value, depth, size); // bounded recursion, then an explicit stack
      if (typeof (value as { toJSON?: unknown }).toJSON === "function") return ROUND_TRIP;
      if (depth >= size.depth) size.depth = depth + 1;
      if (Array.isArray(value)) {
        const out: unknown[] = new Array(value.length);
        size.low += value.length + (value.length === 0 ? 2 : 1); // brackets and commas
        size.high += value.length + (value.length === 0 ? 2 : 1);
        for (let index = 0; index < value.length; index++) {
          const item = copyPlain(value[index], depth + 1, size);
          if (item === ROUND_TRIP) return ROUND_TRIP;
          out[index] = item;
        }
        return size.freeze ? Object.freeze(out) : out;
      }
      const prototype = Object.getPrototypeOf(value);
      if (prototype !== Object.prototype && prototype !== null) return ROUND_TRIP;
      const out: Record<string, unknown> = {};
      size.low += 1; // {} is 2 bytes and n members have n - 1 commas: counting 4 per member, start at 1
      size.high += 2;
      // for…in with an own-key test, not Object.keys: no array of keys per object (the order is the same for a plain
      // object; an inherited enumerable key is skipped, as Object.keys skips it).
      for (const key in value) {
        if (!Object.hasOwn(value, key)) continue;
        if (key === "__proto__") return ROUND_TRIP;
        size.low += key.length + 4;
        size.high += key.length * 6 + 4;
        const item = copyPlain((value as Record<string, unknown>)[key], depth + 1, size);
        if (item === ROUND_TRIP) return ROUND_TRIP;
        out[key] = item;
      }
      return size.freeze ? Object.freeze(out) : out;
    }
    default:
      return ROUND_TRIP; // undefined, a function, a symbol or a BigInt inside: JSON drops, nulls or throws
  }
}

/** One object being copied by `copyDeep`: its source, its copy, and the next member to copy. */
interface CopyFrame {
  source: Record<string, unknown>;
  target: Record<string, unknown>;
  keys: string[] | undefined;
  index: number;
  depth: number;
}

/** `copyPlain` with an explicit stack, for what lies below its recursion bound; a cycle throws as JSON does. */
function copyDeep(value: object, depth: number, size: CopySize): unknown {
  const path = new Set<object>();
  const frames: CopyFrame[] = [];
  const open = (source: object, depth: number): object | typeof ROUND_TRIP => {
    if (path.has(source)) throw new TypeError("Converting circular structure to JSON");
    if (typeof (source as { toJSON?: unknown }).toJSON === "function") return ROUND_TRIP;
    let keys: string[] | undefined;
    let target: object;
    if (Array.isArray(source)) {
      target = new Array(source.length);
      size.low += source.length + (source.length === 0 ? 2 : 1);
      size.high += source.length + (source.length === 0 ? 2 : 1);
    } else {
      const prototype = Object.getPrototypeOf(source);
      if (prototype !== Object.prototype && prototype !== null) return ROUND_TRIP;
      keys = Object.keys(source);
      if (keys.includes("__proto__")) return ROUND_TRIP;
      target = {};
      size.low += 1;
      size.high += 2;
      for (const key of keys) {
        size.low += key.length + 4;
        size.high += key.length * 6 + 4;
      }
    }
    if (depth >= size.depth) size.depth = depth + 1;
    path.add(source);
    frames.push({ source: source as Record<string, unknown>, target: target as Record<string, unknown>, keys, index: 0, depth });
    return target;
  };
  const root = open(value, depth);
  if (root === ROUND_TRIP) return ROUND_TRIP;
  while (frames.length > 0) {
    const frame = frames[frames.length - 1] as CopyFrame;
    const length = frame.keys ? frame.keys.length : (frame.source as unknown as unknown[]).length;
    if (frame.index === length) {
      frames.pop();
      path.delete(frame.source);
      if (size.freeze) Object.freeze(frame.target);
      continue;
    }
    const key = frame.keys ? (frame.keys[frame.index] as string) : String(frame.index);
    frame.index++;
    const item = frame.source[key];
    const copy = typeof item === "object" && item !== null ? open(item, frame.depth + 1) : copyPlain(item, 0, size);
    if (copy === ROUND_TRIP) return ROUND_TRIP;
    frame.target[key] = copy;
  }
  return root;
}

/**
 * Freezes a JSON value in place, skipping subtrees that are frozen already — records share unchanged parts
 * with their predecessors, so freezing a new record touches only what is new. Committed records are frozen
 * so that phases can be handed the committed record itself instead of a copy. Iterative: any depth freezes.
 */
export function deepFreeze<T>(value: T): T {
  if (typeof value !== "object" || value === null || Object.isFrozen(value)) return value;
  Object.freeze(value);
  // A stack only below the first level: a new record usually brings one or two new objects (its state).
  let pending: object[] | undefined;
  for (let object = value as Record<string, unknown>; ; object = pending.pop() as Record<string, unknown>) {
    // for…in, not Object.keys: no array of keys per object (decision 0105: 10,000 records frozen at a reload's open
    // in 0.6 of the time). An inherited key is skipped, as Object.keys skips it.
    for (const key in object) {
      const member = object[key];
      if (typeof member !== "object" || member === null || !Object.hasOwn(object, key) || Object.isFrozen(member)) continue;
      Object.freeze(member);
      (pending ??= []).push(member);
    }
    if (pending === undefined || pending.length === 0) return value;
  }
}
