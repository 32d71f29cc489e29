/**
 * Which calls a follower sends again to a new leader after the old one went with them in flight, and the
 * idempotency keys that make a creation safe to send again.
 */
import { ConnectionLost } from "../../errors.ts";
import type { CallName } from "../../host/protocol.ts";

/** Calls that always go to this tab's own worker. */
export const OWN_CALLS: ReadonlySet<string> = new Set<CallName>(["lifeLock", "close", "requestTakeover"]);
/**
 * Calls a new leader may run again after the old one went with them in flight: reads, waits, and changes that
 * end the same however often they run (`submit` and `createTask` carry an idempotency key from a follower).
 */
export const RETRIED: ReadonlySet<string> = new Set<CallName>([
  "status",
  "getTask",
  "waitForTask",
  "abortTask",
  "inspect",
  "resume",
  "query",
  "exportDatabase",
  "disarmCrashPoint",
  "rootConversation",
  "listConversations",
  "configure",
  "waitForSubmission",
  "abortConversation",
  "conversationEntries",
  "createTask",
  "submit",
]);

/** The arguments with an idempotency key for a call that creates something (the caller's own key is kept). */
export function withKey(method: string, args: unknown[]): unknown[] {
  if (method === "createTask") {
    const [kind, input, options = {}] = args as [string, unknown, { key?: string }?];
    return options.key !== undefined ? args : [kind, input, { ...options, key: `tab:${crypto.randomUUID()}` }];
  }
  if (method === "submit") {
    const [conversationId, draft] = args as [number, { requestId?: string }];
    return draft?.requestId !== undefined ? args : [conversationId, { ...draft, requestId: `tab:${crypto.randomUUID()}` }];
  }
  return args;
}

/** Whether a second run of this call is known to change nothing: a creation runs again only with its key. */
export function keyed(method: string, args: unknown[]): boolean {
  if (method === "createTask") return (args[2] as { key?: string } | undefined)?.key !== undefined;
  if (method === "submit") return (args[1] as { requestId?: string } | undefined)?.requestId !== undefined;
  return true;
}

export const isLoss = (error: unknown) => error instanceof ConnectionLost;
