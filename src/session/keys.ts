/**
 * The session's keys that pages need too (a page must not load the commit line to know them): the mirror's
 * document key, the task-key scope and the hand-over key prefix.
 */

/** The key of document `key` in `scope` in the session's mirror (and in a group's overlay). */
export function documentKey(scope: string, key: string): string {
  return `${scope}\u0000${key}`;
}

/** The document scope of task keys: key → `{ taskId, kind }` (and `expiresAt` for a hand-over key). */
export const TASK_KEYS = "pi.task-keys";
/**
 * Task keys that start with this exist only to make a follower tab's call safe to send again to the next
 * leader (src/browser/tabs/retry.ts). They expire `HANDOVER_KEY_TTL_MS` after their task's creation, on the
 * harness clock, well after any resend (decision 0022); apps must not use the prefix for their own keys.
 */
export const HANDOVER_KEY_PREFIX = "pi.handover:";
