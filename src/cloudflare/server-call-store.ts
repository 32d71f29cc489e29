import { cloneJson } from "../base/json.ts";
import type { ServerCallStore, StoredServerCall } from "../follow/server-calls.ts";
import type { SqlStorage } from "./types.ts";

/**
 * The object's store of server tools' calls (decision 0036): one row per call id of a conversation, the call as JSON.
 * The object's own table, beside the harness's (it is not in the replicated log: the tab never has it). Synchronous,
 * as `ctx.storage.sql` is, so that a lookup and the mark that a call started have nothing between them.
 */
export function sqlServerCallStore(sql: SqlStorage): ServerCallStore {
  sql.exec(
    "CREATE TABLE IF NOT EXISTS pi_durable_server_calls (conversation_id INTEGER NOT NULL, call_id TEXT NOT NULL, record TEXT NOT NULL, PRIMARY KEY (conversation_id, call_id)) WITHOUT ROWID",
  );
  return {
    get(conversationId, callId) {
      const [row] = sql
        .exec("SELECT record FROM pi_durable_server_calls WHERE conversation_id = ? AND call_id = ?", conversationId, callId)
        .toArray();
      return row ? (JSON.parse(String(row.record)) as StoredServerCall) : undefined;
    },
    put(call) {
      sql.exec(
        "INSERT INTO pi_durable_server_calls (conversation_id, call_id, record) VALUES (?, ?, ?) ON CONFLICT (conversation_id, call_id) DO UPDATE SET record = excluded.record",
        call.conversationId,
        call.callId,
        JSON.stringify(cloneJson(call)),
      );
    },
  };
}
