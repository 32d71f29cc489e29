import { describe, expect, it } from "vitest";
import { LogOutOfOrder, SchemaTooNew, StaleEpoch } from "../src/errors.ts";
import type { SqliteDatabase } from "../src/storage/sqlite/database.ts";
import { SCHEMA_VERSION } from "../src/storage/sqlite/schema.ts";
import { SqliteStorage } from "../src/storage/sqlite/storage.ts";
import { openSqliteDatabase } from "../src/storage/sqlite/wasm.ts";
import { failingAt } from "./failing-at.ts";
import { stepped } from "./sqlite-support.ts";

// Decision 0048 (schema version 5): a fenced transaction writes one row of the log and nothing else of it; the
// head is the log's last row, and the marker's log_position is only the head's floor, written when the tail is
// trimmed (or a copy rebuilt). The fence stays as strict (S11), a version 4 database opens with everything intact,
// and a crash at any statement of the write, the trim or the migration leaves the old state or the new one.

/** Everything a reader of the log sees: the head, the tail, the epochs, the rows. */
async function state(db: SqliteDatabase) {
  const storage = await SqliteStorage.open(db, "reader");
  return {
    head: (await storage.load()).log,
    tail: (await storage.readLog(0, 100)).map((batch) => [batch.fence.position, batch.fence.epoch]),
    epochs: await storage.readEpochs(),
    rows: await db.all("SELECT id, record FROM tasks ORDER BY id"),
    snapshot: (await storage.readSnapshot())?.batch.fence,
  };
}

/** A version 4 image as version 4 wrote it: the same tables, the head in log_position, the version row 4. */
async function v4Image(trimThrough: number) {
  const db = await openSqliteDatabase({ vfs: "memory" });
  const storage = await SqliteStorage.open(db);
  await storage.load();
  for (let position = 1; position <= 6; position++)
    await storage.apply(stepped(1 + (position % 2), position, position, position <= 3 ? 1 : 2));
  await db.exec(`DELETE FROM pi_durable_log WHERE position <= ${trimThrough}; DELETE FROM pi_durable_log_parts WHERE position <= ${trimThrough};
    INSERT INTO pi_durable_meta (key, value) VALUES ('log_position', '6') ON CONFLICT (key) DO UPDATE SET value = excluded.value;
    UPDATE pi_durable_meta SET value = '4' WHERE key = 'schema_version';`);
  const image = await db.exportImage();
  await db.close();
  return image;
}

