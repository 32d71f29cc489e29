/**
 * The open's read of every live task (decisions 0054, 0085, 0104, 0110). Where the database has no row limit
 * (sqlite-wasm: the browser's worker and Node), the live rows come in one row (`SQL.liveTasksJoined`): their ids joined
 * by commas, their records by U+001E, which no record's JSON holds — so the pieces are the rows' texts, one for one, and
 * no live row is read into JavaScript by itself (a step, five column calls and a row object each, in front of the first
 * resumed step). When the pieces are not one text per row (a record that is not text, or one holding U+001E: damaged
 * either way), the rows are read one by one, as before. Either way each text is parsed on its own (B4: a damaged one
 * listed, not thrown). The statements read through the live index without `ORDER BY`: rows come by status, then id,
 * and SQLite's sorter — a copy of every live record (2.2 MB for 10,000 tasks) — is not run; the records and the
 * damaged rows are then put in row-id order, as the sorted read handed them: a merge of one run per status, and only
 * a check when every live task has one status (10,000 running, say).
 */
import type { TaskRecord } from "../records.ts";
import { parseInto } from "../rows.ts";
import type { DamagedRow } from "../storage.ts";
import type { SqliteDatabase, SqlRow, SqlValue } from "./database.ts";

/** `sql` reads the live rows one by one (`id`, `record`); `joined`, when given, reads them in one row, and is tried first. */
export async function readLiveTasks(db: SqliteDatabase, sql: string, damaged: DamagedRow[], joined?: string): Promise<TaskRecord[]> {
  const records: TaskRecord[] = [];
  const ids: SqlValue[] = []; // the row id each record was read from (a damaged record's own `id` may differ)
  const first = damaged.length;
  const onRow = (id: SqlValue, text: SqlValue) => {
    const before = records.length;
    parseInto("tasks", id as number | string, text, records, damaged);
    if (records.length > before) ids.push(id);
  };
  const rows = joined === undefined ? undefined : pieces(await db.get(joined));
  if (rows) {
    // Piece by piece, each parsed as it is cut (decision 0054: no array of every row's text outlives a collection).
    for (let at = 0, start = 0; at < rows.ids.length; at += 1) {
      const end = at === rows.ids.length - 1 ? rows.text.length : rows.text.indexOf(SEPARATOR, start);
      onRow(rows.ids[at]!, rows.text.slice(start, end));
      start = end + 1;
    }
  } else if (db.each) await db.each(sql, (row) => onRow(row.id!, row.record!));
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

/** What joins the records in `SQL.liveTasksJoined`: U+001E, a control character, which JSON always escapes. */
const SEPARATOR = "\u001e";

/** The joined row's ids and records' text, one id and one piece per live row, or undefined when it cannot say that. */
function pieces(row: SqlRow | undefined): { ids: number[]; text: string } | undefined {
  if (row === undefined) return undefined;
  if (row.ids === null) return { ids: [], text: "" }; // no live row (`group_concat` of none is NULL)
  if (typeof row.ids !== "string" || typeof row.records !== "string") return undefined;
  let ids: unknown;
  try {
    ids = JSON.parse(`[${row.ids}]`); // integers (the rows' ids: one a row, never NULL), joined by commas
  } catch {
    return undefined;
  }
  const count = Array.isArray(ids) ? ids.length : 0;
  if (count === 0 || Number(row.texts) !== count || !(ids as unknown[]).every((id) => Number.isSafeInteger(id))) return undefined;
  const text = row.records;
  let separators = 0;
  for (let at = text.indexOf(SEPARATOR); at !== -1; at = text.indexOf(SEPARATOR, at + 1)) separators += 1;
  return separators === count - 1 ? { ids: ids as number[], text } : undefined;
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
