import { describe, expect, it } from "vitest";
import { createRegistry, DatabaseCorrupt, defineExtension, defineTask, Harness, MemoryStorage, QueryNotReadOnly } from "../src/index.ts";
import { openSqliteStorage } from "../src/storage/sqlite/open-storage.ts";
import type { SqliteStorage } from "../src/storage/sqlite/storage.ts";
import { ctx } from "./support.ts";

const idle = defineTask<null, { phase: "go" }, string>({
  name: "test.idle",
  version: 1,
  initial: () => ({ phase: "go" }),
  phases: { go: async () => {} },
  abort: async () => {},
});
const registry = createRegistry().install(defineExtension({ name: "test", tasks: [idle] }));

/** A database with one conversation and one pending task, then `damage` run on its SQL. */
async function damaged(damage: string): Promise<Uint8Array> {
  const storage = await openSqliteStorage({ vfs: "memory" });
  const harness = await Harness.open(storage, { registry }, ctx);
  const root = await harness.root(ctx);
  await root.commit((tx) => tx.createTask(idle, null), ctx);
  await harness.close(ctx);
  await (storage as SqliteStorage).database.exec(damage);
  return storage.exportImage();
}

describe("B4: damaged rows give DatabaseCorrupt and change nothing", () => {
  for (const [what, damage] of [
    ["malformed record JSON", "UPDATE tasks SET record = '{\"id\": 2, ' WHERE id = 2"],
    ["a null record", "UPDATE tasks SET record = 'null' WHERE id = 2"],
    ["a record without state", "UPDATE tasks SET record = json_remove(record, '$.state') WHERE id = 2"],
    ["a malformed conversation", "UPDATE conversations SET record = 'nope' WHERE id = 1"],
  ] as const) {
    it(`S11/B4: ${what}: a writable open is refused with DatabaseCorrupt, a read-only open still inspects it`, async () => {
      const image = await damaged(damage);
      const storage = await openSqliteStorage({ vfs: "memory", image });
      const error = await Harness.open(storage, { registry }, ctx).catch((e: unknown) => e);
      expect(error).toBeInstanceOf(DatabaseCorrupt);
      expect((error as Error).message).toMatch(/readOnly/);
      expect(await storage.exportImage()).toEqual(image);
      const reader = await Harness.open(
        await openSqliteStorage({ vfs: "memory", image, readOnly: true }),
        { registry, readOnly: true },
        ctx,
      );
      expect((await reader.storage.query("SELECT count(*) AS n FROM tasks"))[0]).toEqual({ n: 2 - 1 });
      expect((await reader.inspect(ctx)).tasks).toHaveLength(what.includes("conversation") ? 1 : 0);
    });
  }

  it("S11/B4: reading a damaged row gives DatabaseCorrupt, not a SyntaxError", async () => {
    const image = await damaged("UPDATE tasks SET record = '{bad' WHERE id = 2");
    const storage = await openSqliteStorage({ vfs: "memory", image, readOnly: true });
    await expect(storage.getTask(2)).rejects.toBeInstanceOf(DatabaseCorrupt);
  });

  it("S11/B4: another app's meta table gives DatabaseCorrupt and is left unmodified, also read-only", async () => {
    const other = await openSqliteStorage({ vfs: "memory" }).catch(() => undefined);
    void other;
    const { openSqliteDatabase } = await import("../src/storage/sqlite/wasm.ts");
    const db = await openSqliteDatabase({ vfs: "memory" });
    await db.exec("CREATE TABLE meta (name TEXT, size INTEGER); INSERT INTO meta VALUES ('theirs', 3);");
    const image = await db.exportImage();
    for (const readOnly of [false, true]) {
      const error = await openSqliteStorage({ vfs: "memory", image, readOnly }).catch((e: unknown) => e);
      expect(error).toBeInstanceOf(DatabaseCorrupt);
      expect((error as Error).message).toMatch(/not a pi-durable/);
    }
  });

  it("S11/B4: a MemoryStorage image with a malformed task is refused the same way", async () => {
    const storage = new MemoryStorage();
    const harness = await Harness.open(storage, { registry }, ctx);
    await (await harness.root(ctx)).commit((tx) => tx.createTask(idle, null), ctx);
    await harness.close(ctx);
    const image = JSON.parse(new TextDecoder().decode(await storage.exportImage()));
    image.tasks["2"] = "{bad";
    const bytes = new TextEncoder().encode(JSON.stringify(image));
    await expect(Harness.open(MemoryStorage.fromImage(bytes), { registry }, ctx)).rejects.toBeInstanceOf(DatabaseCorrupt);
    const reader = await Harness.open(MemoryStorage.fromImage(bytes, { readOnly: true }), { registry, readOnly: true }, ctx);
    expect((await reader.inspect(ctx)).tasks).toEqual([]);
  });
});

describe("B10: storage.query() refuses every statement that is not read-only", () => {
  it("S5/B10: PRAGMA name(value), PRAGMA name = value, writes and several statements are refused; reads work", async () => {
    const storage = await openSqliteStorage({ vfs: "memory" });
    await Harness.open(storage, { registry }, ctx);
    for (const sql of [
      "PRAGMA user_version(7)",
      "PRAGMA user_version = 7",
      "PRAGMA journal_mode(DELETE)",
      "PRAGMA query_only(0)",
      "PRAGMA foreign_keys = ON",
      "pragma main.user_version(3)",
      "DELETE FROM tasks",
      "WITH x AS (SELECT 1) DELETE FROM tasks",
      "SELECT 1; DELETE FROM tasks",
      "COMMIT",
      "ATTACH ':memory:' AS other",
    ]) {
      await expect(storage.query(sql), sql).rejects.toBeInstanceOf(QueryNotReadOnly);
    }
    expect((await storage.query("PRAGMA user_version"))[0]).toEqual({ user_version: 0 });
    expect(await storage.query("SELECT count(*) AS n FROM tasks")).toEqual([{ n: 0 }]);
    expect(await storage.query("PRAGMA table_info(pi_durable_meta)")).toHaveLength(2);
  });
});
