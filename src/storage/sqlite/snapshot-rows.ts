/**
 * A copy's snapshot read a row at a time (decision 0084): the same transaction and order as `readSnapshotIn`, but each
 * row handed over as its stored `record` text, never parsed, and none kept — on the object that serves it, the rows
 * never exist as objects, only the parts they are cut into.
 */
import { DatabaseCorrupt } from "../../errors.ts";
import type { SnapshotHead, SnapshotList } from "../records.ts";
import type { SqliteTransaction, SqlRow } from "./database.ts";
import { SQL } from "./schema.ts";

const LISTS = Object.keys(SQL.snapshotRows) as SnapshotList[];

/** The copy's head at its log's head (no rows), or undefined before the first fenced commit. Inside one transaction. */
export function readSnapshotHeadIn(tx: SqliteTransaction): SnapshotHead | undefined {
  const head = tx.get(SQL.logHead);
  if (head?.position === null || head?.position === undefined) return undefined;
  const meta = new Map(tx.all(SQL.readMeta).map((row) => [String(row.key), String(row.value)]));
  const largest = Number(tx.get(SQL.largestId)?.id ?? 0);
  const root = meta.get("root_conversation");
  return {
    batch: {
      fence: { epoch: Number(head.epoch ?? 0), position: Number(head.position) },
      nextId: Math.max(Number(meta.get("next_id") ?? 1), largest + 1),
      ...(root === undefined ? {} : { rootConversationId: Number(root) }),
    },
    epochs: tx.all(SQL.readEpochs).map((row) => ({ epoch: Number(row.epoch), start: Number(row.start) })),
  };
}

/**
 * Hands `onHead` the copy's head, then `onRow` every row's stored text, list by list, each table stepped row by row
 * (`tx.each`, or `all` where the backend has none). False, nothing handed, before the first fenced commit. A record
 * that is not text, or holds a raw line break (`JSON.stringify` never writes one: a snapshot's text is a record a
 * line), is `DatabaseCorrupt`.
 */
export function readSnapshotRowsIn(
  tx: SqliteTransaction,
  label: string,
  onHead: (head: SnapshotHead) => void,
  onRow: (list: SnapshotList, record: string) => void,
): boolean {
  const head = readSnapshotHeadIn(tx);
  if (!head) return false;
  onHead(head);
  for (const list of LISTS) {
    const each = (row: SqlRow) => {
      const record = row.record;
      if (typeof record !== "string" || record.includes("\n"))
        throw new DatabaseCorrupt(
          `${label}: ${list} row ${String(row.id)} is damaged (its record is not one line of JSON). Nothing was changed.`,
        );
      onRow(list, record);
    };
    if (tx.each) tx.each(SQL.snapshotRows[list], each);
    else for (const row of tx.all(SQL.snapshotRows[list])) each(row);
  }
  return true;
}
