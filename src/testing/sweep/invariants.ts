import { LIVE, scopeOf } from "../../agent/conversation/documents.ts";
import type { Batch, EntryRecord, SubmissionRecord, TaskRecord } from "../../storage/records.ts";
import type { Storage } from "../../storage/storage.ts";
import type { BuiltInInvariant, CrashWorldView } from "./types.ts";

interface Rows {
  tasks: TaskRecord[];
  entries: EntryRecord[];
  submissions: SubmissionRecord[];
  conversations: number[];
}

async function rowsOf(storage: Storage): Promise<Rows> {
  const conversations = (await storage.listConversations()).map((c) => c.id);
  const entries: EntryRecord[] = [];
  const submissions: SubmissionRecord[] = [];
  for (const id of conversations) {
    entries.push(...(await storage.listEntries(id)));
    submissions.push(...(await storage.listSubmissions(id)));
  }
  return { tasks: await storage.listTasks(), entries, submissions, conversations };
}

const same = (a: unknown, b: unknown) => JSON.stringify(a) === JSON.stringify(b);
const settled = (s: SubmissionRecord) => s.status === "done" || s.status === "unanswered";

/** The built-in invariants, checked in this order at the end of every crash world. */
export const BUILT_IN_CHECKS: Array<[BuiltInInvariant, (view: CrashWorldView<unknown>) => Promise<string | undefined>]> = [
  [
    "committed-rows-survive",
    async (view) => {
      const end = await rowsOf(view.storage);
      for (const image of view.atCrash) {
        const before = await rowsOf(image);
        const tasks = new Set(end.tasks.map((t) => t.id));
        for (const task of before.tasks)
          if (!tasks.has(task.id)) return `task ${task.id} (${task.kind}) was committed before the crash and is gone`;
        const entries = new Map(end.entries.map((e) => [e.id, e]));
        for (const entry of before.entries) {
          if (!same(entries.get(entry.id), entry)) return `entry ${entry.id} (${entry.kind}) changed or vanished after the crash`;
        }
        const submissions = new Set(end.submissions.map((s) => s.id));
        for (const submission of before.submissions) if (!submissions.has(submission.id)) return `submission ${submission.id} is gone`;
        const conversations = new Set(end.conversations);
        for (const id of before.conversations) if (!conversations.has(id)) return `conversation ${id} is gone`;
      }
      return undefined;
    },
  ],
  [
    "settled-never-change",
    async (view) => {
      const end = await rowsOf(view.storage);
      const tasks = new Map(end.tasks.map((t) => [t.id, t]));
      const submissions = new Map(end.submissions.map((s) => [s.id, s]));
      for (const image of view.atCrash) {
        const before = await rowsOf(image);
        for (const task of before.tasks) {
          if (task.state.status === "terminal" && !same(tasks.get(task.id), task))
            return `terminal task ${task.id} (${task.kind}) changed after the crash`;
        }
        for (const submission of before.submissions) {
          if (settled(submission) && !same(submissions.get(submission.id), submission))
            return `settled submission ${submission.id} changed after the crash`;
        }
      }
      return undefined;
    },
  ],
  [
    "no-task-left-live",
    async (view) => {
      const live = (await view.storage.listTasks()).filter((t) => t.state.status !== "terminal");
      return live.length === 0
        ? undefined
        : `tasks left live at the end: ${live.map((t) => `${t.id} (${t.kind}, ${t.state.status})`).join(", ")}`;
    },
  ],
  [
    "effects-at-most-once",
    async (view) => {
      for (const [key, count] of view.effects) if (count > 1) return `effect ${JSON.stringify(key)} happened ${count} times`;
      return undefined;
    },
  ],
  [
    "one-result-per-tool-call",
    async (view) => {
      const { entries } = await rowsOf(view.storage);
      const results = new Map<string, number>();
      for (const entry of entries) {
        if (entry.kind !== "pi.tool-result") continue;
        const id = (entry.payload as { message?: { toolCallId?: string } }).message?.toolCallId;
        results.set(`${entry.conversationId}:${id}`, (results.get(`${entry.conversationId}:${id}`) ?? 0) + 1);
      }
      for (const entry of entries) {
        if (entry.kind !== "pi.assistant") continue;
        const message = (entry.payload as { message?: { content?: Array<{ type: string; id?: string }>; stopReason?: string } }).message;
        if (message?.stopReason === "aborted" || message?.stopReason === "error") continue;
        for (const item of message?.content ?? []) {
          if (item.type !== "toolCall") continue;
          const count = results.get(`${entry.conversationId}:${item.id}`) ?? 0;
          if (count !== 1) return `tool call ${item.id} of entry ${entry.id} has ${count} results`;
        }
      }
      return undefined;
    },
  ],
  [
    "unsafe-tool-never-twice",
    async (view) => {
      for (const [key, { replay, runs }] of view.toolRuns)
        if (replay === "unsafe" && runs > 1) return `unsafe tool call ${key} ran ${runs} times`;
      return undefined;
    },
  ],
  [
    "no-resend-before-backoff",
    async (view) => {
      // A request in flight at a crash (its `requestedAt` committed) goes out again only as a later attempt,
      // after a committed retry time, and not before that time.
      const events = (view as CrashWorldView<unknown> & { [REQUESTS]: RequestEvent[] })[REQUESTS];
      for (const [index, image] of view.atCrash.entries()) {
        for (const conversation of await image.listConversations()) {
          const live = (await image.getDocument(scopeOf(conversation.id), LIVE)) as LiveDoc;
          const inFlight = live?.generation;
          if (inFlight?.requestedAt === undefined) continue;
          let retryAt: number | undefined;
          for (const event of events) {
            if (event.process <= index + 1 || event.conversationId !== conversation.id) continue;
            if (event.retryAt !== undefined) retryAt = event.retryAt;
            if (event.requestedAt === undefined) continue;
            if (retryAt === undefined || event.requestedAt < retryAt || event.attempt <= (inFlight.attempt ?? 1)) {
              return `the request of conversation ${conversation.id} in flight at crash ${index + 1} (attempt ${inFlight.attempt}) was sent again as attempt ${event.attempt} at ${event.requestedAt}, ${retryAt === undefined ? "without a retry backoff" : `before its backoff ended at ${retryAt}`}`;
            }
            break;
          }
        }
      }
      return undefined;
    },
  ],
];

type LiveDoc = { generation?: { attempt?: number; requestedAt?: number; retry?: { at: number } } } | undefined;

/** Where a world view keeps its request events for `no-resend-before-backoff`. */
export const REQUESTS = Symbol("requests");

/** A model request (or a retry time) committed to a conversation's `pi.live`. */
export interface RequestEvent {
  process: number;
  conversationId: number;
  attempt: number;
  requestedAt?: number;
  retryAt?: number;
}

export function requestEvents(batch: Batch, process: number): RequestEvent[] {
  const out: RequestEvent[] = [];
  for (const document of batch.documents) {
    if (document.key !== LIVE || !document.scope.startsWith("conversation:")) continue;
    const generation = (document.value as LiveDoc)?.generation;
    if (!generation || (generation.requestedAt === undefined && generation.retry === undefined)) continue;
    out.push({
      process,
      conversationId: Number(document.scope.slice("conversation:".length)),
      attempt: generation.attempt ?? 1,
      ...(generation.requestedAt !== undefined ? { requestedAt: generation.requestedAt } : {}),
      ...(generation.retry ? { retryAt: generation.retry.at } : {}),
    });
  }
  return out;
}
