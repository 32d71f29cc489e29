import { describe, expect, it } from "vitest";
import { stepper } from "../bench/stepper.ts";
import { createRegistry, defineExtension } from "../src/index.ts";
import type { SqliteDatabase, SqliteTransaction, SqlValue } from "../src/storage/sqlite/database.ts";
import { SQL } from "../src/storage/sqlite/schema.ts";
import { SqliteStorage } from "../src/storage/sqlite/storage.ts";
import { openSqliteDatabase } from "../src/storage/sqlite/wasm.ts";
import { ctx, openHarness, runUntil } from "./support.ts";

// Decision 0061: what a lone task's step pays in SQLite beyond a raw single-row commit. On OPFS (counted in the
// browser by `npm run bench:lone-step`) both write one WAL frame (a 24-byte header and one page) and sync nothing;
// here, the statements: a step is one transaction of one UPDATE of its record, binding the record and its id, and
// reads nothing — the same statement count as the raw commit it is measured against (issue 25 item 2).

const STEPS = 12;

interface Statement {
  sql: string;
  params: SqlValue[];
}

/** The database with every statement recorded: each transaction's, and each one run outside a transaction. */
function recording(db: SqliteDatabase) {
  const transactions: Statement[][] = [];
  const outside: Statement[] = [];
  const database = new Proxy(db, {
    get(target, key) {
      if (key === "transaction")
        return <T>(body: (tx: SqliteTransaction) => T) =>
          target.transaction((tx) => {
            const statements: Statement[] = [];
            transactions.push(statements);
            const noted = <R>(sql: string, params: SqlValue[], run: () => R): R => {
              statements.push({ sql, params });
              return run();
            };
            return body({
              run: (sql, ...params) => noted(sql, params, () => tx.run(sql, ...params)),
              get: (sql, ...params) => noted(sql, params, () => tx.get(sql, ...params)),
              all: (sql, ...params) => noted(sql, params, () => tx.all(sql, ...params)),
              ...(tx.writes ? { writes: () => tx.writes!() } : {}),
            });
          });
      if (key === "run" || key === "get" || key === "all" || key === "each" || key === "exec")
        return (sql: string, ...rest: unknown[]) => {
          outside.push({ sql, params: rest.filter((value) => typeof value !== "function") as SqlValue[] });
          return (Reflect.get(target, key) as (...args: unknown[]) => unknown).call(target, sql, ...rest);
        };
      const value = Reflect.get(target, key) as unknown;
      return typeof value === "function" ? value.bind(target) : value;
    },
  });
  return { database, transactions, outside };
}

// Decision 0091: the storage the product opens (`openSqliteStorage`) defers fenced steps' task rows (decisions 0081,
// 0086); a lone step has no lease, so it writes its row at once, as the raw commit does: no mark, no more statements.
describe.each([
  { storage: "writing its task rows at once", deferTaskRows: false },
  { storage: "deferring fenced steps' task rows (the product's, decisions 0081/0086/0091)", deferTaskRows: true },
])("a lone task's step in SQLite (decision 0061), storage $storage", ({ deferTaskRows }) => {
  it("0061/S3/S11: each step is one transaction of one UPDATE of the task's record (its text and id bound), with nothing read", async () => {
    const db = await openSqliteDatabase({ vfs: "memory" });
    const { database, transactions, outside } = recording(db);
    const storage = await SqliteStorage.open(database, "lone", { deferTaskRows });
    const registry = createRegistry().install(defineExtension({ name: "t", tasks: [stepper] }));
    const { harness, clock } = await openHarness(storage, { registry });
    const root = await harness.root(ctx);
    const id = await root.commit((tx) => tx.createTask(stepper, { steps: STEPS }), ctx);
    const created = transactions.length;
    const outsideBefore = outside.length;
    harness.resume();
    let done = false;
    const finished = harness.waitForTask(id, ctx).then((record) => {
      done = true;
      return record;
    });
    await runUntil(clock, () => done);
    expect((await finished).state).toEqual({ status: "terminal", outcome: { status: "completed", result: STEPS } });

    // The task's start (pending → running: its status too, once per task), then steps 1..STEPS-1 keeping it running,
    // then the last one, which ends it (its status too).
    const after = transactions.slice(created);
    expect(after).toHaveLength(1 + STEPS);
    expect(after[0]!.map((statement) => statement.sql)).toEqual([SQL.updateTask]);
    expect(after[STEPS]!.map((statement) => statement.sql)).toEqual([SQL.updateTask]);
    const steps = after.slice(1, STEPS);
    expect(outside.length).toBe(outsideBefore);
    const started = JSON.parse(after[0]![0]!.params[1] as string) as { state: unknown };
    for (const [index, statements] of steps.entries()) {
      expect(statements.map((statement) => statement.sql)).toEqual([SQL.updateTaskRecord]);
      const [record, boundId] = statements[0]!.params;
      expect(boundId).toBe(id);
      expect(statements[0]!.params).toHaveLength(2);
      const written = JSON.parse(record as string) as { state: unknown };
      expect(written.state).toEqual({ status: "running", checkpoint: { phase: "step", n: index + 1 }, progressed: expect.any(Number) });
      // The whole record, as the start wrote it but for the state.
      expect({ ...written, state: null }).toEqual({ ...started, state: null });
    }
    await harness.close(ctx);
    await db.close();
  });
});
