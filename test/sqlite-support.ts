/** The SQLite storage tests' fixtures: a database seen as a Durable Object's, and a counter's step as a batch. */
import type { Batch } from "../src/storage/records.ts";
import type { SqliteDatabase } from "../src/storage/sqlite/database.ts";
import { taskRecord } from "./task-record.ts";

/** The same database, with the traits a Durable Object's has: a row limit (`maxRowBytes`), shared with an app. */
export function asObjects(db: SqliteDatabase, traits: { maxRowBytes?: number; shared?: boolean }): SqliteDatabase {
  return {
    ...traits,
    get readOnly() {
      return db.readOnly;
    },
    exec: (sql) => db.exec(sql),
    run: (sql, ...params) => db.run(sql, ...params),
    get: (sql, ...params) => db.get(sql, ...params),
    all: (sql, ...params) => db.all(sql, ...params),
    transaction: (body) => db.transaction(body),
    exportImage: () => db.exportImage(),
    close: () => db.close(),
  };
}

/** Step `n` of the stepper task `id`, stored at `position` under `epoch`. */
export function stepped(id: number, n: number, position: number, epoch: number): Batch & { fence: { epoch: number; position: number } } {
  const task = taskRecord(id, { status: "running", checkpoint: { phase: "step", n } }, { kind: "bench.stepper" });
  return { fence: { epoch, position }, tasks: [task], conversations: [], entries: [], submissions: [], documents: [] };
}
