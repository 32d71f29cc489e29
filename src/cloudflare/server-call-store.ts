import { resolveAgent } from "../agent/agent.ts";
import type { ServerCallRequest } from "../agent/server-port.ts";
import { systemClock } from "../base/clock.ts";
import { BACKGROUND_CONTEXT } from "../base/context.ts";
import { cloneJson, type Json } from "../base/json.ts";
import type { EnvFactory } from "../env/types.ts";
import type { LeaseBook } from "../follow/arbiter.ts";
import type { ObjectTopicHandler } from "../follow/object-end-options.ts";
import { type ServerCallStore, ServerCalls, type StoredServerCall } from "../follow/server-calls.ts";
import type { Registry } from "../tasks/registry.ts";
import type { DurableObjectStorage, SqlStorage } from "./types.ts";

/**
 * The calls no ask can reach any more (decision 0039): those whose tool task is terminal in the object's copy. A call
 * is asked again only by its own tool task while it is not terminal — the tab's after a lost answer or a reload, or
 * the object's after a takeover recovers it at `execute` — and every later holder's history extends the copy's (the
 * tab holding the lease writes on top of it; a forked tab's asks are refused as stale before the store is read), so
 * a task terminal in the copy is terminal wherever an ask could come from. A call whose task the copy has not seen
 * yet (the tab's intent not pushed) is kept.
 */
const TRIM = `DELETE FROM pi_durable_server_calls WHERE EXISTS (SELECT 1 FROM tasks
  WHERE tasks.id = pi_durable_server_calls.record ->> '$.taskId' AND tasks.status = 'terminal')`;

/**
 * The object's store of server tools' calls (decision 0036): one row per call id of a conversation, the call as JSON.
 * The object's own table, beside the harness's (it is not in the replicated log: the tab never has it). Synchronous,
 * as `ctx.storage.sql` is, so that a lookup and the mark that a call started have nothing between them. Each new
 * call first drops the calls no ask can reach any more (`TRIM`), so the table holds about the calls in flight.
 */
export function sqlServerCallStore(sql: SqlStorage): ServerCallStore {
  sql.exec(
    "CREATE TABLE IF NOT EXISTS pi_durable_server_calls (conversation_id INTEGER NOT NULL, call_id TEXT NOT NULL, record TEXT NOT NULL, PRIMARY KEY (conversation_id, call_id)) WITHOUT ROWID",
  );
  const hasTasks = () => sql.exec("SELECT 1 FROM sqlite_schema WHERE type = 'table' AND name = 'tasks'").toArray().length > 0;
  return {
    get(conversationId, callId) {
      const [row] = sql
        .exec("SELECT record FROM pi_durable_server_calls WHERE conversation_id = ? AND call_id = ?", conversationId, callId)
        .toArray();
      return row ? (JSON.parse(String(row.record)) as StoredServerCall) : undefined;
    },
    put(call) {
      if (call.answer === undefined && hasTasks()) sql.exec(TRIM);
      sql.exec(
        "INSERT INTO pi_durable_server_calls (conversation_id, call_id, record) VALUES (?, ?, ?) ON CONFLICT (conversation_id, call_id) DO UPDATE SET record = excluded.record",
        call.conversationId,
        call.callId,
        JSON.stringify(cloneJson(call)),
      );
    },
  };
}

/**
 * A harness object's server of server tools in follow mode (decision 0036): its `ServerCalls` over its own table,
 * the epoch checked against its lease book, the tools its registry installs; and the handler of the follow link's
 * `server-tools` calls (`ObjectEnd.serve`). The object's own harness gets the same `ServerCalls` as `serverCalls`,
 * so a call the tab asked for is joined or answered from the store after a takeover, never run again.
 */
export function objectServerCalls(options: {
  storage: DurableObjectStorage;
  book: LeaseBook;
  registry: Registry;
  env?: EnvFactory | undefined;
}): { calls: ServerCalls; handler: ObjectTopicHandler } {
  const calls = new ServerCalls({
    lease: options.book,
    store: sqlServerCallStore(options.storage.sql),
    clock: systemClock,
    tool: (name) => resolveAgent(options.registry, {}).installed.get(name),
    ...(options.env ? { env: options.env } : {}),
  });
  // The frame was checked against the topic's row (wire.ts) before it reaches here.
  const handler: ObjectTopicHandler = async (_method, args) =>
    (await calls.call(args[0] as unknown as ServerCallRequest, BACKGROUND_CONTEXT)) as unknown as Json;
  return { calls, handler };
}
