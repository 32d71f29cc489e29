/**
 * The worker's commit watch, a test hook beside the crash points: it counts the storage's commits (every
 * `apply`, the one write path) and can freeze the storage at one of them, so a browser test crashes the tab
 * exactly at a commit boundary (`crashEveryCommit` in pi-durable-web/playwright). Frozen, no storage call
 * answers again (the phase that committed stays stopped), as if the process had died at that instant; the
 * test then crashes the tab for real. Off with `serveHarness({ crashPoints: false })`.
 */
import { TASK_KEYS } from "../session/keys.ts";
import type { Batch } from "../storage/records.ts";
import type { RebuildStage, Storage } from "../storage/storage.ts";

/** How many commit summaries the watch keeps (the newest). */
const KEPT = 2_000;
/**
 * Commits stored but not summarized yet, at most: a summary is made when the log is read or when this many
 * wait. Summarizing is the watch's only cost on a commit, and it grows with the batch: recovery's one commit
 * of 10,000 restarted tasks took 25 ms to summarize, in front of the first resumed step (issue 25).
 */
const UNSUMMARIZED = 64;

/** Where `globalThis` holds the watch in a worker whose harness serves crash points. */
export const COMMIT_WATCH_HOOK = "__piDurableCommits";

/** One commit as the sweep's invariants read it. */
export interface CommitSummary {
  /** 1 for the first commit of this worker, … */
  commit: number;
  /** One line: what the commit wrote (tasks with status and phase, entries, submissions, documents). */
  line: string;
  tasks: Array<{
    id: number;
    kind: string;
    status: string;
    phase?: string;
    replay?: string;
    /** A terminal task's state as JSON, to tell whether it changed later. */
    state?: string;
  }>;
  entries: Array<{ id: number; kind: string; submissionId?: number }>;
  /** Task keys written (`tx.createTask(…, { key })`): the key and the task it names. */
  keys: Array<{ key: string; taskId: number }>;
  /** `pi.live` documents written: the generation's attempt and whether its request was marked as sent. */
  live: Array<{ scope: string; run?: number; attempt?: number; requested: boolean }>;
  /** Where it stands in the fenced log (a storage under a lease): what a fork of this place holds (decision 0133). */
  fence?: { epoch: number; position: number };
}

/** Where the watch freezes: right after commit `commit` is stored, or right before it would be. */
export interface CommitCrash {
  commit: number;
  edge: "after" | "before";
}

export interface CommitWatch {
  /** Commits stored by this worker so far. */
  count(): number;
  /** The commits from `from` (1-based, inclusive) on, of the last 2,000. */
  log(from?: number): CommitSummary[];
  /** Freezes the storage at `crash`; resolves once frozen (rejects if that commit already happened). */
  arm(crash: CommitCrash): Promise<CommitCrash>;
}

