import { describe, expect, it } from "vitest";
import { StaleEpoch } from "../src/errors.ts";
import type { SqliteDatabase } from "../src/storage/sqlite/database.ts";
import { SQL } from "../src/storage/sqlite/schema.ts";
import { SqliteStorage } from "../src/storage/sqlite/storage.ts";
import { openSqliteDatabase } from "../src/storage/sqlite/wasm.ts";
import { stepped } from "./sqlite-support.ts";
import { watchTransactions } from "./watched-db.ts";

// Decision 0056: a same-epoch continuation on a connection that counts its writes checks the fence in memory
// (nothing written since this storage's last commit) instead of reading the log's last row; any write between
// (another storage on the connection, a trim, a rebuild) brings the read back, and a stale writer is still refused.

/** Counts the reads of the log's last row inside transactions. */
function counting(db: SqliteDatabase) {
  const seen = { lastRow: 0 };
  const database = watchTransactions(db, { get: (sql) => void (sql === SQL.lastLogRow && seen.lastRow++) });
  return { database, seen };
}

describe("the fenced log's check in memory (decision 0056)", () => {
  it("0056/S11: continuations read the last row only after a write they did not make; a writer that missed one is still refused", async () => {
    const db = await openSqliteDatabase({ vfs: "memory" });
    const { database, seen } = counting(db);
    const writer = await SqliteStorage.open(database, "writer");
    const other = await SqliteStorage.open(db, "other");
    await writer.load();
    for (let position = 1; position <= 5; position++) await writer.apply(stepped(1, position, position, 1));
    expect(seen.lastRow).toBe(0); // the first is an epoch's start (reads the head), the rest continue in memory
    await writer.trimLog(5); // its own trim keeps the head known
    await writer.apply(stepped(1, 6, 6, 1));
    expect(seen.lastRow).toBe(0);
    expect((await other.load()).log).toEqual({ epoch: 1, position: 6 });
    await other.apply(stepped(1, 7, 7, 2)); // a newer epoch on the same connection
    await expect(writer.apply(stepped(1, 7, 7, 1))).rejects.toThrow(StaleEpoch);
    expect(seen.lastRow).toBe(1);
    expect((await writer.readLog(0, 10)).map((batch) => [batch.fence.position, batch.fence.epoch])).toEqual([
      [6, 1],
      [7, 2],
    ]);
    await db.close();
  });
});
