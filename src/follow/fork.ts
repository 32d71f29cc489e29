/**
 * The visible fork (issue 27 item 4, decision 0032). A place that was fenced while it could not reach the other
 * one — its lease expired, the object took over under a newer epoch — may hold transactions of its old epoch that
 * the object never received. They are not in the history any more (the object refuses them as stale), and they are
 * not lost silently either: `findFork` names them, from this place's durable log tail, against the other place's
 * history, so the app can show and keep them before this copy follows the object's history again.
 */
import type { Json } from "../base/json.ts";
import type { EntryRecord, EpochStart, LogMark, SubmissionStatus, TaskStatus } from "../storage/records.ts";
import type { Storage } from "../storage/storage.ts";
import type { LoggedBatch } from "./handover.ts";

/** A copy's log as another place sees it: its head and where each epoch's stretch begins (oldest first). */
export interface LogHistory {
  head: LogMark | undefined;
  epochs: readonly EpochStart[];
}

/** One transaction of the fork: where it was in this place's log, and what it wrote, for the app to show. */
export interface ForkedTransaction {
  position: number;
  epoch: number;
  /** Every conversation it touched (its entries', tasks', submissions' and its own). */
  conversations: number[];
  /** The entries it appended (the user's inputs, the answers, tool results), whole. */
  entries: EntryRecord[];
  tasks: Array<{ id: number; kind: string; conversationId: number; status: TaskStatus }>;
  submissions: Array<{ id: number; conversationId: number; status: SubmissionStatus; requestId?: string }>;
}

/** The typed report of a fork: this place's transactions that the other place's history does not hold. */
export interface Fork {
  kind: "fork";
  /** The first position where this copy's log leaves the other history. */
  from: number;
  /** This copy's head, and the other history's. */
  mine: LogMark;
  theirs: LogMark | undefined;
  transactions: ForkedTransaction[];
}

/** A storage's log as a history: its head and its epochs' starts. */
export async function historyOf(storage: Storage): Promise<LogHistory> {
  const [state, epochs] = await Promise.all([storage.load(), storage.readEpochs?.() ?? Promise.resolve([])]);
  return { head: state.log, epochs };
}

/** How many epoch stretches a history sent over the link carries at most (~40 bytes each: well under 1 MB). */
export const MAX_SENT_STRETCHES = 4_096;

/**
 * The stretches of `epochs` (oldest first) that say which epoch wrote each position in [from, to] — the one in force
 * at `from` and those that start after it up to `to` — the newest `MAX_SENT_STRETCHES` of them (decision 0051). What a
 * tab whose log tail spans [from, to] needs of the object's history to tell whether it continues it and which of its
 * transactions forked; a position before the first stretch sent reads as not the object's (a fork, kept, never lost).
 */
export function historyWindow(epochs: readonly EpochStart[], from: number, to: number): EpochStart[] {
  let first = 0;
  let end = 0;
  for (let i = 0; i < epochs.length; i++) {
    const start = epochs[i]!.start;
    if (start <= from) first = i;
    if (start <= to) end = i + 1;
  }
  return epochs.slice(Math.max(first, end - MAX_SENT_STRETCHES), Math.max(end, first)).map(({ epoch, start }) => ({ epoch, start }));
}

/** The epoch that wrote `position` in `history`, or undefined past its head. */
export function epochAt(history: LogHistory, position: number): number | undefined {
  if (!history.head || position > history.head.position) return undefined;
  let epoch: number | undefined;
  for (const stretch of history.epochs) if (stretch.start <= position) epoch = stretch.epoch;
  return epoch;
}

/**
 * Whether a copy whose log stands at `mine` is a prefix of `theirs` (decision 0032): only then may it follow their
 * pushes from `mine.position + 1`. A copy that is not — it holds a stretch `theirs` does not, a fork — must not:
 * applying their later transactions on top of its own would mix the two histories silently (positions it holds
 * are skipped as duplicates, the next one continues it under their newer epoch). It reads its fork and rebuilds.
 */
export function continuesHistory(theirs: LogHistory, mine: LogMark | undefined): boolean {
  if (!mine || mine.position === 0) return true;
  return epochAt(theirs, mine.position) === mine.epoch;
}

/**
 * Whether this place's transaction at `batch`'s position is outside `theirs`: they wrote that position under
 * another epoch, or they moved on to a newer epoch than the one it was made under (a push of it is refused as
 * stale). A transaction just not pushed yet, of an epoch they may still receive, is not a fork.
 */
