import { describe, expect, it } from "vitest";
import type { Json } from "../src/base/json.ts";
import { fetchSnapshot, SnapshotServer } from "../src/follow/snapshot.ts";
import type { Snapshot } from "../src/storage/records.ts";
import type { Storage } from "../src/storage/storage.ts";
import { createManualClock } from "../src/testing/clock.ts";
import { ctx } from "./support.ts";

// Decision 0047: two tabs that ask the object for a snapshot at once (two devices rebuilding while the object runs)
// each read the snapshot their first part came from. Before, the server named a new snapshot's first part by the
// last snapshot kept, not by the one it had just taken: when a second take finished before the first answer went
// out, the first tab's part said one snapshot's id with another's position, its next parts were the other
// snapshot's, and the tab refused the whole (FollowMessageRefused) and stayed on its stale copy until a reconnect.

/** A copy at `position` over 1 MB (more than one part), its rows ids below its nextId. */
const copyAt = (position: number): Snapshot => ({
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

describe("the object's snapshots taken at once (decision 0047)", () => {
  it("0047: two tabs that ask for a new snapshot together each get every part of their own", async () => {
    const gates: Array<() => void> = [];
    let reads = 0;
    const storage = {
      label: "object",
      readSnapshot: () => {
        const snapshot = copyAt(++reads); // the object wrote between the two reads
        return new Promise<Snapshot>((resolve) => gates.push(() => resolve(snapshot)));
      },
    } as unknown as Storage;
    const server = new SnapshotServer(storage, createManualClock(0));
    const link = {
      call: async (_topic: string, _method: string, args: Json[]) =>
        (await server.part(args[1] as string | undefined, args[2] as number | undefined, args[0] as string)) as unknown as Json,
    };
    const first = fetchSnapshot(link, "phone", ctx);
    const second = fetchSnapshot(link, "laptop", ctx);
    while (gates.length < 2) await Promise.resolve();
    for (const open of gates) open();
    const [a, b] = await Promise.all([first, second]);
    expect([a.batch.fence.position, b.batch.fence.position]).toEqual([1, 2]);
    expect(a).toEqual(copyAt(1));
    expect(b).toEqual(copyAt(2));
  });
});
