import { readFileSync } from "node:fs";
import { describe, expect, it } from "vitest";
import { counterTask, SEED_QUERY } from "../examples/counter-task.ts";
import { createRegistry, DatabaseCorrupt, defineExtension, SchemaTooNew } from "../src/index.ts";
import type { SqliteDatabase } from "../src/storage/sqlite/database.ts";
import { openSqliteStorage } from "../src/storage/sqlite/open-storage.ts";
import { SCHEMA_VERSION } from "../src/storage/sqlite/schema.ts";
import { SqliteStorage } from "../src/storage/sqlite/storage.ts";
import { openSqliteDatabase } from "../src/storage/sqlite/wasm.ts";
import { asObjects } from "./sqlite-support.ts";
import { ctx, openHarness, runUntil } from "./support.ts";
import { taskRecord } from "./task-record.ts";

/**
 * An image made by the code of version 1 (commit 57aac82): the seed's counter to 5, killed right after it
 * printed tick 2 (task 2 running at n = 2, memos printed-1 and printed-2), its marker table still named `meta`.
 */
const V1_IMAGE = new Uint8Array(readFileSync(new URL("./fixtures/schema-v1-counter.sqlite", import.meta.url)));

async function tableNames(db: SqliteDatabase): Promise<string[]> {
  return (await db.all("SELECT name FROM sqlite_schema WHERE type = 'table' ORDER BY name")).map((row) => String(row.name));
}

/** The same database, saying it is shared with an app (as a Durable Object's is). */
const shared = (db: SqliteDatabase) => asObjects(db, { shared: true });

describe("S11: schema version 1 migrates to the current version", () => {
  it("S11/S12: a version-1 image opens writable, its marker becomes pi_durable_meta, and the counter goes on from tick 3", async () => {
    const storage = await openSqliteStorage({ vfs: "memory", image: V1_IMAGE });
    const db = storage.database;
    expect(await tableNames(db)).toEqual([
      "conversations",
      "documents",
      "entries",
      "pi_durable_epochs",
      "pi_durable_forks",
      "pi_durable_log",
      "pi_durable_log_parts",
      "pi_durable_meta",
      "submissions",
      "tasks",
    ]);
    expect(await db.get("SELECT value FROM pi_durable_meta WHERE key = 'schema_version'")).toEqual({ value: String(SCHEMA_VERSION) });
    expect(await storage.query(SEED_QUERY)).toEqual([
      { id: 2, status: "running", n: 2, memos: '{"printed-1":true,"printed-2":true}', restarts: null },
    ]);
    const printed: string[] = [];
    const registry = createRegistry().install(
      defineExtension({ name: "example", tasks: [counterTask((line) => void printed.push(line))] }),
    );
    const { harness, clock } = await openHarness(storage, { registry });
    let done: Awaited<ReturnType<typeof harness.waitForTask>> | undefined;
    void harness.waitForTask(2, ctx).then((task) => (done = task));
    harness.resume();
    await runUntil(clock, () => done !== undefined);
    expect(printed).toEqual(["tick 3", "tick 4", "tick 5"]);
    expect(done?.state).toMatchObject({ status: "terminal", outcome: { status: "completed", result: "counted to 5" } });
    await harness.close(ctx);
  });

  it("S11: a read-only open of a version-1 image reads it in place and leaves it unmodified", async () => {
    const storage = await openSqliteStorage({ vfs: "memory", image: V1_IMAGE, readOnly: true });
    expect((await storage.load()).liveTasks.map((task) => [task.id, task.state.status])).toEqual([[2, "running"]]);
    expect(await storage.exportImage()).toEqual(V1_IMAGE);
  });

  it("S11: a version-1 marker with a newer version is refused as too new, unmodified", async () => {
    const db = await openSqliteDatabase({ vfs: "memory", image: V1_IMAGE });
    await db.run("UPDATE meta SET value = '7' WHERE key = 'schema_version'");
    const image = await db.exportImage();
    await expect(openSqliteStorage({ vfs: "memory", image })).rejects.toBeInstanceOf(SchemaTooNew);
    expect(await tableNames(await openSqliteDatabase({ vfs: "memory", image }))).toContain("meta");
  });
});

