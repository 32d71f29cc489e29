/**
 * Shapes of the values callers send, as small checks that say what is wrong with a value, or nothing: the
 * argument schemas of the host's protocol (src/host/protocol.ts) and the agent's drafts are built from them.
 * A check walks its schema, never a stranger's data beyond it: JSON-typed values (a task input, an app
 * method's arguments) are checked by an iterative walk with a depth bound, so no shape a caller sends can
 * overflow the stack. Hand-written so the edge bundle carries no schema library.
 */

import { MAX_DEPTH_LIMIT, refuseTooDeep, walkJson } from "./limits.ts";

/**
 * How deep a JSON value from a caller may nest (arrays and objects): as deep as any harness accepts
 * (`settings.limits.maxDepth` is at most this); below it the harness's own limits decide (`InvalidInput`).
 */
export const MAX_JSON_DEPTH = MAX_DEPTH_LIMIT;

/** A short description of a value for an error message (never the value itself: it may be huge). */
export function describeValue(value: unknown): string {
  if (value === null) return "null";
  if (Array.isArray(value)) return "an array";
  if (typeof value === "object") {
    const prototype = Object.getPrototypeOf(value);
    const name: unknown = prototype && prototype !== Object.prototype ? prototype.constructor?.name : undefined;
    return typeof name === "string" && name ? `a ${name}` : "an object"; // a stranger's prototype may name anything
  }
  if (typeof value === "string") return value.length > 40 ? `a string of ${value.length} characters` : JSON.stringify(value);
  if (typeof value === "number" || typeof value === "boolean") return String(value);
  return typeof value === "undefined" ? "undefined" : `a ${typeof value}`;
}

/**
 * What keeps `value` from being JSON that round-trips unchanged — a function, a symbol, a BigInt, a
 * non-finite number, `undefined` in an array, a class instance, a cycle, nesting deeper than `maxDepth` —
 * or undefined. An object member that is `undefined` is allowed (JSON leaves it out, as the harness does).
 */
export function jsonProblem(value: unknown, path: string, maxDepth = MAX_JSON_DEPTH): string | undefined {
  // Cheap insurance against a value that is wide and shared rather than deep (a DAG counted per path).
  const { fault } = walkJson(value, { maxDepth, maxMembers: 1_000_000 });
  if (!fault) return undefined;
  const at = path + fault.path.map((key) => (typeof key === "number" ? `[${key}]` : `.${key}`)).join("");
  switch (fault.kind) {
    case "depth":
      return `${at} nests deeper than ${maxDepth} levels`;
    case "members":
      return `${path} has more than 1,000,000 members`;
    case "cycle":
      return `${at} must be JSON; it refers to itself`;
    case "toJSON":
      return `${at} must be JSON; it has its own toJSON`;
    default:
      return `${at} must be JSON; got ${describeValue(fault.value)}`;
  }
}

/** What is wrong with `value`, named at `path` ("argument 2", "options.key"), or undefined when it is well formed. */
export type Check = (value: unknown, path: string) => string | undefined;

/** A whole argument list: what is wrong with it, or undefined. */
export type ArgsCheck = (args: readonly unknown[]) => string | undefined;

const got = (value: unknown) => `got ${describeValue(value)}`;

/** A positive safe integer: a task, conversation, submission or entry id. */
export const id: Check = (value, path) =>
  Number.isSafeInteger(value) && (value as number) > 0 ? undefined : `${path} must be a positive integer id; ${got(value)}`;

/** A safe integer in [min, max]. */
export const integer =
  (min: number, max: number): Check =>
  (value, path) =>
    Number.isSafeInteger(value) && (value as number) >= min && (value as number) <= max
      ? undefined
      : `${path} must be an integer from ${min} to ${max}; ${got(value)}`;

/** A string (non-empty unless `empty`), at most `max` characters. */
export const text =
  (options: { empty?: boolean; max?: number } = {}): Check =>
  (value, path) => {
    if (typeof value !== "string") return `${path} must be a string; ${got(value)}`;
    if (!options.empty && value === "") return `${path} must not be empty`;
    if (options.max !== undefined && value.length > options.max) return `${path} must be at most ${options.max} characters`;
    return undefined;
  };

/**
 * Any JSON value (shape bounded by `jsonProblem`). Deeper than any harness accepts is not a wrong argument
 * but one past the limit: `InvalidInput` (maxDepth), as the harness itself would refuse it.
 */
export const json: Check = (value, path) => {
  refuseTooDeep(value, () => path);
  return jsonProblem(value, path);
};

