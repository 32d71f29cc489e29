import fc from "fast-check";
import { describe, expect, it, vi } from "vitest";
import { createRegistry, DatabaseCorrupt, Harness } from "../src/index.ts";
import { STORED_DEPTH_LIMIT } from "../src/limits.ts";
import type { TaskRecord } from "../src/storage/records.ts";
import { parseInto } from "../src/storage/rows.ts";
import { type ChunkShape, readLiveTasks } from "../src/storage/sqlite/live-read.ts";
import { openSqliteStorage } from "../src/storage/sqlite/open-storage.ts";
import { SQL } from "../src/storage/sqlite/schema.ts";
import type { DamagedRow } from "../src/storage/storage.ts";
import { ctx } from "./support.ts";

const record = (id: number, status = "pending", extra: Record<string, unknown> = {}) =>
  JSON.stringify({
    id,
    conversationId: 1,
    kind: "test.live",
    version: 1,
    input: null,
    ...extra,
    state: { status, checkpoint: { phase: "go" } },
  });

/** A database (its image) with `live` live tasks and a finished one after every third, written as rows. */
async function image(live: number, text: (id: number) => string = (id) => record(id)): Promise<Uint8Array> {
  const storage = await openSqliteStorage({ vfs: "memory" });
  await storage.database.transaction((tx) => {
    let id = 1;
    for (let made = 0; made < live; made++) {
      tx.run(SQL.insertTask, id, 1, "test.live", "pending", text(id));
      id++;
      if (made % 3 === 2) {
        tx.run(SQL.insertTask, id, 1, "test.live", "terminal", JSON.stringify({ id, state: { status: "terminal", outcome: {} } }));
        id++;
      }
    }
  });
  return storage.exportImage();
}

/** What the row-by-row read gives (the reference: decisions 0054 and B4). */
async function byRows(bytes: Uint8Array): Promise<{ records: TaskRecord[]; damaged: DamagedRow[] }> {
  const storage = await openSqliteStorage({ vfs: "memory", image: bytes });
  const records: TaskRecord[] = [];
  const damaged: DamagedRow[] = [];
  for (const row of await storage.database.all(SQL.liveTasks)) parseInto("tasks", row.id as number, row.record, records, damaged);
  await storage.close();
  return { records, damaged };
}

async function byChunks(bytes: Uint8Array, shape: ChunkShape): Promise<{ records: TaskRecord[]; damaged: DamagedRow[] }> {
  const storage = await openSqliteStorage({ vfs: "memory", image: bytes });
  const records: TaskRecord[] = [];
  const damaged: DamagedRow[] = [];
  expect(await readLiveTasks(storage.database, records, damaged, shape)).toBe(true);
  await storage.close();
  return { records, damaged };
}

const deep = (levels: number) => `${"[".repeat(levels)}${"]".repeat(levels)}`;

/** Ways a stored record can be damaged, each as SQL for `record = …` of row `id`. */
const DAMAGE: Record<string, (id: number) => string> = {
  "not JSON": () => `'{broken'`,
  "two values": (id) => `'${record(id)},${record(id)}'`,
  "a closing bracket": (id) => `'${record(id)}],[1'`,
  null: () => `'null'`,
  "an array": () => `'[]'`,
  "a number": () => `'5'`,
  "a string": () => `'"text"'`,
  "no state": (id) => `'{"id":${id}}'`,
  "a null state": (id) => `'{"id":${id},"state":null}'`,
  "another row's id": (id) => `'${record(id + 1000)}'`,
  "a blob of a record": (id) => `CAST('${record(id)}' AS BLOB)`,
  "empty text": () => `''`,
  [`nested ${STORED_DEPTH_LIMIT + 1} deep`]: (id) => `'${record(id, "pending", { deep: JSON.parse(deep(STORED_DEPTH_LIMIT)) })}'`,
  [`nested ${STORED_DEPTH_LIMIT} deep (sound)`]: (id) => `'${record(id, "pending", { deep: JSON.parse(deep(STORED_DEPTH_LIMIT - 1)) })}'`,
  "long (read alone)": (id) => `'${record(id, "pending", { pad: "x".repeat(600) })}'`,
  "multi-byte text": (id) => `'${record(id, "pending", { text: "é🙂中" })}'`,
};

