/**
 * What a harness object answers when something failed: a library error as JSON, never the object's stack
 * (bundle paths), with an HTTP status that says whose move it is.
 */
import { AuthorizeFailed, DurableError, NotAuthorized, NotReady } from "../errors.ts";
import { type SerializedError, serializeError } from "../host/error-wire.ts";

/** A library error for a page: its class, message and details, not the object's stack. */
export function pageError(error: unknown): SerializedError {
  const { stack: _stack, ...shape } = isSerialized(error) ? error : serializeError(error);
  return shape;
}

function isSerialized(error: unknown): error is SerializedError {
  return !(error instanceof Error) && typeof (error as SerializedError | undefined)?.name === "string";
}

/**
 * The answer to a request that failed with `error`: JSON `{ error: { name, message, details? } }`, status 503
 * when it is the harness's failed open (`failedOpen`: the object serves nothing until that is fixed), the app's
 * `authorize` hook failed (`AuthorizeFailed`: try again later) or the object is between its harnesses (`NotReady`, its
 * switch after a hand-back, decision 0139: send it again, a write under the same key; with `Retry-After: 1`, the
 * switch ends at the instance's next alarm — a `never` call, a stop above all, was not applied and is the caller's to
 * send again or not, review of 0139, L2), 403 for a call the object's doors refused this
 * caller, 400 for the library's other errors (a bad argument, a conflict), 500 for anything else.
 */
export function errorAnswer(error: unknown, failedOpen: boolean): Response {
  const status =
    failedOpen || error instanceof AuthorizeFailed || error instanceof NotReady
      ? 503
      : error instanceof NotAuthorized
        ? 403
        : error instanceof DurableError
          ? 400
          : 500;
  const headers = error instanceof NotReady ? { "Retry-After": "1" } : undefined;
  return Response.json({ error: pageError(error) }, { status, headers });
}
