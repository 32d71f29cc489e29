/**
 * What the storage contract's cases share (storage-conformance.ts, log-conformance.ts): the backend they run against,
 * a batch and a task to write, checks that throw a clear error, and a seeded storage. Moved out of
 * storage-conformance.ts.
 */
import { jsonEqual } from "../base/json.ts";
import type { Batch, TaskRecord } from "../storage/records.ts";
import type { Storage } from "../storage/storage.ts";

export interface ConformanceBackend {
  /** A new, empty storage. */
  create(): Promise<Storage> | Storage;
  /** A storage opened on exported bytes (a copy); without it the image cases check only that export works. */
  fromImage?(bytes: Uint8Array, options?: { readOnly?: boolean }): Promise<Storage> | Storage;
  /**
   * False for a storage that cannot hand out its database as bytes (a Durable Object): the image cases then
   * check that `exportImage()` refuses with a named error instead of returning something else.
   */
  exportsImage?: boolean;
}

export interface ConformanceCase {
  name: string;
  run(): Promise<void>;
}

/** A batch that writes nothing; spread it and fill in what a test writes. */
export const emptyBatch = (): Batch => ({ tasks: [], conversations: [], entries: [], submissions: [], documents: [] });

/** A minimal task record in conversation 1, for storage tests. */
export function sampleTask(id: number, status: "pending" | "running" | "terminal", extra: Partial<TaskRecord> = {}): TaskRecord {
  const state =
    status === "terminal"
      ? ({ status, outcome: { status: "completed", result: id } } as const)
      : ({ status, checkpoint: { phase: "p", n: id } } as const);
  return { id, conversationId: 1, kind: "k", version: 1, input: null, background: false, abortRequested: false, state, ...extra };
}

export function equal(actual: unknown, expected: unknown, what: string): void {
  if (!jsonEqual(actual, expected) || (actual === undefined) !== (expected === undefined)) {
    throw new Error(`${what}: expected ${JSON.stringify(expected)}, got ${JSON.stringify(actual)}`);
  }
}

export async function rejects(promise: Promise<unknown>, what: string): Promise<void> {
  try {
    await promise;
  } catch {
    return;
  }
  throw new Error(`${what}: expected a rejection, but it succeeded`);
}

export async function seeded(backend: ConformanceBackend): Promise<Storage> {
  const storage = await backend.create();
  await storage.apply({
    ...emptyBatch(),
    nextId: 10,
    rootConversationId: 1,
    conversations: [{ id: 1, createdAt: 5 }],
    tasks: [sampleTask(2, "pending"), sampleTask(3, "running", { memos: { a: 1 }, restarts: 2 }), sampleTask(4, "terminal")],
    entries: [
      { id: 5, conversationId: 1, kind: "pi.user", payload: { text: "hi" }, at: 6 },
      { id: 6, conversationId: 1, kind: "pi.assistant", payload: { text: "yo" }, byTaskId: 3, at: 7 },
    ],
    submissions: [
      { id: 7, conversationId: 1, type: "input", requestId: "r1", status: "queued", payload: "hi", createdAt: 8 },
      { id: 8, conversationId: 1, type: "input", status: "done", payload: "x", createdAt: 8, result: { answer: "y" } },
    ],
    documents: [
      { scope: "conversation:1", key: "pi.live", value: { run: 3 } },
      { scope: "conversation:1", key: "pi.usage", value: { tokens: 1 } },
    ],
  });
  return storage;
}