describe("one row per fenced transaction (decision 0048, schema version 5)", () => {
  it("0048: a fenced commit that continues the head writes its log row and never the marker; the head is the last row", async () => {
    const db = await openSqliteDatabase({ vfs: "memory" });
    const storage = await SqliteStorage.open(db);
    await storage.load();
    for (let position = 1; position <= 5; position++) await storage.apply(stepped(1, position, position, 1));
    await storage.apply(stepped(1, 6, 6, 2)); // a new epoch's start: still no marker row
    expect(await db.get("SELECT value FROM pi_durable_meta WHERE key = 'log_position'")).toBeUndefined();
    expect((await storage.load()).log).toEqual({ epoch: 2, position: 6 });
    expect(await db.get("SELECT value FROM pi_durable_meta WHERE key = 'schema_version'")).toEqual({ value: String(SCHEMA_VERSION) });
    expect(SCHEMA_VERSION).toBeGreaterThanOrEqual(5); // 6 (decision 0081) kept this layout
    await db.close();
  });

  it("0048/S11: a trim through the head keeps it as the floor: load, a snapshot and the next commit go on from it; a writer that missed it is refused", async () => {
    const db = await openSqliteDatabase({ vfs: "memory" });
    const writer = await SqliteStorage.open(db, "writer");
    const other = await SqliteStorage.open(db, "other");
    await writer.load();
    await other.load();
    for (let position = 1; position <= 4; position++) await writer.apply(stepped(1, position, position, 1));
    await writer.trimLog(4);
    expect(await writer.readLog(0, 10)).toEqual([]);
    expect((await state(db)).head).toEqual({ epoch: 1, position: 4 });
    expect((await state(db)).snapshot).toEqual({ epoch: 1, position: 4 });
    // other last saw an empty log: every position it could take is refused, nothing written.
    await expect(other.apply(stepped(2, 1, 1, 1))).rejects.toThrow(LogOutOfOrder);
    await expect(other.apply(stepped(2, 1, 4, 1))).rejects.toThrow(LogOutOfOrder);
    // writer continues its own head although no row is left to compare with.
    await writer.apply(stepped(1, 5, 5, 1));
    await writer.trimLog(3); // a trim below the floor does not lower the head
    expect((await state(db)).head).toEqual({ epoch: 1, position: 5 });
    expect((await state(db)).tail).toEqual([[5, 1]]);
    // A newer epoch from other, then writer's continuation is stale although the last row moved only by one.
    expect((await other.load()).log).toEqual({ epoch: 1, position: 5 });
    await other.apply(stepped(2, 1, 6, 2));
    await expect(writer.apply(stepped(1, 6, 6, 1))).rejects.toThrow(StaleEpoch);
    await expect(writer.apply(stepped(1, 6, 7, 1))).rejects.toThrow(StaleEpoch);
    expect((await writer.load()).log).toEqual({ epoch: 2, position: 6 });
    await expect(writer.apply(stepped(1, 6, 6, 2))).rejects.toThrow(LogOutOfOrder);
    expect((await state(db)).tail).toEqual([
      [5, 1],
      [6, 2],
    ]);
    await db.close();
  });

  for (const trimThrough of [0, 3, 6]) {
    it(`0048: a version 4 database (tail trimmed through ${trimThrough}) opens as the current version (5, then 6) with its head, tail, epochs and rows intact, and goes on committing and following`, async () => {
      const image = await v4Image(trimThrough);
      const readOnly = await openSqliteDatabase({ vfs: "memory", image, readOnly: true });
      const before = await state(readOnly);
      expect(before.head).toEqual({ epoch: 2, position: 6 });
      expect(await readOnly.exportImage()).toEqual(image);
      const db = await openSqliteDatabase({ vfs: "memory", image });
      const after = await state(db);
      expect(after).toEqual(before);
      expect(await db.get("SELECT value FROM pi_durable_meta WHERE key = 'schema_version'")).toEqual({ value: String(SCHEMA_VERSION) });
      const writer = await SqliteStorage.open(db, "writer");
      const follower = await SqliteStorage.open(db, "follower");
      await writer.load();
      await writer.apply(stepped(1, 7, 7, 2));
      await writer.apply(stepped(1, 8, 8, 3));
      expect((await follower.readLog(6, 10)).map((batch) => batch.fence)).toEqual([
        { epoch: 2, position: 7 },
        { epoch: 3, position: 8 },
      ]);
      await expect(follower.apply(stepped(2, 1, 7, 2))).rejects.toThrow(StaleEpoch);
      await expect(follower.apply(stepped(2, 1, 8, 3))).rejects.toThrow(LogOutOfOrder);
      expect((await state(db)).head).toEqual({ epoch: 3, position: 8 });
      await db.close();
      await readOnly.close();
    });
  }

  it("0048: an older code's view of version 5 is the existing refusal (a version past its own is SchemaTooNew, nothing changed)", async () => {
    const db = await openSqliteDatabase({ vfs: "memory" });
    await SqliteStorage.open(db);
    await db.run("UPDATE pi_durable_meta SET value = ? WHERE key = 'schema_version'", String(SCHEMA_VERSION + 1));
    const image = await db.exportImage();
    await expect(SqliteStorage.open(db)).rejects.toThrow(SchemaTooNew);
    expect(await db.exportImage()).toEqual(image);
    await db.close();
  });

  it("0048: a crash at every statement of a fenced commit (a continuation and an epoch's start) and of a trim leaves the old state; past the last, the new one", async () => {
    const db = await openSqliteDatabase({ vfs: "memory" });
    const { database, arm } = failingAt(db);
    const writer = await SqliteStorage.open(database, "writer");
    await writer.load();
    for (let position = 1; position <= 3; position++) await writer.apply(stepped(1, position, position, 1));
    const steps: Array<[string, (storage: SqliteStorage) => Promise<unknown>]> = [
      ["continuation", (storage) => storage.apply(stepped(1, 4, 4, 1))],
      ["epoch start", (storage) => storage.apply(stepped(1, 5, 5, 2))],
      ["trim", (storage) => storage.trimLog(5)],
      ["after the trim", (storage) => storage.apply(stepped(1, 6, 6, 2))],
    ];
    for (const [name, step] of steps) {
      const old = await state(db);
      let statement = 1;
      for (; ; statement++) {
        // The next start: a new storage on what the crashed one left, its head read from the file.
        const storage = await SqliteStorage.open(database, name);
        await storage.load();
        arm(statement);
        const outcome = await step(storage).then(
          () => "done",
          (error: unknown) => (error as Error).message,
        );
        arm(0);
        if (outcome === "done") break;
        expect(outcome).toBe(`crashed at statement ${statement}`);
        expect(await state(db)).toEqual(old);
      }
      expect(statement, name).toBeGreaterThan(1);
      expect(await state(db)).not.toEqual(old);
    }
    expect((await state(db)).head).toEqual({ epoch: 2, position: 6 });
    expect((await state(db)).tail).toEqual([[6, 2]]);
    await db.close();
  });

  it("0048: a crash at every statement of the migration from version 4 leaves version 4 as it was; the next open migrates it", async () => {
    const image = await v4Image(3);
    const db = await openSqliteDatabase({ vfs: "memory", image });
    const { database, arm } = failingAt(db);
    const old = await db.exportImage();
    let statement = 1;
    for (; ; statement++) {
      arm(statement);
      const outcome = await SqliteStorage.open(database).then(
        () => "done",
        (error: unknown) => (error as Error).message,
      );
      arm(0);
      if (outcome === "done") break;
      expect(outcome).toBe(`crashed at statement ${statement}`);
      expect(await db.exportImage()).toEqual(old);
    }
    expect(statement).toBeGreaterThan(1);
    expect(await db.get("SELECT value FROM pi_durable_meta WHERE key = 'schema_version'")).toEqual({ value: String(SCHEMA_VERSION) });
    expect((await state(db)).head).toEqual({ epoch: 2, position: 6 });
    await db.close();
  }, 120_000);
});
