import type { Snapshot } from "../src/storage/records.ts";
import { comebackWorld } from "./comeback-support.ts";
import { runUntil } from "./support.ts";

/** A snapshot of a copy at `position` over 1 MB (three parts), its rows' ids below its nextId. */
export const copyAt = (position: number): Snapshot => ({
  batch: {
    fence: { epoch: 1, position },
    nextId: 10,
    tasks: [],
    conversations: [],
    entries: [],
    submissions: [],
    documents: [{ scope: "app", key: "big", value: `${position}`.repeat(1_500_000) }] as never,
  },
  epochs: [{ epoch: 1, start: 1 }],
});

/** An object's `follow.snapshot` answer as a test reads it. */
export type SnapshotAnswer = { id: string; value?: { id: string; index: number }; error?: { name: string; message: string } };

/**
 * A comeback world whose copy holds a transaction, the object's `follow.snapshot` called as an authenticated `caller`
 * (`call`), and how often the copy was read whole (`reads`).
 */
export async function snapshotCallWorld() {
  const w = await comebackWorld({ to: 3 });
  await runUntil(w.clock, async () => ((await w.copy.load()).log?.position ?? 0) >= 1);
  let reads = 0;
  const read = w.copy.readSnapshotRows.bind(w.copy);
  w.copy.readSnapshotRows = async (head, row) => {
    reads++;
    return read(head, row);
  };
  const call = async (id: string, args: unknown[], caller = "alice"): Promise<SnapshotAnswer> => {
    let answer: SnapshotAnswer | undefined;
    await w.end.receive(
      JSON.stringify({ type: "call", id, topic: "follow", method: "snapshot", args }),
      (frame) => void (answer = JSON.parse(frame)),
      () => true,
      undefined,
      undefined,
      caller,
    );
    return answer!;
  };
  return { w, call, reads: () => reads };
}
