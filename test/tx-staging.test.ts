import fc from "fast-check";
import { describe, expect, it } from "vitest";
import { DEFAULT_SETTINGS, MemoryStorage, type TaskRecord } from "../src/index.ts";
import { Session } from "../src/session/session.ts";
import { createManualClock } from "../src/testing/clock.ts";
import { taskRecord } from "./task-record.ts";

// Decision 0042: a transaction keeps the first task it stages outside any map (a step stages one). What it stores
// and what it reads must be what a map in staging order gave: each task's last version, in the order first staged.

function record(id: number, version: number): TaskRecord {
  return taskRecord(id, { status: "running", checkpoint: { phase: "step", n: version } }, { kind: "test.any" });
}

describe("a transaction's staged tasks (decision 0042)", () => {
  it("S3: the batch holds each staged task's last version in the order first staged; reads inside see the staged versions", async () => {
    await fc.assert(
      fc.asyncProperty(fc.array(fc.integer({ min: 1, max: 5 }), { minLength: 1, maxLength: 12 }), async (puts) => {
        const storage = new MemoryStorage();
        const session = await Session.open(storage, createManualClock(0), false, DEFAULT_SETTINGS.limits);
        const expected = new Map<number, TaskRecord>();
        let stored: TaskRecord[] = [];
        session.subscribe(({ batch }) => void (stored = batch.tasks));
        const seen = await session.commit((tx) => {
          const reads: unknown[] = [];
          puts.forEach((id, version) => {
            const next = record(id, version);
            tx.putTask(next);
            expected.set(id, next);
            const state = tx.task(id)?.state;
            reads.push(state?.status === "running" ? state.checkpoint.n : undefined);
          });
          return { reads, live: [...tx.liveTasks()].map((task) => task.id), staged: [...tx.stagedTasks()].map((task) => task.id) };
        });
        expect(seen.reads).toEqual(puts.map((_id, version) => version));
        expect(seen.live).toEqual([...expected.keys()]);
        expect(seen.staged).toEqual([...expected.keys()]);
        expect(stored).toEqual([...expected.values()]);
        expect([...session.live.keys()]).toEqual([...expected.keys()]);
      }),
      { numRuns: 100 },
    );
  });
});