export function forked(batch: LoggedBatch, theirs: LogHistory): boolean {
  const { epoch, position } = batch.fence;
  const written = epochAt(theirs, position);
  if (written !== undefined) return written !== epoch;
  return (theirs.head?.epoch ?? 0) > epoch;
}

/**
 * This place's fork against `theirs` (another place's history), read from its durable log tail — which keeps
 * every transaction the other place did not acknowledge (decision 0029) — or undefined when its copy is a prefix
 * of theirs (or only ahead of it). Writes nothing.
 */
export async function findFork(storage: Storage, theirs: LogHistory, replacing = false): Promise<Fork | undefined> {
  if (!storage.readLog) return undefined;
  const transactions: ForkedTransaction[] = [];
  // A copy about to be replaced by their history (a rebuild, decision 0047) can push nothing past their head after:
  // what it holds there is a fork too, whatever its epoch.
  const past = (batch: LoggedBatch) => replacing && batch.fence.position > (theirs.head?.position ?? 0);
  for (let after = 0; ; ) {
    const page = await storage.readLog(after, 64);
    if (page.length === 0) break;
    for (const batch of page) if (forked(batch, theirs) || past(batch)) transactions.push(describe(batch));
    after = page.at(-1)!.fence.position;
  }
  if (transactions.length === 0) return undefined;
  const mine = (await storage.load()).log ?? { epoch: 0, position: 0 };
  return { kind: "fork", from: transactions[0]!.position, mine, theirs: theirs.head, transactions };
}

function describe(batch: LoggedBatch): ForkedTransaction {
  const conversations = new Set<number>();
  for (const record of batch.conversations) conversations.add(record.id);
  for (const record of [...batch.entries, ...batch.tasks, ...batch.submissions]) conversations.add(record.conversationId);
  return {
    position: batch.fence.position,
    epoch: batch.fence.epoch,
    conversations: [...conversations].sort((a, b) => a - b),
    entries: batch.entries,
    tasks: batch.tasks.map((task) => ({ id: task.id, kind: task.kind, conversationId: task.conversationId, status: task.state.status })),
    submissions: batch.submissions.map((submission) => ({
      id: submission.id,
      conversationId: submission.conversationId,
      status: submission.status,
      ...(submission.requestId !== undefined ? { requestId: submission.requestId } : {}),
    })),
  };
}

/**
 * A fork as the app reads it (decision 0039): kept durably by the place that found it — a reload still shows it —
 * until the app dismisses it. Its transactions are in no history: the app shows them, and may submit their inputs
 * again (their `requestId`s say which) into the history the place follows now.
 */
export interface KeptFork extends Fork {
  /** Stable for this fork (the same fork found again keeps its id): what `dismissFork` takes. */
  id: string;
  /** When this place first found it, on its clock. */
  foundAt: number;
}

/** The id of `fork`: the epoch this place wrote it under and where it leaves the other history. */
function forkId(fork: Fork): string {
  return `fork-${fork.mine.epoch}-${fork.from}`;
}

/** Keeps `fork` in `storage` (once: found again, it keeps its first record); returns it as kept. */
export async function keepFork(storage: Storage, fork: Fork, foundAt: number): Promise<KeptFork> {
  const kept: KeptFork = { ...fork, id: forkId(fork), foundAt };
  await storage.keepFork?.(kept.id, kept as unknown as Json);
  return (await listForks(storage)).find((each) => each.id === kept.id) ?? kept;
}

/** The forks `storage` keeps, oldest epoch first. */
export async function listForks(storage: Storage): Promise<KeptFork[]> {
  const rows = (await storage.readForks?.()) ?? [];
  return rows.map((row) => row.record as unknown as KeptFork).sort((a, b) => a.mine.epoch - b.mine.epoch || a.from - b.from);
}

/**
 * Finds this place's fork against `theirs` and keeps it (decision 0039): what a place does when it learns another
 * history superseded its own (its push refused as stale, its lease refused at open). Undefined when there is none.
 */
export async function deliverFork(storage: Storage, theirs: LogHistory, now: number, replacing = false): Promise<KeptFork | undefined> {
  const fork = await findFork(storage, theirs, replacing);
  return fork && keepFork(storage, fork, now);
}

/** Drops a kept fork: the app showed it (or resubmitted its inputs). An unknown id does nothing. */
export async function dismissFork(storage: Storage, id: string): Promise<void> {
  await storage.dismissFork?.(id);
}
