import { describe, expect, it } from "vitest";
import type { Json } from "../src/base/json.ts";
import { fetchSnapshot, SnapshotServer } from "../src/follow/snapshot.ts";
import type { Snapshot } from "../src/storage/records.ts";
import type { Storage } from "../src/storage/storage.ts";
import { createManualClock } from "../src/testing/clock.ts";
import { copyAt } from "./snapshot-copy.ts";
import { ctx } from "./support.ts";

// Decision 0047: two tabs that ask the object for a snapshot at once (two devices rebuilding while the object runs)
// each read the snapshot their first part came from. Before, the server named a new snapshot's first part by the
// last snapshot kept, not by the one it had just taken: when a second take finished before the first answer went
// out, the first tab's part said one snapshot's id with another's position, its next parts were the other
// snapshot's, and the tab refused the whole (FollowMessageRefused) and stayed on its stale copy until a reconnect.

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
    // Each read finishes when the test opens its gate (since decision 0058 the second starts after the first).
    let done = false;
    const both = Promise.all([first, second]).finally(() => (done = true));
    while (!done) {
      gates.shift()?.();
      await new Promise((resolve) => setTimeout(resolve, 0));
    }
    const [a, b] = await both;
    expect([a.batch.fence.position, b.batch.fence.position]).toEqual([1, 2]);
    expect(a).toEqual(copyAt(1));
    expect(b).toEqual(copyAt(2));
  });
  it("0058: takes run one at a time, so the object holds at most one copy being read and serialized (concurrent asks do not multiply the peak); each caller still gets its own", async () => {
    let reading = 0;
    let most = 0;
    let reads = 0;
    const storage = {
      label: "object",
      readSnapshot: async () => {
        most = Math.max(most, ++reading);
        const snapshot = copyAt(++reads);
        await new Promise((resolve) => setTimeout(resolve, 0));
        reading--;
        return snapshot;
      },
    } as unknown as Storage;
    const server = new SnapshotServer(storage, createManualClock(0));
    const firsts = await Promise.all(["phone", "laptop", "tablet"].map((caller) => server.part(undefined, 0, caller)));
    expect(most).toBe(1); // before: 3, each with its whole copy and its text in memory at once
    expect(new Set(firsts.map((part) => part.id)).size).toBe(3);
    expect(firsts.map((part) => part.at.position).sort()).toEqual([1, 2, 3]);
  });
});
