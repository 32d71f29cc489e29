/**
 * The open's read of every live task (decisions 0054, 0085, 0104). The statement reads through the live index
 * without `ORDER BY`: rows come by status, then id, and SQLite's sorter — a copy of every live record (2.2 MB for
 * 10,000 tasks, in freshly compiled wasm) in front of the first resumed step — is not run. Each row is parsed as it is
 * read (B4: a damaged one listed, not thrown), and the records and the damaged rows are then put in row-id order,
 * as the sorted read handed them: a merge of one run per status, and only a check when every live task has one
 * status (10,000 running, say).
 */
import type { TaskRecord } from "../records.ts";
import { parseInto } from "../rows.ts";
import type { DamagedRow } from "../storage.ts";
import type { SqliteDatabase, SqlValue } from "./database.ts";

export async function readLiveTasks(db: SqliteDatabase, sql: string, damaged: DamagedRow[]): Promise<TaskRecord[]> {
  const records: TaskRecord[] = [];
  const ids: SqlValue[] = []; // the row id each record was read from (a damaged record's own `id` may differ)
  const first = damaged.length;
  const onRow = (id: SqlValue, text: SqlValue) => {
    const before = records.length;
    parseInto("tasks", id as number | string, text, records, damaged);
    if (records.length > before) ids.push(id);
  };
  if (db.each) await db.each(sql, (row) => onRow(row.id!, row.record!));
  else for (const row of await db.all(sql)) onRow(row.id!, row.record!);
  if (damaged.length - first > 1) {
    const read = damaged.splice(first);
    damaged.push(
      ...inOrder(
        read,
        read.map((row) => row.id),
      ),
    );
  }
  return inOrder(records, ids);
}

const before = (a: SqlValue, b: SqlValue): boolean => (a as number) < (b as number);

/** `items` by `ids` ascending (stable), or `items` itself when it already is. */
function inOrder<T>(items: T[], ids: SqlValue[]): T[] {
  for (let at = 1; at < ids.length; at += 1)
    if (!before(ids[at - 1]!, ids[at]!)) {
      const order = ids.map((_, index) => index);
      order.sort((a, b) => (before(ids[a]!, ids[b]!) ? -1 : before(ids[b]!, ids[a]!) ? 1 : 0));
      return order.map((index) => items[index]!);
    }
  return items;
}
