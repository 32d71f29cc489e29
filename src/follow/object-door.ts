/**
 * The object's door on a follow link (object-end.ts): the app's `authorize` asked safely (false, or a thrown
 * `NotAuthorized`: refused; any other throw, the library's errors included: `AuthorizeFailed`, retryable — decision 0117
 * after review and its second review),
 * the place a call speaks for, errors as the tab receives them, and the answer to the wire's hello (which needs no door).
 */
import type { Json } from "../base/json.ts";
import { safely } from "../base/safely.ts";
import { AuthorizeFailed, NotAuthorized } from "../errors.ts";
import { serializeError } from "../host/error-wire.ts";
import type { ErrorShape } from "../host/protocol.ts";
import { COPY } from "./copy-writes.ts";
import type { FollowAction, FollowAuthorize, FollowRequest } from "./object-end-options.ts";
import { PAGE_CALLS, type PageCallRelay } from "./page-call-relay.ts";
import { SERVER_TOOLS_TOPIC } from "./server-call-messages.ts";
import type { ObjectMessage } from "./wire.ts";
import { answerHello } from "./wire-version.ts";

/** Whether the hook allows `action`: true, or the error that answers it (`NotAuthorized`, or `AuthorizeFailed`). */
export async function allowed(
  authorize: FollowAuthorize,
  action: FollowAction,
  place?: string,
  request?: FollowRequest,
): Promise<true | Error> {
  try {
    if ((await (request === undefined ? authorize(action, place) : authorize(action, place, request))) === true) return true;
  } catch (error) {
    // As the object's page doors (doors.ts): a thrown `NotAuthorized` is answered as thrown; any other throw (the
    // library's errors too) is the app's bug or its store down — no refusal (a pushing tab sends again), its message
    // kept here (before: refused).
    if (error instanceof NotAuthorized) return error;
    return new AuthorizeFailed(action, { cause: error });
  }
  return notAuthorized(action);
}

/**
 * `authorize`, telling `failed` the hook's own error when it throws (or rejects with) anything but `NotAuthorized` —
 * what `allowed` answers `AuthorizeFailed` — then throwing it on as before (decision 0117, later). Told once per failed
 * ask, wherever it is asked (where the object answers nothing too: an ack, the pusher's registration; decision 0123),
 * never for a refusal. A throw of `failed` is its own.
 */
export function tellingFailures(
  authorize: FollowAuthorize,
  failed: ((error: unknown, action: FollowAction) => void) | undefined,
): FollowAuthorize {
  if (!failed) return authorize;
  return async (action, place, request) => {
    try {
      return await (request === undefined ? authorize(action, place) : authorize(action, place, request));
    } catch (error) {
      if (!(error instanceof NotAuthorized)) safely(() => failed(error, action));
      throw error;
    }
  };
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

function notAuthorized(action: string): NotAuthorized {
  return new NotAuthorized(action, "the object's follow.authorize refused this caller.");
}

/**
 * The answer to call `id` of `wire.hello(version)`, a tab's first call on a connection (decision 0046): this object's
 * version, or `FollowVersionMismatch`. It tells nothing but the version, so no door is asked.
 */
export function answerHelloCall(id: string, args: readonly Json[]): ObjectMessage {
  try {
    return { type: "answer", id, value: answerHello(args[0] as number) };
  } catch (error) {
    return { type: "answer", id, error: errorShape(error) };
  }
}

/** The answer to `follow.from` for this object's own place, which no tab follows (the object never follows itself). */
export function ownPlaceAnswer(id: string, place: string): ObjectMessage {
  return {
    type: "answer",
    id,
    error: errorShape(new NotAuthorized("follow.from", `the place ${JSON.stringify(place)} is this object's own.`)),
  };
}

/**
 * What the door is told of a call: the place it speaks for (its arguments', or for page calls `connectionPlace`, the
 * place its connection follows or spoke for), and for a page call the conversation the holder's harness has it in
 * (decision 0051). For a following tab's write (`copy.submit`, `copy.decide`, `copy.abortConversation`, decisions 0096, 0097): the place its connection follows and
 * the conversation it names (the one the caller asks to write to: grant it per conversation).
 */
export function doorOf(
  topic: string,
  method: string,
  args: readonly Json[],
  connectionPlace: string | undefined,
  pageCalls: Pick<PageCallRelay, "conversationOf">,
): { place?: string; request?: FollowRequest } {
  if (topic === COPY) {
    const conversationId = args[0];
    return {
      ...(connectionPlace === undefined ? {} : { place: connectionPlace }),
      request: typeof conversationId === "number" ? { conversationId } : {},
    };
  }
  if (topic !== PAGE_CALLS) {
    const place = namedPlace(topic, args);
    return place === undefined ? {} : { place };
  }
  const conversationId = pageCalls.conversationOf(method, args);
  return {
    ...(connectionPlace === undefined ? {} : { place: connectionPlace }),
    request: conversationId === undefined ? {} : { conversationId },
  };
}
