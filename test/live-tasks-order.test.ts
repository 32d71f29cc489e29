import fc from "fast-check";
import { describe, expect, it } from "vitest";
import type { SqliteDatabase } from "../src/storage/sqlite/database.ts";
import { openSqliteStorage } from "../src/storage/sqlite/open-storage.ts";
import { SqliteStorage } from "../src/storage/sqlite/storage.ts";

// Decision 0104: the open's live read goes through the live index without ORDER BY (no SQLite sort of every live
// record in front of the first resumed step); the load still hands the records, and the damaged rows, in id order.

const STATUSES = ["pending", "running", "sleeping", "waiting", "terminal"] as const;
type Status = (typeof STATUSES)[number];

/** A fresh storage's database with `rows` written straight into its task table (ids, statuses, damaged or not). */
async function withTasks(rows: ReadonlyArray<{ id: number; status: Status; damaged: boolean }>): Promise<SqliteDatabase> {
  const storage = await openSqliteStorage({ vfs: "memory" });
  const db = storage.database;
  await db.transaction((tx) => {
    for (const { id, status, damaged } of rows) {
      const state = status === "terminal" ? { status, outcome: { ok: true, value: null } } : { status, checkpoint: { phase: "go" } };
      const record = damaged ? `{"id": ${id}, ` : JSON.stringify({ id, conversationId: 1, kind: "test.idle", state });
      tx.run("INSERT INTO tasks (id, conversation_id, kind, status, record) VALUES (?, 1, 'test.idle', ?, ?)", id, status, record);
    }
  });
  return db;
}

/** `db` with every statement's SQL recorded. */
function recording(db: SqliteDatabase, seen: string[]): SqliteDatabase {
  return new Proxy(db, {
    get(target, key) {
      const value = Reflect.get(target, key, target) as unknown;
      if (typeof value !== "function") return value;
      if (key === "each" || key === "all" || key === "get")
        return (sql: string, ...rest: unknown[]) => {
          seen.push(sql);
          return (value as (...args: unknown[]) => unknown).call(target, sql, ...rest);
        };
      return (value as (...args: unknown[]) => unknown).bind(target);
    },
  });
}

describe("the open's live read (decision 0104)", () => {
  it("B4, S4: the live read runs no SQLite sort (its plan has no temp b-tree) and still hands the tasks in id order", async () => {
    const statuses: Status[] = ["sleeping", "running", "pending", "running", "waiting", "sleeping", "terminal", "running"];
    const db = await withTasks(statuses.map((status, index) => ({ id: 10 + index, status, damaged: false })));
    const seen: string[] = [];
    const state = await (await SqliteStorage.open(recording(db, seen))).load();
    const live = seen.filter((sql) => sql.includes("tasks_live") && sql.includes("record"));
    expect(live).toHaveLength(1);
    const plan = (await db.all(`EXPLAIN QUERY PLAN ${live[0]!}`)).map((row) => String(row.detail)).join("; ");
    expect(plan).toContain("USING INDEX tasks_live");
    expect(plan).not.toContain("TEMP B-TREE"); // fails on the old code: "USE TEMP B-TREE FOR ORDER BY"
    expect(state.liveTasks.map((task) => task.id)).toEqual([10, 11, 12, 13, 14, 15, 17]);
  });

  it("B4: live tasks of any statuses, some damaged, load in id order and the damaged ones are listed in id order (property)", async () => {
    const row = fc.record({ status: fc.constantFrom(...STATUSES), damaged: fc.nat(4).map((n) => n === 0) });
    await fc.assert(
      fc.asyncProperty(fc.array(row, { minLength: 0, maxLength: 60 }), fc.integer({ min: 1, max: 2 ** 40 }), async (rows, base) => {
        // Inserted in reverse id order, so neither the table's nor the index's pages follow the ids by accident.
        const tasks = rows.map((r, index) => ({ ...r, id: base + index * 3 })).reverse();
        const state = await (await SqliteStorage.open(await withTasks(tasks))).load();
        const live = tasks.filter((task) => task.status !== "terminal").sort((a, b) => a.id - b.id);
        expect(state.liveTasks.map((task) => task.id)).toEqual(live.filter((task) => !task.damaged).map((task) => task.id));
        expect((state.damaged ?? []).filter((d) => d.table === "tasks").map((d) => Number(d.id))).toEqual(
          live.filter((task) => task.damaged).map((task) => task.id),
        );
      }),
      { numRuns: 40, seed: 104 },
    );
  });
});
