/**
 * The storage contract's fenced-log cases (decisions 0029, 0039), run with the rest of `storageConformance`: a batch
 * continues the log at head + 1 under an epoch no older than the head's, a transaction larger than a row is kept whole
 * in the log's tail, a fork is kept once per key beside the log, and a pinned lease is remembered. Moved out of
 * storage-conformance.ts.
 */
import { type ConformanceBackend, type ConformanceCase, emptyBatch, equal, sampleTask, seeded } from "./conformance-support.ts";

export function logConformance(backend: ConformanceBackend): ConformanceCase[] {
  return [
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
  ];
}
