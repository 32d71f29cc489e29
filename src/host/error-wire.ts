/**
 * Errors across a boundary as the library's own classes. `serializeError` keeps the name, the message and the
 * fields a class adds (`ConversationBusy.conversationId`, `SchemaTooNew.found`, …) as plain data;
 * `deserializeError` rebuilds an instance of the class of that name, so `instanceof ReadOnlySession` holds on
 * the page. Comlink uses it through a transfer handler (src/browser/comlink.ts); a message transport sends
 * the serialized form as it is.
 */

import { cloneJson, type Json } from "../base/json.ts";
import * as errors from "../errors.ts";
import { DurableError } from "../errors.ts";
import type { ErrorShape } from "./protocol.ts";

export interface SerializedError extends ErrorShape {
  stack?: string;
}

type ErrorClass = new (...args: never[]) => Error;

/** The library's classes by their stable `name` (which is also the name each is exported under), and the standard ones. */
const CLASSES = new Map<string, ErrorClass>();
for (const [name, value] of Object.entries(errors)) {
  if (typeof value === "function" && (value === DurableError || value.prototype instanceof DurableError))
    CLASSES.set(name, value as ErrorClass);
}
for (const standard of [Error, TypeError, RangeError, SyntaxError, ReferenceError]) CLASSES.set(standard.name, standard);

export function serializeError(error: unknown): SerializedError {
  if (!(error instanceof Error)) return { name: "Error", message: String(error) };
  const serialized: SerializedError = { name: error.name, message: error.message };
  const details: Record<string, Json> = {};
  for (const [key, value] of Object.entries(error)) {
    if (key === "name" || key === "message" || key === "stack" || key === "cause") continue;
    const json = toJson(value);
    if (json !== undefined) details[key] = json;
  }
  if (Object.keys(details).length > 0) serialized.details = details;
  if (error.stack) serialized.stack = error.stack;
  return serialized;
}

export function deserializeError(serialized: SerializedError): Error {
  const errorClass = CLASSES.get(serialized.name) ?? Error;
  // A real Error with the class's prototype, without running the class's constructor: the classes build their
  // message from arguments, and here the message is given.
  const error = Reflect.construct(Error, [serialized.message], errorClass) as Error;
  Object.assign(error, serialized.details ?? {});
  error.name = serialized.name;
  if (serialized.stack) Object.defineProperty(error, "stack", { value: serialized.stack, writable: true, configurable: true });
  return error;
}

/** A field as JSON, or undefined when it has none (a function, a cycle). */
function toJson(value: unknown): Json | undefined {
  try {
    return cloneJson(value) as Json | undefined;
  } catch {
    return undefined;
  }
}
