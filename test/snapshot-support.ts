/** The snapshot tests' fixtures (test/snapshot-duplicate-rows, snapshot-refusals): rows, and an object serving parts. */
import type { Json } from "../src/base/json.ts";
import { sha256Text } from "../src/base/sha256.ts";
import { SnapshotUnavailable } from "../src/errors.ts";
import { sliceJsonText } from "../src/follow/chunks.ts";
import type { SnapshotLink } from "../src/follow/snapshot.ts";
import { snapshotLines } from "../src/follow/snapshot-text.ts";
import type { Batch, Snapshot, TaskRecord } from "../src/storage/records.ts";

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
