/** The task record storage tests write by hand: one shape, so each test names only what it varies. */
import type { TaskRecord } from "../src/storage/records.ts";

/** Task `id` of conversation 1 (kind `k`, version 1, no input, not background, no abort asked) in `state`. */
export function taskRecord(id: number, state: TaskRecord["state"], extra: Partial<TaskRecord> = {}): TaskRecord {
  return { id, conversationId: 1, kind: "k", version: 1, input: null, background: false, abortRequested: false, state, ...extra };
}
