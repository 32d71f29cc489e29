/** The snapshot tests' fixtures (test/snapshot-duplicate-rows, snapshot-refusals): rows, and an object serving parts. */
import type { Json } from "../src/base/json.ts";
import { sha256Text } from "../src/base/sha256.ts";
import { SnapshotUnavailable } from "../src/errors.ts";
import { sliceJsonText } from "../src/follow/chunks.ts";
import type { SnapshotLink } from "../src/follow/snapshot.ts";
import { snapshotLines } from "../src/follow/snapshot-text.ts";
import type { Batch, Snapshot, TaskRecord } from "../src/storage/records.ts";
import type { SqliteStorage } from "../src/storage/sqlite/storage.ts";
import type { Storage } from "../src/storage/storage.ts";

/** A transaction with no rows. */
export const none = (): Batch => ({ tasks: [], conversations: [], entries: [], submissions: [], documents: [] });

/** Task `id` of conversation 1: a counter to 5 asleep at tick `n`. */
export const sleepingTask = (id: number, n: number, memos: TaskRecord["memos"] = {}): TaskRecord => ({
  id,
  conversationId: 1,
  kind: "example.count",
  version: 1,
  input: { to: 5 },
  background: false,
  abortRequested: false,
  state: { status: "sleeping", checkpoint: { phase: "tick", n }, until: n * 50 },
  memos,
});

/** A link whose object answers `follow.snapshot` with `answers[index]` (a hostile one, in the properties). */
export function servingLink(answers: Json[]): SnapshotLink {
  return {
    call: async (_topic, _method, args) => {
      const answer = answers[(args[2] as number | undefined) ?? 0];
      if (answer === undefined) throw new SnapshotUnavailable("gone", "no such part");
      return answer;
    },
  };
}

/** The parts the object serves for `text`: slices of at most about `budget` bytes, each with the whole's SHA-256. */
export function partsOf(text: string, at: { epoch: number; position: number }, budget = 400): Json[] {
  const slices = sliceJsonText(text, budget);
  const digest = sha256Text(text);
  return slices.map((slice, index) => ({ id: "s-1", at, index, count: slices.length, digest, text: slice }));
}

/** A snapshot's whole text as the object writes it (decision 0079: a header record, then one record a row). */
export const snapshotText = (snapshot: Snapshot): string => [...snapshotLines(snapshot)].join("");

/**
 * What a tab's copy holds that a rebuild may change or must keep (its snapshot and forks) and, on SQLite, its tables:
 * a staged rebuild (decision 0084) writes beside the copy, so a refused or lost one is judged by these, not the image.
 */
export async function copyState(storage: Storage) {
  const sqlite = storage.label !== "memory";
  return {
    snapshot: await storage.readSnapshot?.(),
    forks: await storage.readForks?.(),
    tables: sqlite ? await storage.query("SELECT type, name FROM sqlite_master ORDER BY type, name") : undefined,
  };
}

/** Everything a SQLite copy holds that a rebuild may change (rows, head, epochs, tail) and what it must keep (forks). */
export async function sqliteCopyState(storage: SqliteStorage) {
  return {
    tasks: await storage.query("SELECT id, status, record FROM tasks ORDER BY id"),
    entries: await storage.query("SELECT id, record FROM entries ORDER BY id"),
    conversations: await storage.query("SELECT id, record FROM conversations ORDER BY id"),
    submissions: await storage.query("SELECT id, record FROM submissions ORDER BY id"),
    documents: await storage.query("SELECT scope, key, record FROM documents ORDER BY scope, key"),
    meta: await storage.query("SELECT key, value FROM pi_durable_meta ORDER BY key"),
    epochs: await storage.readEpochs(),
    tail: (await storage.readLog(0, 100)).map((batch) => batch.fence),
    forks: await storage.readForks(),
  };
}