describe("S11: a file of the harness's own (the browser) keeps telling foreign and damaged files apart", () => {
  for (const [what, sql, message] of [
    [
      "another app's tables only",
      "CREATE TABLE notes (id INTEGER PRIMARY KEY, body TEXT)",
      /not a pi-durable one \(it has no pi_durable_meta/,
    ],
    ["another app's meta table", "CREATE TABLE meta (name TEXT, size INTEGER)", /not a pi-durable one \(its meta table is another app's/],
    ["our tables without the marker", "CREATE TABLE tasks (id INTEGER PRIMARY KEY, record TEXT)", /not a pi-durable one/],
  ] as const) {
    it(`B4: ${what}: refused with DatabaseCorrupt and left unmodified, writable or read-only`, async () => {
      const db = await openSqliteDatabase({ vfs: "memory" });
      await db.exec(sql);
      const image = await db.exportImage();
      for (const readOnly of [false, true]) {
        const error = await openSqliteStorage({ vfs: "memory", image, readOnly }).catch((e: unknown) => e);
        expect(error).toBeInstanceOf(DatabaseCorrupt);
        expect((error as Error).message).toMatch(message);
      }
      const again = await openSqliteDatabase({ vfs: "memory", image });
      expect(await again.exportImage()).toEqual(image);
    });
  }

  it("B4: the marker with a table dropped is damage: refused with DatabaseCorrupt naming the table", async () => {
    const storage = await openSqliteStorage({ vfs: "memory" });
    await storage.database.exec("DROP TABLE entries");
    const image = await storage.exportImage();
    await expect(openSqliteStorage({ vfs: "memory", image })).rejects.toThrow(/lacks the tables entries/);
  });
});

describe("S11: schema version 2 migrates to the current version (the fenced log, decision 0029)", () => {
  /** A version-2 image: today's schema without the log's table, its marker saying 2, one live task. */
  async function v2Image(): Promise<Uint8Array> {
    const storage = await openSqliteStorage({ vfs: "memory" });
    await storage.apply({
      tasks: [taskRecord(1, { status: "running", checkpoint: { phase: "p" } })],
      conversations: [],
      entries: [],
      submissions: [],
      documents: [],
      nextId: 2,
    });
    await storage.database.exec(
      "DROP TABLE pi_durable_epochs; DROP TABLE pi_durable_log; DROP TABLE pi_durable_log_parts; DROP TABLE pi_durable_forks; UPDATE pi_durable_meta SET value = '2' WHERE key = 'schema_version';",
    );
    return storage.exportImage();
  }

  it("S11: a writable open adds the log's tables and says the current version; the rows stay, and the first fenced commit starts the log", async () => {
    const storage = await openSqliteStorage({ vfs: "memory", image: await v2Image() });
    expect(await tableNames(storage.database)).toEqual(expect.arrayContaining(["pi_durable_epochs", "pi_durable_log"]));
    expect(await storage.database.get("SELECT value FROM pi_durable_meta WHERE key = 'schema_version'")).toEqual({
      value: String(SCHEMA_VERSION),
    });
    expect((await storage.load()).liveTasks.map((task) => task.id)).toEqual([1]);
    expect((await storage.load()).log).toBeUndefined();
    await storage.apply({ tasks: [], conversations: [], entries: [], submissions: [], documents: [], fence: { epoch: 1, position: 1 } });
    expect((await storage.load()).log).toEqual({ epoch: 1, position: 1 });
  });

  it("S5/S11: a read-only open of a version-2 image reads it without a log and leaves it unmodified", async () => {
    const image = await v2Image();
    const storage = await openSqliteStorage({ vfs: "memory", image, readOnly: true });
    const state = await storage.load();
    expect(state.liveTasks.map((task) => task.id)).toEqual([1]);
    expect(state.log).toBeUndefined();
    expect(await storage.exportImage()).toEqual(image);
  });
});

describe("S11: a database shared with an app (as an object's SQLite is)", () => {
  it("S11: the app's tables first, then the harness: created beside them, the app's rows untouched, and again on reopen", async () => {
    const raw = await openSqliteDatabase({ vfs: "memory" });
    await raw.exec("CREATE TABLE meta (name TEXT); INSERT INTO meta VALUES ('the app''s'); CREATE TABLE notes (body TEXT);");
    const storage = await SqliteStorage.open(shared(raw), "shared");
    expect(await tableNames(raw)).toEqual([
      "conversations",
      "documents",
      "entries",
      "meta",
      "notes",
      "pi_durable_epochs",
      "pi_durable_forks",
      "pi_durable_log",
      "pi_durable_log_parts",
      "pi_durable_meta",
      "submissions",
      "tasks",
    ]);
    expect(await raw.all("SELECT name FROM meta")).toEqual([{ name: "the app's" }]);
    expect(await storage.query(SEED_QUERY)).toEqual([]);
    await SqliteStorage.open(shared(raw), "shared"); // ours now: opens again as it is
    expect(await tableNames(raw)).toHaveLength(12);
  });

  it("S11: an app table with one of our names (tasks) is refused with DatabaseCorrupt saying what to rename, unmodified", async () => {
    const raw = await openSqliteDatabase({ vfs: "memory" });
    await raw.exec("CREATE TABLE tasks (title TEXT)");
    const error = await SqliteStorage.open(shared(raw), "shared").catch((e: unknown) => e);
    expect(error).toBeInstanceOf(DatabaseCorrupt);
    expect((error as Error).message).toMatch(/tables named like pi-durable's \(tasks\).*Rename the app's tables/);
    expect(await tableNames(raw)).toEqual(["tasks"]);
  });

  it("S11: a shared database with none of our tables is not opened read-only (there is nothing to read)", async () => {
    const raw = await openSqliteDatabase({ vfs: "memory" });
    await raw.exec("CREATE TABLE notes (body TEXT)");
    const image = await raw.exportImage();
    const reader = await openSqliteDatabase({ vfs: "memory", image, readOnly: true });
    await expect(SqliteStorage.open(shared(reader), "shared")).rejects.toThrow(/no pi-durable database in it/);
  });
});
