import fc from "fast-check";
import { describe, expect, it } from "vitest";
import { FollowMessageRefused } from "../src/errors.ts";
import { rebuildFromObject } from "../src/follow/snapshot.ts";
import { parseSnapshot } from "../src/follow/snapshot-text.ts";
import { MemoryStorage, type Storage } from "../src/index.ts";
import type { Snapshot } from "../src/storage/records.ts";
import { openSqliteStorage } from "../src/storage/sqlite/open-storage.ts";
import { copyState, none, partsOf, servingLink, sleepingTask, snapshotText } from "./snapshot-support.ts";
import { ctx } from "./support.ts";

// Decision 0047: a snapshot names each row once. Two rows under one id (or two submissions under one request id of
// a conversation) are not a copy any storage holds: SQLite refused them inside the rebuild's transaction with its own
// constraint text (after the fork was kept), while MemoryStorage kept the last one silently — two storages, two copies.

const task = (id: number, n: number) => sleepingTask(id, n);

function snapshotWith(change: (batch: Snapshot["batch"]) => void): Snapshot {
  const batch: Snapshot["batch"] = {
    ...none(),
    fence: { epoch: 1, position: 2 },
    nextId: 20,
    rootConversationId: 1,
    conversations: [{ id: 1, createdAt: 1 }],
    tasks: [task(2, 1)],
    entries: [{ id: 3, conversationId: 1, kind: "pi.user", payload: { text: "hi" }, at: 1 }],
    submissions: [],
  };
  change(batch);
  return { batch, epochs: [{ epoch: 1, start: 1 }] };
}

/** The object serves `snapshot` in parts, each with the whole's digest (decision 0053). */
const served = (snapshot: Snapshot) => servingLink(partsOf(snapshotText(snapshot), snapshot.batch.fence));

const submission = (id: number, requestId: string) =>
  ({
    id,
    conversationId: 1,
    type: "input",
    status: "done",
    requestId,
    input: { text: "x" },
    at: 1,
  }) as unknown as Snapshot["batch"]["submissions"][number];

const attacks: Array<[string, (batch: Snapshot["batch"]) => void]> = [
  ["two tasks under one id", (batch) => void batch.tasks.push(task(2, 7))],
  ["two entries under one id", (batch) => void batch.entries.push({ ...batch.entries[0]!, payload: { text: "other" } })],
  ["two conversations under one id", (batch) => void batch.conversations.push({ id: 1, createdAt: 9 })],
  ["two submissions under one request id", (batch) => void batch.submissions.push(submission(5, "r"), submission(6, "r"))],
  [
    "two documents under one scope and key",
    (batch) => void batch.documents.push({ scope: "s", key: "k", value: 1 } as never, { scope: "s", key: "k", value: 2 } as never),
  ],
];

describe("a snapshot names each row once (decision 0047)", () => {
  for (const [name, open] of [
    ["memory", async (): Promise<Storage> => new MemoryStorage()],
    ["sqlite", async (): Promise<Storage> => openSqliteStorage({ vfs: "memory" })],
  ] as const)
    for (const [attack, change] of attacks)
      it(`0047 (${name}): ${attack} is refused before anything is written (FollowMessageRefused), the copy unchanged`, async () => {
        const tab = await open();
        await tab.apply({
          ...none(),
          fence: { epoch: 1, position: 1 },
          nextId: 10,
          rootConversationId: 1,
          conversations: [{ id: 1, createdAt: 1 }],
        });
        const before = await copyState(tab);
        const image = name === "memory" ? await tab.exportImage() : undefined;
        const outcome = await rebuildFromObject({ storage: tab, link: served(snapshotWith(change)), place: "tab", now: 5 }, ctx).then(
          () => undefined,
          (error: unknown) => error,
        );
        expect(outcome).toBeInstanceOf(FollowMessageRefused);
        expect((outcome as Error).message).not.toMatch(/constraint|SQLITE|INSERT/i);
        // Refused for the row named twice, not for the answer's shape (before, the parts had no digest: decision 0053).
        expect((outcome as Error).message).toMatch(/twice: a copy stores each row once/);
        // SQLite stages rows beside the copy as parts arrive (decision 0084): its copy and tables are as they were.
        expect(await copyState(tab)).toEqual(before);
        if (image) expect(await tab.exportImage()).toEqual(image);
      });

  it("0047 property: any row named twice in any list is refused by parseSnapshot, and the same snapshot with distinct keys is taken", () => {
    const lists = ["tasks", "conversations", "entries", "submissions", "documents"] as const;
    fc.assert(
      fc.property(fc.constantFrom(...lists), fc.integer({ min: 1, max: 5 }), fc.integer({ min: 0, max: 4 }), (list, rows, copyIndex) => {
        const base = snapshotWith((batch) => {
          batch.nextId = 1_000;
          batch.tasks = Array.from({ length: rows }, (_, i) => task(100 + i, i + 1));
          batch.conversations = Array.from({ length: rows }, (_, i) => ({ id: 200 + i, createdAt: i }));
          batch.entries = Array.from({ length: rows }, (_, i) => ({
            id: 300 + i,
            conversationId: 1,
            kind: "pi.user",
            payload: { i },
            at: i,
          }));
          batch.submissions = Array.from({ length: rows }, (_, i) => submission(400 + i, `r${i}`));
          batch.documents = Array.from({ length: rows }, (_, i) => ({ scope: "s", key: `k${i}`, value: i }) as never);
        });
        const text = snapshotText(base);
        expect(parseSnapshot(text, base.batch.fence)).toEqual(base);
        const twice = JSON.parse(JSON.stringify(base)) as Snapshot;
        const rowsOf = twice.batch[list] as unknown[];
        rowsOf.push(JSON.parse(JSON.stringify(rowsOf[copyIndex % rows])));
        expect(() => parseSnapshot(snapshotText(twice), twice.batch.fence)).toThrow(FollowMessageRefused);
      }),
    );
  });
});
