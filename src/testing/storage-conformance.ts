/**
 * The storage contract as runnable cases, with no test framework: run them in Vitest, in a browser worker
 * on OPFS, or against a Storage of your own. Each case throws a clear error when the storage breaks the
 * contract.
 *
 *   for (const test of storageConformance({ create: () => new MemoryStorage() })) it(test.name, test.run);
 */
import { jsonEqual } from "../base/json.ts";
import type { Batch, TaskRecord } from "../storage/records.ts";
import type { Storage } from "../storage/storage.ts";
import { snapshotConformance } from "./snapshot-conformance.ts";

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

function equal(actual: unknown, expected: unknown, what: string): void {
  if (!jsonEqual(actual, expected) || (actual === undefined) !== (expected === undefined)) {
    throw new Error(`${what}: expected ${JSON.stringify(expected)}, got ${JSON.stringify(actual)}`);
  }
}

async function rejects(promise: Promise<unknown>, what: string): Promise<void> {
  try {
    await promise;
  } catch {
    return;
  }
  throw new Error(`${what}: expected a rejection, but it succeeded`);
}

async function seeded(backend: ConformanceBackend): Promise<Storage> {
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

/** The cases of the storage contract (S1, S4, S11). */
export function storageConformance(backend: ConformanceBackend): ConformanceCase[] {
  const cases: ConformanceCase[] = [
    {
      name: "S11: a batch is stored whole and read back as detached copies",
      async run() {
        const storage = await seeded(backend);
        const state = await storage.load();
        equal(state.nextId, 10, "nextId");
        equal(state.rootConversationId, 1, "rootConversationId");
        equal(
          state.liveTasks.map((t) => t.id),
          [2, 3],
          "live task ids",
        );
        equal(state.liveTasks[1], sampleTask(3, "running", { memos: { a: 1 }, restarts: 2 }), "a live task");
        equal(state.documents.length, 2, "documents");
        equal(
          state.openSubmissions.map((s) => s.id),
          [7],
          "open submissions",
        );
        equal((await storage.getTask(4))?.state, { status: "terminal", outcome: { status: "completed", result: 4 } }, "a terminal task");
        equal(await storage.getTask(99), undefined, "a missing task");
        equal(
          (await storage.listTasks({ status: "pending" })).map((t) => t.id),
          [2],
          "pending tasks",
        );
        equal(
          (await storage.listEntries(1)).map((e) => e.id),
          [5, 6],
          "entries",
        );
        equal(
          (await storage.listEntries(1, { afterId: 5 })).map((e) => e.id),
          [6],
          "entries after 5",
        );
        equal(
          (await storage.listEntries(1, { beforeId: 6 })).map((e) => e.id),
          [5],
          "entries before 6",
        );
        equal(
          (await storage.listEntries(1, { last: 1 })).map((e) => e.id),
          [6],
          "the last entry",
        );
        equal(
          (await storage.listEntries(1, { last: 5 })).map((e) => e.id),
          [5, 6],
          "a last page longer than the conversation",
        );
        equal((await storage.getEntry(6))?.byTaskId, 3, "an entry's author");
        equal(await storage.getDocument("conversation:1", "pi.live"), { run: 3 }, "a document");
        equal(
          (await storage.listDocuments("conversation:1")).map((d) => d.key),
          ["pi.live", "pi.usage"],
          "documents of a scope",
        );
        equal((await storage.findSubmission(1, "r1"))?.id, 7, "a submission by requestId");
        equal(await storage.findSubmission(1, "r2"), undefined, "an unknown requestId");
        equal(
          (await storage.listSubmissions(1)).map((s) => s.id),
          [7, 8],
          "submissions",
        );
        const copy = (await storage.getTask(3))!;
        copy.memos!.a = 2;
        equal((await storage.getTask(3))?.memos, { a: 1 }, "a read is a detached copy");
      },
    },
    {
      name: "S11: replacing and deleting: a terminal task leaves the live set; a null document is deleted",
      async run() {
        const storage = await seeded(backend);
        await storage.apply({
          ...emptyBatch(),
          tasks: [sampleTask(3, "terminal")],
          documents: [{ scope: "conversation:1", key: "pi.live", value: null }],
          submissions: [{ id: 7, conversationId: 1, type: "input", requestId: "r1", status: "done", payload: "hi", createdAt: 8 }],
        });
        const state = await storage.load();
        equal(
          state.liveTasks.map((t) => t.id),
          [2],
          "live task ids",
        );
        equal(await storage.getDocument("conversation:1", "pi.live"), undefined, "the deleted document");
        equal(state.openSubmissions, [], "open submissions");
        equal(state.nextId, 10, "nextId");
      },
    },
    {
      name: "S11: a commit that fails halfway rolls back completely",
      async run() {
        const storage = await seeded(backend);
        const circular: Record<string, unknown> = {};
        circular.self = circular;
        await rejects(
          storage.apply({
            ...emptyBatch(),
            nextId: 20,
            tasks: [sampleTask(2, "terminal")],
            entries: [{ id: 11, conversationId: 1, kind: "pi.user", payload: circular as never, at: 1 }],
          }),
          "a batch with a value that is not JSON",
        );
        const state = await storage.load();
        equal(state.nextId, 10, "nextId after the failed batch");
        equal(
          state.liveTasks.map((t) => t.id),
          [2, 3],
          "live tasks after the failed batch",
        );
        equal(await storage.getEntry(11), undefined, "the failed batch's entry");
      },
    },
    {
      name: "S1: the global id counter never goes back, also when ids were minted that no row carries",
      async run() {
        const storage = await seeded(backend); // nextId 10, rows up to 8
        await storage.apply({ ...emptyBatch(), nextId: 13, tasks: [sampleTask(10, "pending")] }); // 11 and 12 minted, unused
        equal((await storage.load()).nextId, 13, "nextId");
        await storage.apply({ ...emptyBatch(), nextId: 15, tasks: [sampleTask(13, "pending"), sampleTask(14, "pending")] });
        equal((await storage.load()).nextId, 15, "nextId");
        if (backend.fromImage) equal((await (await backend.fromImage(await storage.exportImage())).load()).nextId, 15, "nextId of a copy");
      },
    },
    {
      name: "S4: a task's status moves both ways through apply (running → pending at recovery, and back), and the live set follows",
      async run() {
        const storage = await seeded(backend); // task 3 running with memos { a: 1 } and restarts 2; task 2 pending
        const recovered = { ...sampleTask(3, "pending", { memos: { a: 1 } }), restarts: 3 };
        await storage.apply({ ...emptyBatch(), tasks: [recovered, sampleTask(12, "running")] });
        equal(await storage.getTask(3), recovered, "task 3");
        equal(
          (await storage.listTasks({ status: "running" })).map((t) => t.id),
          [12],
          "running tasks",
        );
        // A storage that caches statuses must follow a change back (pending → running) and one in place.
        await storage.apply({ ...emptyBatch(), tasks: [sampleTask(3, "running"), { ...sampleTask(12, "running"), restarts: 1 }] });
        equal(
          (await storage.listTasks({ status: "running" })).map((t) => t.id),
          [3, 12],
          "running tasks",
        );
        equal(
          (await storage.load()).liveTasks.map((t) => [t.id, t.state.status, t.restarts ?? 0]),
          [
            [2, "pending", 0],
            [3, "running", 0],
            [12, "running", 1],
          ],
          "live tasks at the next open",
        );
      },
    },
    {
      name: "the fenced log (decision 0029): a batch continues it at head + 1 under an epoch no older than the head's, or nothing is written",
      async run() {
        const storage = await seeded(backend);
        equal((await storage.load()).log, undefined, "the log before any fenced batch");
        await storage.apply({ ...emptyBatch(), fence: { epoch: 1, position: 1 }, tasks: [sampleTask(4, "pending")] });
        equal((await storage.load()).log, { epoch: 1, position: 1 }, "the head after position 1");
        const refused = async (fence: { epoch: number; position: number }, name: string, what: string) => {
          const error = await storage.apply({ ...emptyBatch(), fence, tasks: [sampleTask(5, "pending")] }).then(
            () => undefined,
            (e: unknown) => e,
          );
          if (!(error instanceof Error) || error.name !== name) throw new Error(`${what}: expected ${name}, got ${String(error)}`);
        };
        await refused({ epoch: 1, position: 1 }, "LogOutOfOrder", "a position already taken");
        await refused({ epoch: 1, position: 3 }, "LogOutOfOrder", "a gap");
        await storage.apply({ ...emptyBatch(), fence: { epoch: 3, position: 2 }, tasks: [sampleTask(6, "pending")] });
        await refused({ epoch: 2, position: 3 }, "StaleEpoch", "an epoch older than the head's");
        equal(
          (await storage.load()).liveTasks.map((t) => t.id),
          [2, 3, 4, 6],
          "live tasks: nothing of a refused batch was written",
        );
        equal((await storage.load()).log, { epoch: 3, position: 2 }, "the head after the refusals");
        await storage.apply({ ...emptyBatch(), tasks: [sampleTask(7, "pending")] });
        equal((await storage.load()).log, { epoch: 3, position: 2 }, "the head after a batch without a fence");
        if (storage.readEpochs)
          equal(
            await storage.readEpochs(),
            [
              { epoch: 1, start: 1 },
              { epoch: 3, start: 2 },
            ],
            "the epochs' starts (decision 0032: where two copies diverged)",
          );
        if (!storage.readLog || !storage.trimLog) return;
        const tail = await storage.readLog(0, 10);
        equal(
          tail.map((batch) => [batch.fence, batch.tasks.map((t) => t.id)]),
          [
            [{ epoch: 1, position: 1 }, [4]],
            [{ epoch: 3, position: 2 }, [6]],
          ],
          "the log's tail: each fenced batch as stored",
        );
        await storage.trimLog(1);
        equal(
          (await storage.readLog(0, 10)).map((batch) => batch.fence.position),
          [2],
          "the tail after trimming through 1",
        );
      },
    },
    {
      name: "decision 0039: a fenced transaction larger than one row (a Durable Object's 2 MB) is kept whole in the log's tail, read back and trimmed",
      async run() {
        const storage = await backend.create();
        if (!storage.readLog || !storage.trimLog) return;
        // Five entries of 0.9 MB (as UTF-8) each: every row fits in 2 MB, the transaction (4.5 MB) does not.
        const text = "é".repeat(450_000);
        const entries = [1, 2, 3, 4, 5].map((id) => ({ id, conversationId: 1, kind: "note", payload: { text, id }, at: id }));
        await storage.apply({ ...emptyBatch(), fence: { epoch: 1, position: 1 }, entries });
        await storage.apply({ ...emptyBatch(), fence: { epoch: 1, position: 2 }, tasks: [sampleTask(9, "pending")] });
        const tail = await storage.readLog(0, 10);
        equal(
          tail.map((batch) => [batch.fence, batch.entries.length, batch.tasks.length]),
          [
            [{ epoch: 1, position: 1 }, 5, 0],
            [{ epoch: 1, position: 2 }, 0, 1],
          ],
          "both transactions in the tail, in order",
        );
        equal(tail[0]!.entries, entries, "the large transaction's entries, whole");
        equal(
          (await storage.readLog(1, 10)).map((batch) => batch.fence.position),
          [2],
          "read from after position 1",
        );
        equal(
          (await storage.readLog(0, 1)).map((batch) => batch.entries.length),
          [5],
          "a limit of one transaction",
        );
        await storage.trimLog(1);
        equal(
          (await storage.readLog(0, 10)).map((batch) => batch.fence.position),
          [2],
          "the tail after trimming through 1",
        );
        equal((await storage.load()).log, { epoch: 1, position: 2 }, "the head");
      },
    },
    {
      name: "decision 0039: a fork is kept once per key beside the log, outside every batch, read back and dismissed",
      async run() {
        const storage = await backend.create();
        if (!storage.keepFork || !storage.readForks || !storage.dismissFork) return;
        await storage.keepFork("fork-1-3", { from: 3, note: "first" });
        await storage.keepFork("fork-1-3", { from: 3, note: "found again" });
        await storage.apply({ ...emptyBatch(), fence: { epoch: 2, position: 1 }, tasks: [sampleTask(5, "pending")] });
        await storage.keepFork("fork-2-9", { from: 9 });
        equal(
          await storage.readForks(),
          [
            { key: "fork-1-3", record: { from: 3, note: "first" } },
            { key: "fork-2-9", record: { from: 9 } },
          ],
          "each fork once, its first record kept",
        );
        equal((await storage.readLog?.(0, 10))?.length ?? 1, 1, "the log's tail holds only the batch");
        await storage.dismissFork("fork-1-3");
        await storage.dismissFork("no-such-fork");
        equal(
          (await storage.readForks()).map((fork) => fork.key),
          ["fork-2-9"],
          "after dismissing one",
        );
      },
    },
    {
      name: "decision 0039: a remembered pinned lease is read back at load, outside every batch, until forgotten",
      async run() {
        const storage = await backend.create();
        if (!storage.rememberLease) return;
        equal((await storage.load()).pinned, undefined, "none at first");
        await storage.rememberLease({ place: "tab", epoch: 4 });
        await storage.apply({ ...emptyBatch(), fence: { epoch: 4, position: 1 }, tasks: [sampleTask(3, "pending")] });
        equal((await storage.load()).pinned, { place: "tab", epoch: 4 }, "remembered, a batch later");
        equal((await storage.readLog?.(0, 10))?.[0]?.tasks.length ?? 1, 1, "the log's tail holds only the batch");
        await storage.rememberLease(undefined);
        equal((await storage.load()).pinned, undefined, "forgotten");
      },
    },
    {
      name: "S11: an exported image opens as an independent copy",
      async run() {
        const storage = await seeded(backend);
        if (backend.exportsImage === false) {
          const refusal = await storage.exportImage().then(
            () => undefined,
            (error: unknown) => error,
          );
          if (!(refusal instanceof Error) || refusal.name === "Error")
            throw new Error("exportImage() should refuse with a named error on a storage that cannot export");
          return;
        }
        const image = await storage.exportImage();
        if (!(image instanceof Uint8Array) || image.byteLength === 0) throw new Error("exportImage() returned no bytes");
        if (!backend.fromImage) return;
        const copy = await backend.fromImage(image);
        await storage.apply({ ...emptyBatch(), tasks: [sampleTask(2, "terminal")] });
        equal(
          (await copy.load()).liveTasks.map((t) => t.id),
          [2, 3],
          "the copy's live tasks",
        );
        const readOnly = await backend.fromImage(await storage.exportImage(), { readOnly: true });
        equal(readOnly.readOnly, true, "readOnly");
        await rejects(readOnly.apply({ ...emptyBatch(), tasks: [sampleTask(3, "terminal")] }), "a write to a read-only copy");
        equal(
          (await readOnly.load()).liveTasks.map((t) => t.id),
          [3],
          "the read-only copy's live tasks",
        );
      },
    },
    ...snapshotConformance(backend),
  ];
  return cases;
}
