/**
 * The storage contract's snapshot cases (decision 0047), run with the rest of `storageConformance`: a snapshot is
 * the whole copy at its log's head, a rebuild replaces the copy with one (keeping its forks), and a bounded read of
 * the log's tail stops at its byte budget.
 */
import { jsonEqual } from "../base/json.ts";
import type { Batch, Snapshot, TaskRecord } from "../storage/records.ts";
import type { Storage } from "../storage/storage.ts";

interface Backend {
  create(): Promise<Storage> | Storage;
}

const task = (id: number, status: "pending" | "terminal"): TaskRecord => ({
  id,
  conversationId: 1,
  kind: "demo.count",
  version: 1,
  input: { id },
  background: false,
  abortRequested: false,
  state: status === "pending" ? { status, checkpoint: { phase: "start" } } : { status, outcome: { status: "completed", result: id } },
});
const none = (): Batch => ({ tasks: [], conversations: [], entries: [], submissions: [], documents: [] });

function equal(actual: unknown, expected: unknown, what: string): void {
  if (!jsonEqual(actual, expected)) throw new Error(`${what}: expected ${JSON.stringify(expected)}, got ${JSON.stringify(actual)}`);
}

export function snapshotConformance(backend: Backend): Array<{ name: string; run(): Promise<void> }> {
  return [
    {
      name: "decision 0047: a snapshot is the whole copy at its log's head; a rebuild from it replaces every row, the head and the epochs, and keeps the forks",
      async run() {
        // One storage (a Durable Object's case has one): its own history first, then rebuilt from another's snapshot.
        const storage = await backend.create();
        if (!storage.readSnapshot || !storage.rebuild || !storage.keepFork || !storage.readForks) return;
        equal(await storage.readSnapshot(), undefined, "no snapshot before the first fenced commit");
        await storage.apply({ ...none(), fence: { epoch: 2, position: 1 }, nextId: 99, tasks: [task(98, "pending")] });
        await storage.apply({
          ...none(),
          fence: { epoch: 2, position: 2 },
          documents: [{ scope: "conversation:1", key: "pi.live", value: { run: 98 } }],
        });
        await storage.apply({
          ...none(),
          fence: { epoch: 2, position: 3 },
          documents: [{ scope: "conversation:1", key: "pi.live", value: null }],
        });
        const own = (await storage.readSnapshot())!;
        equal(own.batch.fence, { epoch: 2, position: 3 }, "its own snapshot's head");
        equal(own.epochs, [{ epoch: 2, start: 1 }], "its own epochs");
        equal(
          own.batch.tasks.map((row) => row.id),
          [98],
          "its own tasks",
        );
        equal(own.batch.documents, [], "a deleted document is not in it");
        await storage.keepFork("fork-2-1", { from: 1 });
        // Another history's snapshot: epoch 1 at 1, epoch 3 from 2, at 2.
        const snapshot: Snapshot = {
          batch: {
            ...none(),
            fence: { epoch: 3, position: 2 },
            nextId: 6,
            rootConversationId: 1,
            conversations: [{ id: 1, createdAt: 1 }],
            tasks: [task(2, "terminal")],
            entries: [{ id: 3, conversationId: 1, kind: "pi.user", payload: { text: "hi" }, at: 2 }],
            submissions: [{ id: 4, conversationId: 1, type: "input", requestId: "r1", status: "done", payload: "hi", createdAt: 2 }],
            documents: [{ scope: "conversation:1", key: "pi.usage", value: { tokens: 1 } }],
          },
          epochs: [
            { epoch: 1, start: 1 },
            { epoch: 3, start: 2 },
          ],
        };
        await storage.rebuild(snapshot);
        const state = await storage.load();
        equal(state.log, { epoch: 3, position: 2 }, "the rebuilt head");
        equal(state.nextId, 6, "the rebuilt id counter");
        equal(state.rootConversationId, 1, "the rebuilt root conversation");
        equal(await storage.getTask(98), undefined, "a row of the old copy is gone");
        equal((await storage.getTask(2))?.state.status, "terminal", "the snapshot's task");
        equal(
          (await storage.listEntries(1)).map((row) => row.id),
          [3],
          "the snapshot's entries",
        );
        equal((await storage.findSubmission(1, "r1"))?.id, 4, "the snapshot's submission by its request id");
        equal(await storage.readEpochs?.(), snapshot.epochs, "the rebuilt epochs");
        equal(await storage.readLog?.(0, 10), [], "no log tail of the replaced history");
        equal(
          (await storage.readForks()).map((fork) => fork.key),
          ["fork-2-1"],
          "the kept fork survives",
        );
        equal(await storage.readSnapshot(), snapshot, "the rebuilt copy's own snapshot is the one it was rebuilt from");
        // And it continues the log at the snapshot's head + 1.
        await storage.apply({ ...none(), fence: { epoch: 3, position: 3 }, tasks: [task(6, "pending")] });
        equal((await storage.load()).log, { epoch: 3, position: 3 }, "a push after the rebuild");
      },
    },
    {
      name: "decision 0084: the rows read a row at a time are the snapshot's, as their JSON text, in its order; a staged rebuild leaves what rebuild leaves, and a discarded one leaves the copy",
      async run() {
        const storage = await backend.create();
        if (!storage.readSnapshot || !storage.rebuild) return;
        const readRows = async () =>
          storage.readSnapshotRows?.(
            () => {},
            () => {},
          );
        equal(await readRows(), storage.readSnapshotRows ? false : undefined, "no rows before the first fenced commit");
        await storage.apply({
          ...none(),
          fence: { epoch: 1, position: 1 },
          nextId: 9,
          rootConversationId: 1,
          conversations: [{ id: 1, createdAt: 1 }],
          tasks: [task(3, "pending"), task(2, "terminal")],
          entries: [{ id: 5, conversationId: 1, kind: "pi.user", payload: { text: "line\nbreak \u2028 \ud800" }, at: 1 }],
          documents: [
            { scope: "b", key: "k", value: [1, { x: null }] },
            { scope: "a", key: "k", value: "v" },
          ],
        });
        const snapshot = (await storage.readSnapshot())!;
        if (storage.readSnapshotRows) {
          let head: unknown;
          const rows: Array<[string, unknown]> = [];
          await storage.readSnapshotRows(
            (read) => (head = read),
            (list, record) => rows.push([list, JSON.parse(record)]),
          );
          const { tasks, conversations, entries, submissions, documents, ...counters } = snapshot.batch;
          equal(head, { batch: counters, epochs: snapshot.epochs }, "the head handed first");
          const lists = { tasks, conversations, entries, submissions, documents };
          equal(
            rows,
            Object.entries(lists).flatMap(([list, listed]) => listed.map((row: unknown) => [list, row])),
            "every row, in order",
          );
        }
        if (!storage.stageRebuild) return;
        const other: Snapshot = {
          batch: {
            ...none(),
            fence: { epoch: 2, position: 4 },
            nextId: 20,
            conversations: [{ id: 1, createdAt: 1 }],
            tasks: [task(11, "pending")],
            documents: [{ scope: "a", key: "z", value: 1 }],
          },
          epochs: [{ epoch: 2, start: 1 }],
        };
        const dropped = await storage.stageRebuild();
        await dropped.add({ tasks: other.batch.tasks });
        await dropped.discard();
        equal(await storage.readSnapshot(), snapshot, "a discarded stage leaves the copy");
        const stage = await storage.stageRebuild();
        await stage.add({ conversations: other.batch.conversations, tasks: other.batch.tasks });
        await stage.add({ documents: other.batch.documents });
        const { tasks: _t, conversations: _c, entries: _e, submissions: _s, documents: _d, ...counters } = other.batch;
        await stage.commit({ batch: counters, epochs: other.epochs });
        equal(await storage.readSnapshot(), other, "the staged rows and head, in place of the copy");
        equal((await storage.load()).log, { epoch: 2, position: 4 }, "the staged head");
        equal(await storage.getTask(3), undefined, "a row of the old copy is gone");
      },
    },
    {
      name: "decision 0047: a read of the log's tail within a byte budget stops before the budget is passed, but reads at least one transaction",
      async run() {
        const storage = await backend.create();
        if (!storage.readLog) return;
        const text = "x".repeat(10_000);
        for (let position = 1; position <= 5; position++)
          await storage.apply({
            ...none(),
            fence: { epoch: 1, position },
            entries: [{ id: position, conversationId: 1, kind: "note", payload: { text }, at: position }],
          });
        const positions = async (after: number, bytes?: number) =>
          (await storage.readLog!(after, 10, bytes)).map((batch) => batch.fence.position);
        equal(await positions(0), [1, 2, 3, 4, 5], "without a budget");
        equal(await positions(0, 25_000), [1, 2], "two of about 10 KB in 25 KB");
        equal(await positions(2, 25_000), [3, 4], "from a position");
        equal(await positions(0, 100), [1], "the first whatever its size");
      },
    },
  ];
}