/** A JSON scalar: what an SQL parameter can be. */
export const scalar: Check = (value, path) =>
  value === null || typeof value === "string" || typeof value === "boolean" || (typeof value === "number" && Number.isFinite(value))
    ? undefined
    : `${path} must be a string, a finite number, a boolean or null; ${got(value)}`;

/** true or false. */
export const flag: Check = (value, path) => (typeof value === "boolean" ? undefined : `${path} must be true or false; ${got(value)}`);

/** One of the given strings. */
export const literal =
  (...values: readonly string[]): Check =>
  (value, path) =>
    typeof value === "string" && values.includes(value)
      ? undefined
      : `${path} must be ${values.map((v) => JSON.stringify(v)).join(" or ")}; ${got(value)}`;

/** `check`, or null. */
export const nullable =
  (check: Check): Check =>
  (value, path) =>
    value === null ? undefined : check(value, path);

/** An array of at most `max` items, each passing `item`. */
export const list =
  (item: Check, max: number): Check =>
  (value, path) => {
    if (!Array.isArray(value)) return `${path} must be an array; ${got(value)}`;
    if (value.length > max) return `${path} must have at most ${max} items; got ${value.length}`;
    for (let index = 0; index < value.length; index++) {
      const problem = item(value[index], `${path}[${index}]`);
      if (problem) return problem;
    }
    return undefined;
  };

/**
 * A plain object with exactly these fields (own properties only; a field may be absent, or undefined, when
 * its check is in `optional`). A field the schema does not know is refused: it would be ignored, or stored.
 */
export const record =
  (required: Record<string, Check>, optional: Record<string, Check> = {}): Check =>
  (value, path) => {
    if (typeof value !== "object" || value === null || Array.isArray(value)) return `${path} must be an object; ${got(value)}`;
    const prototype = Object.getPrototypeOf(value);
    if (prototype !== Object.prototype && prototype !== null) return `${path} must be a plain object; ${got(value)}`;
    const fields = value as Record<string, unknown>;
    for (const key of Object.keys(fields)) {
      if (!Object.hasOwn(required, key) && !Object.hasOwn(optional, key)) return `${path} has no field ${JSON.stringify(key)}`;
    }
    for (const [key, check] of Object.entries(required)) {
      const problem = check(Object.hasOwn(fields, key) ? fields[key] : undefined, `${path}.${key}`);
      if (problem) return problem;
    }
    for (const [key, check] of Object.entries(optional)) {
      if (!Object.hasOwn(fields, key) || fields[key] === undefined) continue;
      const problem = check(fields[key], `${path}.${key}`);
      if (problem) return problem;
    }
    return undefined;
  };

/**
 * An argument list: the `required` checks in order, then `optional` ones (absent or undefined: the method's
 * default), then `rest` for every further argument (none allowed without it).
 */
export function args(required: readonly Check[], optional: readonly Check[] = [], rest?: Check): ArgsCheck {
  return (values) => {
    if (!Array.isArray(values)) return `the arguments must be an array; ${got(values)}`;
    const fixed = required.length + optional.length;
    if (values.length < required.length)
      return `it takes ${required.length} argument${required.length === 1 ? "" : "s"} or more; got ${values.length}`;
    if (!rest && values.length > fixed) return `it takes at most ${fixed} argument${fixed === 1 ? "" : "s"}; got ${values.length}`;
    for (let index = 0; index < values.length; index++) {
      const value = values[index];
      const check = index < required.length ? required[index] : index < fixed ? optional[index - required.length] : rest;
      if (index >= required.length && index < fixed && value === undefined) continue;
      const problem = check!(value, `argument ${index + 1}`);
      if (problem) return problem;
    }
    return undefined;
  };
}

/** No arguments. */
export const none: ArgsCheck = args([]);

/** The first of `checks` that `value` passes; its problem is the last one's (list the likeliest shape last). */
export const either =
  (...checks: readonly Check[]): Check =>
  (value, path) => {
    let problem: string | undefined;
    for (const check of checks) {
      problem = check(value, path);
      if (!problem) return undefined;
    }
    return problem;
  };

/** An object told apart by its string field `tag` (`type`, `role`): the check of that tag's shape. */
export const variant =
  (tag: string, shapes: Record<string, Check>): Check =>
  (value, path) => {
    const found =
      typeof value === "object" && value !== null && Object.hasOwn(value, tag) ? (value as Record<string, unknown>)[tag] : undefined;
    if (typeof found === "string" && Object.hasOwn(shapes, found)) return shapes[found]!(value, path);
    const names = Object.keys(shapes).map((name) => JSON.stringify(name));
    return `${path} must be an object whose ${tag} is ${names.join(" or ")}; ${typeof value === "object" && value !== null ? `${tag} is ${describeValue(found)}` : got(value)}`;
  };
