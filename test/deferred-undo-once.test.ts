// S4 (decision 0137, item 3; the review of decision 0131, L2): a deferring turn whose COMMIT failed is put back once.
// While restarts are owed, the owed restarts' handler puts the failed turn back and the storage's own handler, a tick
// later, asks again (`DeferredTaskRows.failed` twice, `Turn.restored`). A second put-back that ran after a later turn
// committed would undo that turn: its waiting task row dropped and the mark forgotten — the next flush writes nothing
// for it and deletes the mark, so the table keeps the step before and a crash replays nothing (an acknowledged step
// lost). Before this test nothing pinned the guard (0131: the property, `deferred-turn-fails` and `fenced-step-lists` pass
// without it).
import { expect, it } from "vitest";
import type { Batch, TaskRecord } from "../src/storage/records.ts";
import type { SqliteDatabase, SqliteTransaction } from "../src/storage/sqlite/database.ts";
import { DeferredTaskRows, type Turn } from "../src/storage/sqlite/deferred.ts";
import { SqliteStorage } from "../src/storage/sqlite/storage.ts";
import { openSqliteDatabase } from "../src/storage/sqlite/wasm.ts";
import { taskRecord } from "./task-record.ts";

const running = (id: number, n: number) => taskRecord(id, { status: "running", checkpoint: { phase: "step", n } });
const batch = (tasks: TaskRecord[]): Batch => ({ tasks, conversations: [], entries: [], submissions: [], documents: [] });
const row = (task: TaskRecord) => ({ task, record: JSON.stringify(task) });

it("S4: a failed COMMIT's turn put back twice (the owed restarts' handler, then the storage's) undoes nothing of the turn that committed between — its row waits and reaches the table (fails without `Turn.restored`'s guard: the table keeps the step before)", async () => {
  const inner = await openSqliteDatabase({ vfs: "memory" });
  const storage = await SqliteStorage.open(inner, "sqlite");
  await storage.load();
  await storage.apply(batch([running(1, 0), running(2, 0)]));
  let fail = false;
  const db = {
    transaction: <T>(body: (tx: SqliteTransaction) => T) =>
      inner.transaction((tx) => {
        const result = body(tx);
        if (fail) throw new Error("disk I/O error at COMMIT");
        return result;
      }),
  } as SqliteDatabase;
  const rows = new DeferredTaskRows(true, "sqlite");
  await rows.owned(db, () => {}); // the write count is known from here on
  // Task 2's step waits, and writes the mark.
  await rows.owned(db, (_tx, turn) => expect(turn.defer({ epoch: 1, position: 3 }, [row(running(2, 1))])).toBe(true));
  // Task 1's step waits too (the mark is there: the turn writes nothing), and its COMMIT fails.
  let failed: Turn | undefined;
  fail = true;
  await expect(
    rows.owned(db, (_tx, turn) => {
      failed = turn;
      expect(turn.defer({ epoch: 1, position: 4 }, [row(running(1, 1))])).toBe(true);
    }),
  ).rejects.toThrow("COMMIT");
  fail = false;
  rows.failed(failed!); // the owed restarts' handler
  // Task 1's step again, committed.
  await rows.owned(db, (_tx, turn) => expect(turn.defer({ epoch: 1, position: 4 }, [row(running(1, 2))])).toBe(true));
  rows.failed(failed!); // the storage's own handler: done already
  expect(rows.waits(1)).toBe(true);
  expect(rows.waiting).toBe(2);

  await rows.owned(db, (_tx, turn) => turn.flush()); // a write outside the log: what waits reaches the table
  const stored = await inner.all("SELECT id, record FROM tasks ORDER BY id");
  expect(stored.map((task) => JSON.parse(String(task.record)).state.checkpoint.n)).toEqual([2, 1]);
});