describe("the open reads its live tasks in chunks (decision 0080)", () => {
  it("B4/decision 0080: 2,500 live tasks come back in three chunk statements, none row by row, equal to the row-by-row read", async () => {
    const bytes = await image(2500);
    const storage = await openSqliteStorage({ vfs: "memory", image: bytes, liveRead: "chunks" });
    const get = vi.spyOn(storage.database, "get");
    const each = vi.spyOn(storage.database, "each" as never);
    const all = vi.spyOn(storage.database, "all");
    const state = await storage.load();
    const chunks = get.mock.calls.filter(([sql]) => String(sql).includes("group_concat"));
    expect(chunks).toHaveLength(3);
    expect(each).not.toHaveBeenCalled();
    expect(all.mock.calls.some(([sql]) => String(sql).includes("FROM tasks"))).toBe(false);
    expect(state.liveTasks).toEqual((await byRows(bytes)).records);
    expect(state.liveTasks.map((task) => task.id)).toEqual(state.liveTasks.map((task) => task.id).sort((a, b) => a - b));
    expect(state.damaged).toBeUndefined();
  });

  it("B4/decision 0080: every kind of damaged row is listed exactly as the row-by-row read lists it, the sound rows around it kept (property)", async () => {
    const live = 12;
    const base = await image(live);
    const ids = (await byRows(base)).records.map((task) => task.id);
    const kinds = Object.keys(DAMAGE);
    await fc.assert(
      fc.asyncProperty(
        fc.array(fc.tuple(fc.integer({ min: 0, max: live - 1 }), fc.constantFrom(...kinds)), { maxLength: 4 }),
        fc.record({
          rows: fc.integer({ min: 1, max: 6 }),
          bytes: fc.integer({ min: 100, max: 3000 }),
          lone: fc.integer({ min: 200, max: 5000 }),
        }),
        async (damage, shape) => {
          const storage = await openSqliteStorage({ vfs: "memory", image: base });
          for (const [index, kind] of damage)
            await storage.database.run(`UPDATE tasks SET record = ${DAMAGE[kind]!(ids[index]!)} WHERE id = ${ids[index]}`);
          const bytes = await storage.exportImage();
          await storage.close();
          expect(await byChunks(bytes, shape)).toEqual(await byRows(bytes));
        },
      ),
      { numRuns: 60 },
    );
  });

  it("B4: a writable open with a damaged row in a chunk is refused and the file is left as it was; read-only still shows the rest", async () => {
    const bytes = await image(30, (id) => (id === 17 ? "{broken" : record(id)));
    const storage = await openSqliteStorage({ vfs: "memory", image: bytes, liveRead: "chunks" });
    const error = await Harness.open(storage, { registry: createRegistry() }, ctx).catch((caught: unknown) => caught);
    expect(error).toBeInstanceOf(DatabaseCorrupt);
    expect((error as Error).message).toMatch(/task 17/);
    expect(await storage.exportImage()).toEqual(bytes);
    const readOnly = await openSqliteStorage({ vfs: "memory", image: bytes, liveRead: "chunks" });
    const state = await readOnly.load();
    expect(state.damaged).toEqual([{ table: "tasks", id: 17, problem: "the record is not valid JSON" }]);
    expect(state.liveTasks).toHaveLength(29);
  });

  it("a bad liveRead setting is refused before the database is opened", async () => {
    await expect(openSqliteStorage({ vfs: "memory", liveRead: "batches" as never })).rejects.toThrow(
      /liveRead is "batches": use "rows" or "chunks"/,
    );
  });
});
