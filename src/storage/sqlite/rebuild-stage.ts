/**
 * A rebuild staged beside the copy (decision 0084): a snapshot's rows go into staging tables as its parts arrive, a
 * transaction a part, and one last transaction clears the copy, moves the staged rows in, writes the head and drops
 * the staging tables — the same one transaction `rebuild` is, so a crash at any part, or in that transaction, leaves
 * the copy as it was (decision 0047). The tab holds one part's rows at a time instead of the whole copy's.
 *
 * The staging tables are made at the start of each staged rebuild (whatever an earlier, crashed one left is dropped
 * first) and dropped by its commit or discard. They hold the copy tables' columns and no index: the snapshot's rows
 * were checked (each row's shape, no key twice) before they are staged.
 */
import { ReadOnlySession } from "../../errors.ts";
import type { SnapshotHead, SnapshotList, SnapshotRows } from "../records.ts";
import type { RebuildStage } from "../storage.ts";
import type { SqliteDatabase, SqliteTransaction } from "./database.ts";
import { SQL } from "./schema.ts";
import { headStatements, rowStatements } from "./snapshot.ts";

/** Each list's staging table and the copy's columns it holds (the order `rowParams` gives them in). */
const STAGED: Record<SnapshotList, [table: string, into: string, columns: string]> = {
  tasks: ["pi_durable_stage_tasks", "tasks", "id, conversation_id, kind, status, record"],
  conversations: ["pi_durable_stage_conversations", "conversations", "id, owner, record"],
  entries: ["pi_durable_stage_entries", "entries", "id, conversation_id, kind, record"],
  submissions: ["pi_durable_stage_submissions", "submissions", "id, conversation_id, request_id, status, record"],
  documents: ["pi_durable_stage_documents", "documents", "scope, key, record"],
};
const LISTS = Object.keys(STAGED) as SnapshotList[];
const INSERT = Object.fromEntries(
  LISTS.map((list) => {
    const [table, , columns] = STAGED[list];
    return [list, `INSERT INTO ${table} (${columns}) VALUES (${columns.replace(/\w+/g, "?")})`];
  }),
) as Record<SnapshotList, string>;
const DROP = LISTS.map((list) => `DROP TABLE IF EXISTS ${STAGED[list][0]}`);
const CREATE = LISTS.map((list) => `CREATE TABLE ${STAGED[list][0]} (${STAGED[list][2]})`);
// Rowid order is the order staged (list order, row order), as `rebuild` inserts them.
const MOVE = LISTS.map((list) => {
  const [table, into, columns] = STAGED[list];
  return `INSERT INTO ${into} (${columns}) SELECT ${columns} FROM ${table} ORDER BY rowid`;
});

/**
 * Starts a staged rebuild of `db`'s copy: the staging tables made empty. The swap's statements run in one transaction
 * of `swap` (the storage's writing turn: what waits of the task rows is dropped with the rows it replaces, decision
 * 0081); `rebuilt` runs after it committed. `ReadOnlySession` on a read-only database.
 */
export async function startRebuildStage(
  db: SqliteDatabase,
  swap: (body: (tx: SqliteTransaction) => void) => Promise<void>,
  rebuilt: () => void,
): Promise<RebuildStage> {
  if (db.readOnly) throw new ReadOnlySession("Rebuilding from a snapshot");
  await db.transaction((tx) => {
    for (const sql of [...DROP, ...CREATE]) tx.run(sql);
  });
  let spent = false;
  const live = () => {
    if (spent) throw new Error("This rebuild stage was committed or discarded; start another with stageRebuild().");
  };
  return {
    async add(rows: SnapshotRows) {
      live();
      const statements = rowStatements(rows, INSERT, db.maxRowBytes);
      if (statements.length === 0) return;
      await db.transaction((tx) => {
        for (const [sql, ...params] of statements) tx.run(sql, ...params);
      });
    },
    async commit(head: SnapshotHead) {
      live();
      const after = headStatements(head);
      await swap((tx) => {
        for (const sql of [...SQL.clearForRebuild, ...MOVE]) tx.run(sql);
        for (const [sql, ...params] of after) tx.run(sql, ...params);
        for (const sql of DROP) tx.run(sql);
      });
      spent = true;
      rebuilt();
    },
    async discard() {
      if (spent) return;
      spent = true;
      await db.transaction((tx) => {
        for (const sql of DROP) tx.run(sql);
      });
    },
  };
}
