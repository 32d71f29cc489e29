import fc from "fast-check";
import { describe, expect, it } from "vitest";
import type { TaskRecord } from "../src/storage/records.ts";
import type { SqliteDatabase, SqlValue } from "../src/storage/sqlite/database.ts";
import { readLiveTasks } from "../src/storage/sqlite/live-tasks.ts";
import { openSqliteStorage } from "../src/storage/sqlite/open-storage.ts";
import { SQL } from "../src/storage/sqlite/schema.ts";
import { SqliteStorage } from "../src/storage/sqlite/storage.ts";
import type { DamagedRow } from "../src/storage/storage.ts";

// Decision 0110: where rows are unlimited the open reads every live row in one row (ids and record texts joined),
// not row by row into JavaScript; each text is still parsed on its own (B4), and anything the joined row cannot
// tell one for one is read row by row as before.

const STATUSES = ["pending", "running", "sleeping", "waiting", "terminal"] as const;

const sound = (id: number, status: string, note: string) =>
  JSON.stringify({ id, conversationId: 1, kind: "test.idle", state: { status, checkpoint: { phase: "go", note } } });

/** A record's stored value: sound, or damaged in a way a join could hide (see `kinds`). */
type Stored = { kind: string; value: SqlValue };
const kinds = (id: number, status: string, note: string): Stored[] => [
  { kind: "sound", value: sound(id, status, note) },
  { kind: "truncated", value: `{"id": ${id}, ` },
  { kind: "an object's half", value: `{"id":${id},"state":{"status":"${status}","checkpoint":{"phase":"go"}},"x":"` },
  { kind: "the other half", value: `"}` },
  { kind: "two records", value: `${sound(id, status, note)},${sound(id, status, note)}` },
  { kind: "the separator inside", value: `${sound(id, status, note).slice(0, -1)},"s":"\u001e"}` },
  { kind: "the separator outside", value: `${sound(id, status, note)}\u001e${sound(id, status, note)}` },
  { kind: "a number", value: 7 },
  { kind: "a blob of a record", value: new TextEncoder().encode(sound(id, status, note)) },
  { kind: "empty", value: "" },
  { kind: "null", value: "null" },
  { kind: "another row's id", value: sound(id + 1, status, note) },
  { kind: "deep", value: `${"[".repeat(1100)}${"]".repeat(1100)}` },
];

async function withRows(rows: ReadonlyArray<{ id: number; status: string; value: SqlValue }>): Promise<SqliteDatabase> {
  const db = (await openSqliteStorage({ vfs: "memory" })).database;
  await db.transaction((tx) => {
    for (const { id, status, value } of rows)
      tx.run("INSERT INTO tasks (id, conversation_id, kind, status, record) VALUES (?, 1, 'test.idle', ?, ?)", id, status, value);
  });
  return db;
}

/** `db` counting the rows its reads of the live index hand to JavaScript, by method. */
function counting(db: SqliteDatabase, rows: Record<string, number>): SqliteDatabase {
  return new Proxy(db, {
    get(target, key) {
      const value = Reflect.get(target, key, target) as unknown;
      if (typeof value !== "function") return value;
      const call = (value as (...args: unknown[]) => unknown).bind(target);
      if (key === "each")
        return (sql: string, onRow: (row: unknown) => void) =>
          call(sql, (row: unknown) => {
            if (sql.includes("tasks_live")) rows.each = (rows.each ?? 0) + 1;
            onRow(row);
          });
      if (key === "all" || key === "get")
        return async (sql: string, ...rest: unknown[]) => {
          const result = await call(sql, ...rest);
          if (sql.includes("tasks_live")) rows[key] = (rows[key] ?? 0) + (Array.isArray(result) ? result.length : result ? 1 : 0);
          return result;
        };
      return call;
    },
  });
}

describe("the open's live read in one row (decision 0110)", () => {
  it("B4, S4: an open of 2,500 live tasks hands JavaScript one row for them, not 2,500, and loads every task in id order", async () => {
    const rows = Array.from({ length: 2500 }, (_, index) => {
      const id = 2500 - index; // inserted in reverse id order
      const status = STATUSES[index % 4]!;
      return { id, status, value: sound(id, status, "ü ✓") }; // not all ASCII
    });
    const read: Record<string, number> = {};
    const state = await (await SqliteStorage.open(counting(await withRows(rows), read))).load();
    expect(state.liveTasks.map((task) => task.id)).toEqual(Array.from({ length: 2500 }, (_, index) => index + 1));
    expect(state.liveTasks[0]!.state).toEqual({ status: STATUSES[2499 % 4], checkpoint: { phase: "go", note: "ü ✓" } });
    expect(state.damaged).toBeUndefined();
    expect(read).toEqual({ get: 1 }); // fails on the old code: { each: 2500 }
  });

  it("B4: the live tasks and the damaged rows are exactly what the row-by-row read gives, whatever the rows hold (property)", async () => {
    const row = fc.record({ status: fc.constantFrom(...STATUSES), kind: fc.nat(40), note: fc.string({ unit: "binary", maxLength: 8 }) });
    await fc.assert(
      fc.asyncProperty(fc.array(row, { minLength: 0, maxLength: 30 }), fc.integer({ min: 1, max: 2 ** 40 }), async (drawn, base) => {
        const rows = drawn
          .map(({ status, kind, note }, index) => {
            const id = base + index * 2;
            const options = kinds(id, status, note);
            return { id, status, value: (kind < options.length ? options[kind]! : options[0]!).value };
          })
          .reverse();
        const db = await withRows(rows);
        const damagedJoined: DamagedRow[] = [];
        const damagedByRow: DamagedRow[] = [];
        const joined: TaskRecord[] = await readLiveTasks(db, SQL.liveTasks, damagedJoined, SQL.liveTasksJoined);
        const byRow: TaskRecord[] = await readLiveTasks(db, SQL.liveTasks, damagedByRow);
        expect(joined).toEqual(byRow);
        expect(damagedJoined).toEqual(damagedByRow);
        await db.close();
      }),
      { numRuns: 60, seed: 110 },
    );
  });
});
