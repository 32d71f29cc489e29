/**
 * The object's door on a follow link (object-end.ts): the app's `authorize` asked safely (false or a throw: refused),
 * the place a call speaks for, and errors as the tab receives them.
 */
import type { Json } from "../base/json.ts";
import { NotAuthorized } from "../errors.ts";
import { serializeError } from "../host/error-wire.ts";
import type { ErrorShape } from "../host/protocol.ts";
import type { FollowAction, FollowAuthorize, FollowRequest } from "./object-end-options.ts";
import { SERVER_TOOLS_TOPIC } from "./server-call-messages.ts";

export async function allowed(authorize: FollowAuthorize, action: FollowAction, place?: string, request?: FollowRequest): Promise<boolean> {
  try {
    return (await (request === undefined ? authorize(action, place) : authorize(action, place, request))) === true;
  } catch {
    return false;
  }
}

/**
 * The place a call speaks for: the first argument of the lease's and the follow topic's methods (wire.ts), and the
 * `place` of a server tool's request — the one `ServerCalls` checks against the lease's holder, so a caller bound to
 * another place must not name the holder there and have the object run the holder's server tools.
 */
export function namedPlace(topic: string, args: readonly Json[]): string | undefined {
  const first = args[0];
  if (topic === SERVER_TOOLS_TOPIC) {
    const place = typeof first === "object" && first !== null && !Array.isArray(first) ? first.place : undefined;
    return typeof place === "string" ? place : undefined;
  }
  return (topic === "lease" || topic === "follow") && typeof first === "string" ? first : undefined;
}

/** An error as the tab receives it: its class's name, message and fields, never the object's stack. */
export function errorShape(error: unknown): ErrorShape {
  const { stack: _stack, ...shape } = serializeError(error);
  return shape;
}

export function notAuthorized(action: string): NotAuthorized {
  return new NotAuthorized(action, "the object's follow.authorize refused this caller.");
}
