/**
 * Errors across a boundary as the library's own classes. `serializeError` keeps the name, the message and the
 * fields a class adds (`ConversationBusy.conversationId`, `SchemaTooNew.found`, …) as plain data;
 * `deserializeError` rebuilds an instance of the class of that name, so `instanceof ReadOnlySession` holds on
 * the page. Comlink uses it through a transfer handler (src/browser/comlink.ts); a message transport sends
 * the serialized form as it is.
 */

import { errorMessage } from "../base/error-message.ts";
import { cloneJson, type Json } from "../base/json.ts";
import * as errors from "../errors.ts";
import { DurableError } from "../errors.ts";
import type { ErrorShape } from "./protocol.ts";

export interface SerializedError extends ErrorShape {
  stack?: string;
  /** The host's own "not open" while it waits for the lock: the database another place has open (`notOpen`). */
  hostWaitingFor?: string;
}

/**
 * Marks the host's own "not open" (status-parts.ts `notOpen`, decision 0142) with the database it waits for. A symbol,
 * carried by its own wire field: an app's error with a field `waitingFor` is no such answer (review of 0142, L2).
 */
const WAITING_FOR = Symbol("hostWaitingFor");

export function markWaitingFor<E extends Error>(error: E, database: string): E {
  Object.defineProperty(error, WAITING_FOR, { value: database });
  return error;
}

/** The database the host's own "not open" names, if `error` is that answer (here or across the wire). */
export function hostWaitingFor(error: unknown): string | undefined {
  const value = typeof error === "object" && error !== null ? (error as { [WAITING_FOR]?: unknown })[WAITING_FOR] : undefined;
  return typeof value === "string" ? value : undefined;
}

type ErrorClass = new (...args: never[]) => Error;

/** The library's classes by their stable `name` (which is also the name each is exported under), and the standard ones. */
const CLASSES = new Map<string, ErrorClass>();
for (const [name, value] of Object.entries(errors)) {
  if (typeof value === "function" && (value === DurableError || value.prototype instanceof DurableError))
    CLASSES.set(name, value as ErrorClass);
}
for (const standard of [Error, TypeError, RangeError, SyntaxError, ReferenceError]) CLASSES.set(standard.name, standard);

/** Members an error's details never set: its own text, and `__proto__` (assigned, it would replace the prototype). */
const NOT_DETAILS = new Set(["name", "message", "stack", "cause", "__proto__"]);

/** Never throws: a thrown value that is not an Error (`{ toString: null }`, a BigInt) gets a message too (errorMessage). */
export function serializeError(error: unknown): SerializedError {
  if (!(error instanceof Error)) return { name: "Error", message: errorMessage(error) };
  const serialized: SerializedError = { name: textOr(error.name, "Error"), message: errorMessage(error) };
  const details: Record<string, Json> = {};
  for (const [key, value] of Object.entries(error)) {
    if (NOT_DETAILS.has(key)) continue;
    const json = toJson(value);
    if (json !== undefined) details[key] = json;
  }
  if (Object.keys(details).length > 0) serialized.details = details;
  if (typeof error.stack === "string" && error.stack) serialized.stack = error.stack;
  const waitingFor = hostWaitingFor(error);
  if (waitingFor !== undefined) serialized.hostWaitingFor = waitingFor;
  return serialized;
}

/**
 * The error `serialized` names, as an instance of its class. What crossed a wire is a stranger's (a holder's answer
 * at the object, say): a name or message that is not text is replaced, and a detail is kept only when it shadows
 * nothing the error has (`__proto__`, `toString`, `constructor`, `message` …), so the result is always an Error of
 * that class that turns into text.
 */
/** An error as a status carries it (`failed`, a `reconnecting` that says why): its shape, without the stack. */
export function shapeOf(error: unknown): ErrorShape {
  const { stack: _stack, ...shape } = serializeError(error);
  return shape;
}

export function deserializeError(given: SerializedError): Error {
  // Not an object at all (a frame's `error: null`): an Error still, never a TypeError reading its name (decision 0114).
  const serialized: Partial<SerializedError> = typeof given === "object" && given !== null ? given : {};
  const name = textOr(serialized.name, "Error");
  const errorClass = CLASSES.get(name) ?? Error;
  // A real Error with the class's prototype, without running the class's constructor: the classes build their
  // message from arguments, and here the message is given.
  const error = Reflect.construct(Error, [textOr(serialized.message, "(the error's message was not text)")], errorClass) as Error;
  const details: unknown = serialized.details;
  if (typeof details === "object" && details !== null && !Array.isArray(details)) {
    for (const [key, value] of Object.entries(details)) {
      if (NOT_DETAILS.has(key) || key in error) continue;
      Object.defineProperty(error, key, { value, enumerable: true, writable: true, configurable: true });
    }
  }
  error.name = name;
  if (typeof serialized.stack === "string" && serialized.stack)
    Object.defineProperty(error, "stack", { value: serialized.stack, writable: true, configurable: true });
  if (typeof serialized.hostWaitingFor === "string") markWaitingFor(error, serialized.hostWaitingFor);
  return error;
}

function textOr(value: unknown, fallback: string): string {
  return typeof value === "string" ? value : fallback;
}

/** A field as JSON, or undefined when it has none (a function, a cycle). */
function toJson(value: unknown): Json | undefined {
  try {
    return cloneJson(value) as Json | undefined;
  } catch {
    return undefined;
  }
}
