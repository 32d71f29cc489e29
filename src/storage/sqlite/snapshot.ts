/**
 * A copy's snapshot in SQLite (decision 0047): read whole in one transaction (a commit cannot fall between two
 * tables' reads), and a rebuild from one that replaces every row, the log's head and its epochs in one transaction
 * (a crash leaves the old copy or the new one). The kept forks and the app's own tables are left alone.
 */
import type { ConversationRecord, DocumentRecord, EntryRecord, Snapshot, SubmissionRecord, TaskRecord } from "../records.ts";
import { columnBytes, parseStored, refuseLargeRow } from "../rows.ts";
import type { SqliteTransaction, SqlValue } from "./database.ts";
import { SQL } from "./schema.ts";

/** The copy at its log's head, or undefined before the first fenced commit. Runs inside one transaction. */
export function readSnapshotIn(tx: SqliteTransaction, label: string): Snapshot | undefined {
  const head = tx.get(SQL.logHead);
  if (head?.position === null || head?.position === undefined) return undefined;
  const rows = <T>(table: keyof typeof SQL.snapshotRows) =>
    tx.all(SQL.snapshotRows[table]).map((row) => parseStored<T>(label, table, row.id as number | string, row.record));
  const meta = new Map(tx.all(SQL.readMeta).map((row) => [String(row.key), String(row.value)]));
  const largest = Number(tx.get(SQL.largestId)?.id ?? 0);
  const root = meta.get("root_conversation");
  return {
    batch: {
      fence: { epoch: Number(head.epoch ?? 0), position: Number(head.position) },
      nextId: Math.max(Number(meta.get("next_id") ?? 1), largest + 1),
      ...(root === undefined ? {} : { rootConversationId: Number(root) }),
      tasks: rows<TaskRecord>("tasks"),
      conversations: rows<ConversationRecord>("conversations"),
      entries: rows<EntryRecord>("entries"),
      submissions: rows<SubmissionRecord>("submissions"),
      documents: rows<DocumentRecord>("documents"),
    },
    epochs: tx.all(SQL.readEpochs).map((row) => ({ epoch: Number(row.epoch), start: Number(row.start) })),
  };
}

/** A rebuild's statements, each row serialized and its size checked before the transaction runs. */
export type RebuildRows = Array<[sql: string, ...params: SqlValue[]]>;

/** The statements that write `snapshot` over a cleared copy; `InvalidInput` for a row past `maxRowBytes`, nothing run. */
export function rebuildStatements(snapshot: Snapshot, maxRowBytes: number | undefined): RebuildRows {
  const { batch, epochs } = snapshot;
  const out: RebuildRows = SQL.clearForRebuild.map((sql) => [sql]);
  const row = (
    table: string,
    id: number | string,
    record: string,
    columns: Array<string | number | null>,
    sql: string,
    params: SqlValue[],
  ) => {
    refuseLargeRow(maxRowBytes, table, id, record, columnBytes(...columns));
    out.push([sql, ...params]);
  };
  for (const task of batch.tasks) {
    const record = JSON.stringify(task);
    const status = task.state.status;
    row("tasks", task.id, record, [task.id, task.conversationId, task.kind, status], SQL.insertTask, [
      task.id,
      task.conversationId,
      task.kind,
      status,
      record,
    ]);
  }
  for (const c of batch.conversations) {
    const record = JSON.stringify(c);
    row("conversations", c.id, record, [c.id, c.owner ?? null], SQL.upsertConversation, [c.id, c.owner ?? null, record]);
  }
  for (const e of batch.entries) {
    const record = JSON.stringify(e);
    row("entries", e.id, record, [e.id, e.conversationId, e.kind], SQL.insertEntry, [e.id, e.conversationId, e.kind, record]);
  }
  for (const s of batch.submissions) {
    const record = JSON.stringify(s);
    const columns = [s.id, s.conversationId, s.requestId ?? null, s.status];
    row("submissions", s.id, record, columns, SQL.upsertSubmission, [...columns, record]);
  }
  for (const d of batch.documents) {
    if (d.value === null) continue;
    const record = JSON.stringify(d);
    row("documents", `${d.scope}/${d.key}`, record, [d.scope, d.key], SQL.upsertDocument, [d.scope, d.key, record]);
  }
  for (const { epoch, start } of epochs) out.push([SQL.startEpoch, epoch, start]);
  out.push([SQL.writeMeta, "log_position", String(batch.fence.position)]);
  out.push([SQL.writeMeta, "next_id", String(batch.nextId)]);
  if (batch.rootConversationId !== undefined) out.push([SQL.writeMeta, "root_conversation", String(batch.rootConversationId)]);
  return out;
}
