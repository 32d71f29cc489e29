/**
 * `storage.query()`'s statement: through the database's read-only door (`SqliteDatabase.query`), or on a database
 * without one a strict text check, then the statement under `PRAGMA query_only` (decision 0020). Out of storage.ts
 * (decision 0081).
 */
import type { Json } from "../../base/json.ts";
import { QueryLimitExceeded, QueryNotReadOnly } from "../../errors.ts";
import type { SqliteDatabase, SqlRow, SqlValue } from "./database.ts";
import type { QueryLimits } from "./query-rules.ts";

/**
 * One statement that only reads: through the database's own door when it has one, else run under `query_only`;
 * `QueryNotReadOnly` for anything else, nothing changed.
 */
export async function queryOnly(db: SqliteDatabase, sql: string, values: SqlValue[], limits: QueryLimits): Promise<SqlRow[]> {
  if (db.query) return db.query(sql, values, limits);
  if (!isReadOnlyStatement(sql)) throw new QueryNotReadOnly(sql);
  let rows: SqlRow[];
  try {
    // One queued operation: a commit can never slip in while query_only is on (it would be refused).
    rows = await db.transaction((tx) => {
      tx.run("PRAGMA query_only = 1");
      try {
        return tx.all(sql, ...values);
      } finally {
        if (!db.readOnly) tx.run("PRAGMA query_only = 0");
      }
    });
  } catch (error) {
    if (/readonly|read-only|query_only/i.test(String(error))) throw new QueryNotReadOnly(sql);
    throw error;
  }
  if (rows.length > limits.maxRows) throw new QueryLimitExceeded("maxRows", limits.maxRows);
  return rows;
}

export function toSqlValue(param: Json): SqlValue {
  if (param === null || typeof param !== "object") return typeof param === "boolean" ? Number(param) : param;
  return JSON.stringify(param);
}

/** The fallback for databases without `statementIsReadOnly`: pragmas that only read, with no value at all. */
const READ_ONLY_PRAGMAS =
  /^pragma\s+(quick_check|integrity_check|table_info|table_xinfo|index_list|index_info|page_count|page_size|freelist_count|schema_version|user_version|database_list|compile_options|foreign_key_list)\s*(\(\s*[A-Za-z_][A-Za-z0-9_]*\s*\))?$/i;

function isReadOnlyStatement(sql: string): boolean {
  const text = sql.trim().replace(/;\s*$/, "");
  if (text.includes(";")) return false; // one statement only
  if (/^(select|with|explain|values)\b/i.test(text)) return true;
  return READ_ONLY_PRAGMAS.test(text);
}
