// S1, S11 (decision 0120): a deferring storage's turn whose COMMIT fails — alone, queued with its retry, or the turn a
// load flushes the waiting task rows in — leaves reads, later loads and the database's own image (a crash right then)
// showing the last acknowledged state of every task. The restore after a failed commit (`deferred.ts`, a `.catch` on
// the transaction's promise since 0120) puts back the waiting rows a flushing turn had dropped: without it a read
// after the failed flush finds a stale row (the review of 0120, F2).
import fc from "fast-check";
import { describe, expect, it } from "vitest";
import type { Batch, TaskRecord } from "../src/storage/records.ts";
import type { SqliteTransaction } from "../src/storage/sqlite/database.ts";
import { SqliteStorage } from "../src/storage/sqlite/storage.ts";
import { openSqliteDatabase } from "../src/storage/sqlite/wasm.ts";
import { taskRecord } from "./task-record.ts";

const both = (tasks: TaskRecord[], position: number): Batch => ({
  fence: { epoch: 1, position },
  tasks,
  conversations: [],
  entries: [],
  submissions: [],
  documents: [],
});
const running = (id: number, n: number) => taskRecord(id, { status: "running", checkpoint: { phase: "step", n } });

async function failing(flushEvery: number, image?: Uint8Array) {
  const inner = await openSqliteDatabase({ vfs: "memory", ...(image ? { image } : {}) });
  const ctl = { fail: 0, throwInBody: 0 };
  const db = new Proxy(inner, {
    get(target, key) {
      if (key === "transaction")
        return <T>(body: (tx: SqliteTransaction) => T) =>
          target.transaction((tx) => {
            const result = body(tx);
            if (ctl.fail > 0) {
              ctl.fail--;
              throw new Error("disk I/O error at COMMIT");
            }
            return result;
          });
      const value = Reflect.get(target, key, target) as unknown;
      return typeof value === "function" ? value.bind(target) : value;
    },
  });
  const storage = await SqliteStorage.open(db, "sqlite", { deferTaskRows: { flushEvery } });
  return { storage, ctl, inner };
}

type Op =
  | { kind: "step"; id: 1 | 2; fail: boolean }
  | { kind: "pair"; id: 1 | 2 } // a failing step and its retry queued together
  | { kind: "read"; id: 1 | 2 }
  | { kind: "load" }
  | { kind: "flushFail" }; // a load whose flushing turn's commit fails

const op: fc.Arbitrary<Op> = fc.oneof(
  {
    weight: 6,
    arbitrary: fc.record({ kind: fc.constant("step" as const), id: fc.constantFrom(1 as const, 2 as const), fail: fc.boolean() }),
  },
  { weight: 2, arbitrary: fc.record({ kind: fc.constant("pair" as const), id: fc.constantFrom(1 as const, 2 as const) }) },
  { weight: 2, arbitrary: fc.record({ kind: fc.constant("read" as const), id: fc.constantFrom(1 as const, 2 as const) }) },
  { weight: 1, arbitrary: fc.constant({ kind: "load" as const }) },
  { weight: 1, arbitrary: fc.constant({ kind: "flushFail" as const }) },
);

describe("decision 0120: deferring turns whose commit fails", () => {
  it("S1 S11: random steps with failed commits (alone, queued with their retry, on flushing turns): reads, loads and a crash image all show the last acknowledged state", async () => {
    await fc.assert(
      fc.asyncProperty(fc.constantFrom(1, 2, 3, 5, 256), fc.array(op, { minLength: 1, maxLength: 30 }), async (every, ops) => {
        const { storage, ctl, inner } = await failing(every);
        await storage.load();
        await storage.apply(both([running(1, 0), running(2, 0)], 1));
        const ack = new Map<number, TaskRecord>([
          [1, running(1, 0)],
          [2, running(2, 0)],
        ]);
        let position = 1;
        let n = 0;
        for (const o of ops) {
          if (o.kind === "step") {
            const t = running(o.id, ++n);
            if (o.fail) {
              ctl.fail = 1;
              await expect(storage.apply(both([t], position + 1))).rejects.toThrow("disk I/O");
              ctl.fail = 0;
            } else {
              await storage.apply(both([t], ++position));
              ack.set(o.id, t);
            }
          } else if (o.kind === "pair") {
            const bad = running(o.id, ++n);
            const good = running(o.id, ++n);
            ctl.fail = 1;
            const a = storage.apply(both([bad], position + 1));
            const b = storage.apply(both([good], position + 1));
            await expect(a).rejects.toThrow("disk I/O");
            await b;
            ctl.fail = 0;
            position++;
            ack.set(o.id, good);
          } else if (o.kind === "read") {
            expect((await storage.getTask(o.id))?.state).toEqual(ack.get(o.id)!.state);
          } else if (o.kind === "load") {
            const state = await storage.load();
            for (const task of state.liveTasks) expect(task.state).toEqual(ack.get(task.id)!.state);
          } else {
            ctl.fail = 1;
            try {
              await storage.load();
            } catch (error) {
              expect(String(error)).toContain("disk I/O");
            }
            ctl.fail = 0;
          }
        }
        // Reads through the storage.
        for (const id of [1, 2]) expect((await storage.getTask(id))?.state).toEqual(ack.get(id)!.state);
        expect((await storage.readLog(0, 1000)).map((batch) => batch.fence.position)).toEqual(
          Array.from({ length: position }, (_, i) => i + 1),
        );
        // A crash now: the database's own image (what waits is lost with the process), reopened and replayed.
        const image = await inner.exportImage();
        const reopened = await failing(every, image);
        const state = await reopened.storage.load();
        for (const id of [1, 2]) expect(state.liveTasks.find((t) => t.id === id)?.state).toEqual(ack.get(id)!.state);
        await reopened.storage.close();
        await storage.close();
      }),
      { numRuns: 150 },
    );
  });
});
