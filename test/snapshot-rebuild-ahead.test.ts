import { describe, expect, it } from "vitest";
import type { Json } from "../src/base/json.ts";
import { sha256Text } from "../src/base/sha256.ts";
import { SnapshotUnavailable } from "../src/errors.ts";
import { sliceJsonText } from "../src/follow/chunks.ts";
import { listForks } from "../src/follow/fork.ts";
import { rebuildFromObject, type SnapshotLink } from "../src/follow/snapshot.ts";
import { MemoryStorage, type Storage } from "../src/index.ts";
import type { Batch, EntryRecord } from "../src/storage/records.ts";
import { openSqliteStorage } from "../src/storage/sqlite/open-storage.ts";
import { snapshotText } from "./snapshot-support.ts";
import { ctx } from "./support.ts";

// Decision 0047: the tab's fork is kept before the rebuild replaces its copy — every transaction of it the object's
// snapshot does not hold. Before, a transaction past the snapshot's head under the snapshot's last epoch was not
// counted as a fork (findFork reads it as 'not pushed yet, the object may still receive it'), and the rebuild then
// deleted it: the tab wrote it under the lease it held (a user's input, offline), the object took the lease over at
// its expiry and had logged nothing under its new epoch yet. After the rebuild the copy follows from the snapshot's
// head, so that transaction could never be pushed any more: it was lost, silently, with no fork to show.

const none = (): Batch => ({ tasks: [], conversations: [], entries: [], submissions: [], documents: [] });
const entry = (id: number, text: string): EntryRecord => ({ id, conversationId: 1, kind: "pi.user", payload: { text }, at: id });
const at = (epoch: number, position: number, entries: EntryRecord[] = []) => ({
  ...none(),
  fence: { epoch, position },
  nextId: 100 + position,
  ...(position === 1 ? { rootConversationId: 1, conversations: [{ id: 1, createdAt: 1 }] } : {}),
  entries,
});

function servingLink(text: string, fence: { epoch: number; position: number }): SnapshotLink {
  const slices = sliceJsonText(text, 400);
  const digest = sha256Text(text);
  return {
    call: async (_topic, _method, args) => {
      const index = (args[2] as number | undefined) ?? 0;
      if (index >= slices.length) throw new SnapshotUnavailable("gone", "no such part");
      return { id: "s-1", at: fence, index, count: slices.length, digest, text: slices[index]! } as unknown as Json;
    },
  };
}

describe("a rebuild keeps what the tab holds past the snapshot (decision 0047)", () => {
  for (const [name, open] of [
    ["memory", async (): Promise<Storage> => new MemoryStorage()],
    ["sqlite", async (): Promise<Storage> => openSqliteStorage({ vfs: "memory" })],
  ] as const)
    it(`0047 (${name}): the tab's transactions past the snapshot's head under its last epoch are kept as a fork before the copy is replaced`, async () => {
      const object = await open();
      const tab = await open();
      for (const position of [1, 2]) {
        await object.apply(at(1, position, [entry(10 + position, `shared ${position}`)]));
        await tab.apply(at(1, position, [entry(10 + position, `shared ${position}`)]));
      }
      // The tab held epoch 2 and wrote two inputs the object never received; the object's copy stands at 1/2.
      await tab.apply(at(2, 3, [entry(20, "offline one")]));
      await tab.apply(at(2, 4, [entry(21, "offline two")]));
      // The object's copy: epoch 1 up to 2, and (a tab that held epoch 2 and wrote at 3 before it) epoch 2 at 3.
      await object.apply(at(2, 3, [entry(20, "offline one")]));
      const snapshot = (await object.readSnapshot!())!;
      expect(snapshot.batch.fence).toEqual({ epoch: 2, position: 3 });
      const head = await rebuildFromObject(
        { storage: tab, link: servingLink(snapshotText(snapshot), snapshot.batch.fence), place: "tab", now: 7 },
        ctx,
      );
      expect(head).toEqual({ epoch: 2, position: 3 });
      const forks = await listForks(tab);
      expect(
        forks.map((fork) => fork.transactions.map((t) => [t.position, t.entries.map((e) => (e.payload as { text: string }).text)])),
      ).toEqual([[[4, ["offline two"]]]]);
    });
});
