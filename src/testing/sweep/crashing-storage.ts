import type { Batch } from "../../storage/records.ts";
import type { Storage } from "../../storage/storage.ts";
import type { CrashPoint } from "./types.ts";

/**
 * A storage that counts commits and, at `crash`, copies the image and freezes: from then on no call answers
 * (the process is gone; the copy is what the disk holds). `after`: the commit is stored, its caller never hears
 * of it. `before`: the commit is not stored.
 */
export function crashingStorage(
  inner: Storage,
  crash: CrashPoint | undefined,
  onCommit: (what: string, batch?: Batch) => void,
  onCrash: (image: Uint8Array) => void,
): Storage & { readonly busy: number; disarm(): void; crash(): Promise<Uint8Array> } {
  let commits = 0;
  let frozen = false;
  /** Storage calls started and not yet answered (frozen ones excluded): the process is not idle. */
  let busy = 0;
  const never = new Promise<never>(() => {});
  const tracked = async <T>(body: () => Promise<T>): Promise<T> => {
    busy++;
    try {
      return await body();
    } finally {
      busy--;
    }
  };
  const freeze = async (): Promise<never> => {
    frozen = true;
    onCrash(await tracked(() => inner.exportImage()));
    return never;
  };
  const commit = async <T>(what: () => string, body: () => Promise<T>, batch?: Batch): Promise<T> => {
    if (frozen) return never;
    if (crash?.edge === "before" && commits + 1 === crash.commit) return freeze();
    const result = await tracked(body);
    commits++;
    onCommit(what(), batch);
    if (crash?.edge === "after" && commits === crash.commit) return freeze();
    return result;
  };
  const read =
    <A extends unknown[], T>(method: (...args: A) => Promise<T>) =>
    (...args: A): Promise<T> =>
      frozen ? never : tracked(() => method.apply(inner, args));
  return {
    get busy() {
      return busy;
    },
    /** Crashes now, between commits (a crash at a message): the image of this instant; nothing answers again. */
    async crash() {
      frozen = true;
      return tracked(() => inner.exportImage());
    },
    /** No crash from here on (the process finished first; its close is bookkeeping, not a crash point). */
    disarm() {
      crash = undefined;
    },
    get readOnly() {
      return inner.readOnly;
    },
    get label() {
      return inner.label;
    },
    load: read(inner.load),
    apply: (batch) =>
      commit(
        () => describeBatch(batch),
        () => inner.apply(batch),
        batch,
      ),
    ...(inner.readLog ? { readLog: read(inner.readLog) } : {}),
    ...(inner.trimLog ? { trimLog: read(inner.trimLog) } : {}),
    ...(inner.readEpochs ? { readEpochs: read(inner.readEpochs) } : {}),
    getTask: read(inner.getTask),
    listTasks: read(inner.listTasks),
    getConversation: read(inner.getConversation),
    listConversations: read(inner.listConversations),
    listEntries: read(inner.listEntries),
    getEntry: read(inner.getEntry),
    getDocument: read(inner.getDocument),
    listDocuments: read(inner.listDocuments),
    getSubmission: read(inner.getSubmission),
    findSubmission: read(inner.findSubmission),
    listSubmissions: read(inner.listSubmissions),
    query: read(inner.query),
    exportImage: read(inner.exportImage),
    close: read(inner.close),
  };
}

function describeBatch(batch: Batch): string {
  const parts: string[] = [];
  for (const task of batch.tasks) {
    const state = task.state as { status: string; checkpoint?: { phase?: string }; outcome?: { status: string } };
    const where = state.checkpoint?.phase ?? state.outcome?.status ?? "";
    parts.push(
      `task ${task.id} ${task.kind} ${state.status}${where ? ` ${where}` : ""}${task.abortRequested ? " (abort mark)" : ""}${task.memos ? ` memos ${Object.keys(task.memos).join(",")}` : ""}`,
    );
  }
  for (const entry of batch.entries) parts.push(`entry ${entry.id} ${entry.kind}`);
  for (const submission of batch.submissions) parts.push(`submission ${submission.id} ${submission.status}`);
  for (const document of batch.documents) parts.push(`document ${document.key}${document.value === null ? " deleted" : ""}`);
  for (const conversation of batch.conversations) parts.push(`conversation ${conversation.id}`);
  return parts.join("; ") || "(empty)";
}
