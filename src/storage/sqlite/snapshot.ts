/**
 * A copy's snapshot in SQLite (decision 0047): read whole in one transaction (a commit cannot fall between two
 * tables' reads), and a rebuild from one that replaces every row, the log's head and its epochs in one transaction
 * (a crash leaves the old copy or the new one). The kept forks and the app's own tables are left alone.
 */
import type {
  ConversationRecord,
  DocumentRecord,
  EntryRecord,
  Snapshot,
  SnapshotHead,
  SnapshotList,
  SnapshotRows,
  SubmissionRecord,
  TaskRecord,
} from "../records.ts";
import { columnBytes, parseStored, refuseLargeRow } from "../rows.ts";
import type { SqliteTransaction, SqlValue } from "./database.ts";
import { SQL } from "./schema.ts";
import { readSnapshotHeadIn } from "./snapshot-rows.ts";

/** The copy at its log's head, or undefined before the first fenced commit. Runs inside one transaction. */
export function readSnapshotIn(tx: SqliteTransaction, label: string): Snapshot | undefined {
  const head = readSnapshotHeadIn(tx);
  if (!head) return undefined;
  const rows = <T>(table: keyof typeof SQL.snapshotRows) =>
    tx.all(SQL.snapshotRows[table]).map((row) => parseStored<T>(label, table, row.id as number | string, row.record));
  return {
    batch: {
      ...head.batch,
      tasks: rows<TaskRecord>("tasks"),
      conversations: rows<ConversationRecord>("conversations"),
      entries: rows<EntryRecord>("entries"),
      submissions: rows<SubmissionRecord>("submissions"),
      documents: rows<DocumentRecord>("documents"),
    },
    epochs: head.epochs,
  };
}

/** A rebuild's statements, each row serialized and its size checked before the transaction runs. */
export type RebuildRows = Array<[sql: string, ...params: SqlValue[]]>;

/** Each list's insert into the copy's table, its parameters those of `rowParams`. */
const INSERT: Record<SnapshotList, string> = {
  tasks: SQL.insertTask,
  conversations: SQL.upsertConversation,
  entries: SQL.insertEntry,
  submissions: SQL.upsertSubmission,
  documents: SQL.upsertDocument,
};

/**
 * The columns `row` of `list` is stored with, its serialized record last (the order of each list's insert), or
 * undefined for a document deletion (nothing to store); `InvalidInput` for a row past `maxRowBytes`.
 */
function rowParams(list: SnapshotList, row: SnapshotRow, maxRowBytes: number | undefined): SqlValue[] | undefined {
  let id: number | string;
  let columns: Array<string | number | null>;
  if (list === "tasks") {
    const task = row as TaskRecord;
    [id, columns] = [task.id, [task.id, task.conversationId, task.kind, task.state.status]];
  } else if (list === "conversations") {
    const c = row as ConversationRecord;
    [id, columns] = [c.id, [c.id, c.owner ?? null]];
  } else if (list === "entries") {
    const e = row as EntryRecord;
    [id, columns] = [e.id, [e.id, e.conversationId, e.kind]];
  } else if (list === "submissions") {
    const s = row as SubmissionRecord;
    [id, columns] = [s.id, [s.id, s.conversationId, s.requestId ?? null, s.status]];
  } else {
    const d = row as Snapshot["batch"]["documents"][number];
    if (d.value === null) return undefined;
    [id, columns] = [`${d.scope}/${d.key}`, [d.scope, d.key]];
  }
  const record = JSON.stringify(row);
  refuseLargeRow(maxRowBytes, list, id, record, columnBytes(...columns));
  return [...columns, record];
}

/** One row of any of a snapshot's lists. */
type SnapshotRow = NonNullable<SnapshotRows[SnapshotList]>[number];

/** Each of `rows`' rows as `insert[list]` with its `rowParams`, in list order; `InvalidInput` as `rowParams`. */
export function rowStatements(rows: SnapshotRows, insert: Record<SnapshotList, string>, maxRowBytes: number | undefined): RebuildRows {
  const out: RebuildRows = [];
  for (const list of Object.keys(INSERT) as SnapshotList[])
    for (const row of rows[list] ?? []) {
      const params = rowParams(list, row, maxRowBytes);
      if (params) out.push([insert[list], ...params]);
    }
  return out;
}

/** What a rebuild writes after the rows: the history's epochs and the head, id counter and root conversation. */
export function headStatements({ batch, epochs }: SnapshotHead): RebuildRows {
  const out: RebuildRows = epochs.map(({ epoch, start }) => [SQL.startEpoch, epoch, start]);
  out.push([SQL.writeMeta, "log_position", String(batch.fence.position)]);
  out.push([SQL.writeMeta, "next_id", String(batch.nextId)]);
  if (batch.rootConversationId !== undefined) out.push([SQL.writeMeta, "root_conversation", String(batch.rootConversationId)]);
  return out;
}

/** The statements that write `snapshot` over a cleared copy; `InvalidInput` for a row past `maxRowBytes`, nothing run. */
export function rebuildStatements(snapshot: Snapshot, maxRowBytes: number | undefined): RebuildRows {
  return [
    ...SQL.clearForRebuild.map((sql): [string] => [sql]),
    ...rowStatements(snapshot.batch, INSERT, maxRowBytes),
    ...headStatements(snapshot),
  ];
}
