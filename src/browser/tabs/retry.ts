/**
 * Which calls a follower sends again to a new leader after the old one went with them in flight, and the
 * idempotency keys that make a creation safe to send again — both read from each method's row in PROTOCOL.
 */
import { ConnectionLost } from "../../errors.ts";
import { isMethod, type MethodPolicy, PROTOCOL } from "../../host/protocol.ts";
import { HANDOVER_KEY_PREFIX } from "../../session/keys.ts";

/**
 * A follower stops sending a call again this long after it first sent it (then the call rejects with
 * `ConnectionLost`): the harness keeps a hand-over key five times as long (decision 0022).
 */
export const RESEND_WINDOW_MS = 60_000;

const policy = (method: string): MethodPolicy | undefined => (isMethod(method) ? PROTOCOL[method] : undefined);

/** Whether a call always goes to this tab's own worker (`local`). */
export const isLocal = (method: string): boolean => policy(method)?.local === true;

/** The arguments with an idempotency key for a call that creates something (the caller's own key is kept). */
export function withKey(method: string, args: unknown[]): unknown[] {
  const key = policy(method)?.key;
  if (!key) return args;
  const holder = (args[key.arg] ?? {}) as Record<string, unknown>;
  if (typeof holder !== "object" || holder[key.field] !== undefined) return args; // the host refuses a malformed one
  const keyed = [...args];
  while (keyed.length < key.arg) keyed.push(undefined);
  keyed[key.arg] = { ...holder, [key.field]: `${HANDOVER_KEY_PREFIX}${crypto.randomUUID()}` };
  return keyed;
}

/**
 * Whether a call may be sent again after the leader went with it in flight: `safe` ones always, `keyed` ones
 * when they carry their key (a second run then changes nothing), `never` ones not.
 */
export function retried(method: string, args: unknown[]): boolean {
  const row = policy(method);
  if (row?.kind !== "call" || row.retry === "never") return false;
  if (row.retry === "safe") return true;
  const holder = row.key && (args[row.key.arg] as Record<string, unknown> | undefined);
  return typeof holder === "object" && holder !== null && holder[row.key!.field] !== undefined;
}

export const isLoss = (error: unknown) => error instanceof ConnectionLost;
