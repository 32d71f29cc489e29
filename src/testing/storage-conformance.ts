/**
 * The storage contract as runnable cases, with no test framework: run them in Vitest, in a browser worker
 * on OPFS, or against a Storage of your own. Each case throws a clear error when the storage breaks the
 * contract.
 *
 *   for (const test of storageConformance({ create: () => new MemoryStorage() })) it(test.name, test.run);
 */
import { type ConformanceBackend, type ConformanceCase, emptyBatch, equal, rejects, sampleTask, seeded } from "./conformance-support.ts";
import { logConformance } from "./log-conformance.ts";
import { snapshotConformance } from "./snapshot-conformance.ts";

export { type ConformanceBackend, type ConformanceCase, emptyBatch, sampleTask } from "./conformance-support.ts";

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
    ...logConformance(backend),
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