/** Wraps `storage` with the watch and publishes it on `globalThis` for the test side. */
export function watchCommits(storage: Storage): Storage {
  // The last KEPT summaries only: a long-lived app keeps a bounded log (a sweep's scenario fits in it).
  const commits: CommitSummary[] = [];
  /** Stored commits whose summary is not made yet, oldest first (their batches are never changed after). */
  const unsummarized: Array<{ commit: number; batch: Batch }> = [];
  const summarizeWaiting = () => {
    for (const { commit, batch } of unsummarized.splice(0)) commits.push(summarize(commit, batch));
    if (commits.length > KEPT) commits.splice(0, commits.length - KEPT);
  };
  let stored = 0;
  let armed: { crash: CommitCrash; frozen: (crash: CommitCrash) => void } | undefined;
  let frozen = false;
  const never = new Promise<never>(() => {});
  const freeze = (): Promise<never> => {
    frozen = true;
    const hit = armed!;
    armed = undefined;
    hit.frozen(hit.crash);
    return never;
  };
  const watch: CommitWatch = {
    count: () => stored,
    log: (from = 1) => {
      summarizeWaiting();
      return commits.filter((commit) => commit.commit >= from);
    },
    arm(crash) {
      if (crash.commit <= stored)
        return Promise.reject(new Error(`Commit ${crash.commit} is already stored (${stored} so far): arm the crash before it.`));
      return new Promise<CommitCrash>((frozenAt) => (armed = { crash, frozen: frozenAt }));
    },
  };
  (globalThis as Record<string, unknown>)[COMMIT_WATCH_HOOK] = watch;
  const gate =
    <A extends unknown[], T>(method: (...args: A) => Promise<T>) =>
    (...args: A): Promise<T> =>
      frozen ? never : method.apply(storage, args);
  const gateStage = (stage: RebuildStage): RebuildStage => ({
    add: gate(stage.add),
    commit: gate(stage.commit),
    discard: gate(stage.discard),
  });
  const releaseWhileAlive = (release: () => void) => () => {
    if (!frozen) release();
  };
  const watched: Storage = {
    get readOnly() {
      return storage.readOnly;
    },
    get label() {
      return storage.label;
    },
    get maxRowBytes() {
      return storage.maxRowBytes;
    },
    load: gate(storage.load),
    async apply(batch) {
      if (frozen) return never;
      const next = stored + 1;
      if (armed?.crash.edge === "before" && armed.crash.commit === next) return freeze();
      const text = await storage.apply(batch); // a fenced batch's log text: the mirror pushes it (decision 0093)
      stored = next;
      unsummarized.push({ commit: next, batch });
      if (unsummarized.length >= UNSUMMARIZED) summarizeWaiting();
      if (armed?.crash.edge === "after" && armed.crash.commit === next) return freeze();
      return text;
    },
    getTask: gate(storage.getTask),
    listTasks: gate(storage.listTasks),
    getConversation: gate(storage.getConversation),
    listConversations: gate(storage.listConversations),
    listEntries: gate(storage.listEntries),
    getEntry: gate(storage.getEntry),
    getDocument: gate(storage.getDocument),
    listDocuments: gate(storage.listDocuments),
    getSubmission: gate(storage.getSubmission),
    findSubmission: gate(storage.findSubmission),
    listSubmissions: gate(storage.listSubmissions),
    query: gate(storage.query),
    exportImage: gate(storage.exportImage),
    close: gate(storage.close),
    // The durable log's tail (decision 0029): what a mirror pushes from after a lost link or a reload.
    ...(storage.readLog ? { readLog: gate(storage.readLog) } : {}),
    ...(storage.trimLog ? { trimLog: gate(storage.trimLog) } : {}),
    ...(storage.readEpochs ? { readEpochs: gate(storage.readEpochs) } : {}),
    // The whole copy, read for another place and rebuilt from the object's (decision 0047).
    ...(storage.readSnapshot ? { readSnapshot: gate(storage.readSnapshot) } : {}),
    ...(storage.rebuild ? { rebuild: gate(storage.rebuild) } : {}),
    // Read and rebuilt a row at a time (decision 0084): a staged rebuild's writes stop at a freeze as the storage's do.
    ...(storage.readSnapshotRows ? { readSnapshotRows: gate(storage.readSnapshotRows) } : {}),
    ...(storage.stageRebuild ? { stageRebuild: async () => gateStage(await gate(storage.stageRebuild!)()) } : {}),
    // The place's own rows outside every batch (decision 0039): its kept forks and its remembered pinned lease.
    ...(storage.keepFork ? { keepFork: gate(storage.keepFork) } : {}),
    ...(storage.readForks ? { readForks: gate(storage.readForks) } : {}),
    ...(storage.dismissFork ? { dismissFork: gate(storage.dismissFork) } : {}),
    ...(storage.rememberLease ? { rememberLease: gate(storage.rememberLease) } : {}),
    // The open's WAL checkpoint hold (decision 0033): without it a worker with crash points on (the default)
    // checkpointed in front of its first resumed step. A frozen storage runs nothing, its release included.
    ...(storage.holdCheckpoints ? { holdCheckpoints: () => releaseWhileAlive(storage.holdCheckpoints!()) } : {}),
    // S4's owed restarts, counted in slices after the open (decision 0092); a frozen storage counts none.
    ...(storage.recountSlice ? { recountSlice: gate(storage.recountSlice) } : {}),
  };
  Object.defineProperty(watched, "owesRestarts", { get: () => storage.owesRestarts });
  // SqliteStorage's `database` (for benchmarks and diagnostics) stays reachable through the watch.
  if ("database" in storage) Object.defineProperty(watched, "database", { get: () => (storage as { database: unknown }).database });
  return watched;
}

function summarize(commit: number, batch: Batch): CommitSummary {
  const tasks = batch.tasks.map((task) => {
    const state = task.state as { status: string; checkpoint?: { phase?: string; replay?: string }; outcome?: { status: string } };
    return {
      id: task.id,
      kind: task.kind,
      status: state.status,
      ...(state.checkpoint?.phase !== undefined ? { phase: state.checkpoint.phase } : {}),
      ...(typeof state.checkpoint?.replay === "string" ? { replay: state.checkpoint.replay } : {}),
      ...(state.status === "terminal" ? { state: JSON.stringify(state) } : {}),
    };
  });
  const entries = batch.entries.map((entry) => {
    const submissionId = (entry.payload as { submissionId?: unknown } | null)?.submissionId;
    return { id: entry.id, kind: entry.kind, ...(typeof submissionId === "number" ? { submissionId } : {}) };
  });
  const live = batch.documents
    .filter((document) => document.key === "pi.live")
    .map((document) => {
      const value = (document.value ?? {}) as { run?: { taskId?: number }; generation?: { attempt?: number; requestedAt?: number } };
      return {
        scope: document.scope,
        ...(value.run?.taskId !== undefined ? { run: value.run.taskId } : {}),
        ...(value.generation?.attempt !== undefined ? { attempt: value.generation.attempt } : {}),
        requested: value.generation?.requestedAt !== undefined,
      };
    });
  const keys = batch.documents
    .filter((document) => document.scope.startsWith(TASK_KEYS) && document.value !== null)
    .map((document) => ({ key: `${document.scope}:${document.key}`, taskId: Number((document.value as { taskId?: unknown }).taskId) }));
  const line = [
    ...tasks.map((task) => `task ${task.id} ${task.kind} ${task.status}${task.phase ? ` ${task.phase}` : ""}`),
    ...entries.map((entry) => `entry ${entry.id} ${entry.kind}`),
    ...batch.submissions.map((submission) => `submission ${submission.id} ${submission.status}`),
    ...batch.documents.map((document) => `document ${document.scope} ${document.key}${document.value === null ? " deleted" : ""}`),
  ].join("; ");
  const fence = batch.fence && { fence: { epoch: batch.fence.epoch, position: batch.fence.position } };
  return { commit, line: line || "(nothing)", tasks, entries, keys, live, ...fence };
}
