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

/** Deep equality of JSON values; key order is ignored, arrays compare by position. */
export function jsonEqual(a: unknown, b: unknown): boolean {
  if (a === b) return true;
  if (typeof a !== "object" || typeof b !== "object" || a === null || b === null) return false;
  if (Array.isArray(a) !== Array.isArray(b)) return false;
  if (Array.isArray(a)) {
    const other = b as unknown[];
    return a.length === other.length && a.every((item, index) => jsonEqual(item, other[index]));
  }
  const left = a as Record<string, unknown>;
  const right = b as Record<string, unknown>;
  const keys = Object.keys(left).filter((key) => left[key] !== undefined);
  if (keys.length !== Object.keys(right).filter((key) => right[key] !== undefined).length) return false;
  return keys.every((key) => Object.hasOwn(right, key) && jsonEqual(left[key], right[key]));
}

/**
 * A detached copy, equal to `JSON.parse(JSON.stringify(value))`; also proves the value is JSON (throws on
 * cycles, BigInt). Plain data — what checkpoints, memos and documents almost always are — is copied directly
 * (a checkpoint is copied on every step); anything JSON would transform (`toJSON`, a class instance, an
 * `undefined` member, a non-finite number, a `__proto__` key, deep nesting) takes the round trip itself.
 */
export function cloneJson<T>(value: T): T {
  if (value === undefined) return value;
  const copy = copyPlain(value, 0);
  return (copy === ROUND_TRIP ? JSON.parse(JSON.stringify(value)) : copy) as T;
}

/** Returned by `copyPlain` where only the JSON round trip gives the exact answer. */
const ROUND_TRIP: unique symbol = Symbol("round trip");

function copyPlain(value: unknown, depth: number): unknown {
  switch (typeof value) {
    case "string":
    case "boolean":
      return value;
    case "number":
      return Number.isFinite(value) ? (value === 0 ? 0 : value) : ROUND_TRIP; // -0 becomes 0, as in JSON
    case "object": {
      if (value === null) return null;
      if (depth > 32) return ROUND_TRIP; // and the round trip throws on a cycle
      if (typeof (value as { toJSON?: unknown }).toJSON === "function") return ROUND_TRIP;
      if (Array.isArray(value)) {
        const out: unknown[] = new Array(value.length);
        for (let index = 0; index < value.length; index++) {
          const item = copyPlain(value[index], depth + 1);
          if (item === ROUND_TRIP) return ROUND_TRIP;
          out[index] = item;
        }
        return out;
      }
      const prototype = Object.getPrototypeOf(value);
      if (prototype !== Object.prototype && prototype !== null) return ROUND_TRIP;
      const out: Record<string, unknown> = {};
      for (const key of Object.keys(value)) {
        if (key === "__proto__") return ROUND_TRIP;
        const item = copyPlain((value as Record<string, unknown>)[key], depth + 1);
        if (item === ROUND_TRIP) return ROUND_TRIP;
        out[key] = item;
      }
      return out;
    }
    default:
      return ROUND_TRIP; // undefined, a function, a symbol or a BigInt inside: JSON drops, nulls or throws
  }
}

/**
 * Freezes a JSON value in place, skipping subtrees that are frozen already — records share unchanged parts
 * with their predecessors, so freezing a new record touches only what is new. Committed records are frozen
 * so that phases can be handed the committed record itself instead of a copy.
 */
export function deepFreeze<T>(value: T): T {
  if (typeof value !== "object" || value === null || Object.isFrozen(value)) return value;
  Object.freeze(value);
  for (const key of Object.keys(value)) deepFreeze((value as Record<string, unknown>)[key]);
  return value;
}
