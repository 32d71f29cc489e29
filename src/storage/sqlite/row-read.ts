import type { TaskStatus } from "../records.ts";
import { parseStored } from "../rows.ts";
import type { SqlRow, SqlValue } from "./database.ts";

/** A row's `record` column parsed (its `id` names it in a damage report). */
export function parseRecord<T>(row: SqlRow, table: string): T {
  return parseStored<T>("sqlite", table, (row.id as number | undefined) ?? "?", row.record);
}

/** `parseRecord` of a row that may be missing. */
export function optional<T>(row: SqlRow | undefined, table: string): T | undefined {
  return row === undefined ? undefined : parseRecord<T>(row, table);
}

/** `Storage.listTasks`' statement: every task row, or those of one status and/or conversation, in id order. */
export function taskListQuery(filter: { status?: TaskStatus; conversationId?: number }): { sql: string; params: SqlValue[] } {
  const where: string[] = [];
  const params: SqlValue[] = [];
  if (filter.status !== undefined) {
    where.push("status = ?");
    params.push(filter.status);
  }
  if (filter.conversationId !== undefined) {
    where.push("conversation_id = ?");
    params.push(filter.conversationId);
  }
  return { sql: `SELECT record FROM tasks ${where.length ? `WHERE ${where.join(" AND ")}` : ""} ORDER BY id`, params };
}
