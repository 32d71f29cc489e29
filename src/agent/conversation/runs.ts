import { ConversationBusy } from "../../errors.ts";
import type { KernelTx } from "../../session/tx.ts";
import type { SubmissionRecord } from "../../storage/records.ts";
import type { TaskKind } from "../../tasks/types.ts";
import type { UserMessage } from "../model-types.ts";
import { GENERATION_KIND } from "../tasks/generation-kind.ts";
import type {
  EntryDraft,
  InboxState,
  LiveFailure,
  RunFailureEntryPayload,
  SubmissionDraft,
  UnansweredReason,
  UserContent,
  UserEntryPayload,
} from "../types.ts";
import { appendEntry, asJson, clearToolProgress, readInbox, readLive, writeInbox, writeLive } from "./documents.ts";

/** `SubmissionRecord.payload` of an input. `entryId` is set once the input is placed as a `pi.user` entry. */
export interface InputPayload {
  content: UserContent;
  whenBusy: "followUp" | "steer" | "reject";
  entryId?: number;
}

/** `SubmissionRecord.payload` of a write. */
export interface WritePayload {
  entry: EntryDraft;
  entryId?: number;
}

/** How a run ends for the inputs it answers. */
export type RunSettlement = { status: "done"; answer: number } | { status: "unanswered"; reason: UnansweredReason; message: string };

/**
 * Creates a task owned by the conversation, also when a task is committing (a generation that starts the
 * next run must not own it: the next run outlives it).
 */
export function createConversationTask<I>(tx: KernelTx, definition: TaskKind<I>, input: I, conversationId: number): number {
  const actor = tx.actor;
  tx.actor = { conversationId };
  try {
    return tx.createTask(definition, input, { conversationId });
  } finally {
    tx.actor = actor;
  }
}

/**
 * Admits a submission in one commit (upstream §5.6). Busy (a run is live) or a non-empty inbox: the draft is
 * queued for the next boundary. Idle: a write is appended at once, an input is placed and starts a run.
 */
export function admit(tx: KernelTx, conversationId: number, draft: SubmissionDraft): SubmissionRecord {
  const live = readLive(tx, conversationId);
  const busy = live.run !== undefined;
  if (draft.type === "input" && busy && draft.whenBusy === "reject") throw new ConversationBusy(conversationId);
  const payload =
    draft.type === "input"
      ? ({ content: draft.content, whenBusy: draft.whenBusy ?? "followUp" } satisfies InputPayload)
      : ({ entry: draft.entry } satisfies WritePayload);
  const record: SubmissionRecord = {
    id: tx.mintId(),
    conversationId,
    type: draft.type,
    ...(draft.requestId !== undefined ? { requestId: draft.requestId } : {}),
    status: "queued",
    payload: tx.admit(asJson(payload), `The ${draft.type === "input" ? "content" : "entry"} of a submission`),
    createdAt: tx.now(),
  };
  tx.putSubmission(record);
  const inbox = readInbox(tx, conversationId);
  if (busy || inbox.items.length > 0) {
    const mode = draft.type === "write" ? "write" : draft.whenBusy === "steer" ? "steer" : "followUp";
    writeInbox(tx, conversationId, { items: [...inbox.items, { submissionId: record.id, mode }] });
    if (!busy) finalBoundary(tx, conversationId);
  } else if (draft.type === "write") {
    placeWrite(tx, record);
  } else {
    placeInput(tx, record);
    startRun(tx, conversationId, [record.id]);
  }
  return tx.submission(record.id) ?? record;
}

/** Starts a run: a new conversation-owned generation answering `inputs`. */
export function startRun(tx: KernelTx, conversationId: number, inputs: number[]): number {
  const taskId = createConversationTask(tx, GENERATION_KIND, {}, conversationId);
  const { runFailure: _failure, generation: _generation, tools: _tools, ...live } = readLive(tx, conversationId);
  writeLive(tx, conversationId, { ...live, run: { taskId, inputs, startedAt: tx.now() } });
  return taskId;
}

/**
 * Ends the run of `taskId` (if it is still the conversation's run): settles its inputs, clears the round,
 * records a failure (in `pi.live.runFailure` until the next run, and for good as a `pi.run-failure` entry),
 * then applies the final boundary, which may start the next run from the inbox.
 */
export function endRun(tx: KernelTx, conversationId: number, taskId: number, settlement: RunSettlement): void {
  const live = readLive(tx, conversationId);
  const { run, generation: _generation, tools: _tools, ...rest } = live;
  // Another run (or none) owns pi.live now: what it shows is not this task's to clear.
  if (run?.taskId !== taskId) return;
  clearRound(tx, conversationId);
  for (const input of run.inputs) {
    if (settlement.status === "done") settle(tx, input, "done", { answer: settlement.answer });
    else settle(tx, input, "unanswered", { reason: settlement.reason, message: settlement.message });
  }
  const runFailure: LiveFailure | undefined =
    settlement.status === "unanswered" ? { taskId, reason: settlement.reason, message: settlement.message, at: tx.now() } : undefined;
  writeLive(tx, conversationId, { ...rest, ...(runFailure ? { runFailure } : {}) });
  if (settlement.status === "unanswered") {
    // Before the next input is placed: the failure belongs to the answer it ended.
    const payload: RunFailureEntryPayload = { taskId, reason: settlement.reason, error: settlement.message, inputs: run.inputs };
    appendEntry(tx, conversationId, "pi.run-failure", payload);
  }
  finalBoundary(tx, conversationId);
}

/**
 * After a tool round (upstream "postTools"): queued writes and steers are placed, and the steers join the run.
 * Returns the placed steer submissions.
 */
export function postToolsBoundary(tx: KernelTx, conversationId: number): number[] {
  const inbox = readInbox(tx, conversationId);
  if (inbox.items.length === 0) return [];
  const selected = inbox.items.filter((item) => item.mode === "write" || item.mode === "steer");
  const steers = placeSelected(tx, conversationId, inbox, selected);
  if (steers.length > 0) {
    const live = readLive(tx, conversationId);
    if (live.run) writeLive(tx, conversationId, { ...live, run: { ...live.run, inputs: [...live.run.inputs, ...steers] } });
  }
  return steers;
}

/**
 * When a run ends (or an idle conversation has queued work): every queued write, every steer and the first
 * follow-up are placed; the placed inputs start the next run.
 */
export function finalBoundary(tx: KernelTx, conversationId: number): void {
  const inbox = readInbox(tx, conversationId);
  if (inbox.items.length === 0) return;
  const firstFollowUp = inbox.items.find((item) => item.mode === "followUp");
  const selected = inbox.items.filter((item) => item.mode !== "followUp" || item === firstFollowUp);
  const inputs = placeSelected(tx, conversationId, inbox, selected);
  if (inputs.length > 0) startRun(tx, conversationId, inputs);
}

/** Removes what is left of the round's tool progress documents (the result entries stay). */
export function clearRound(tx: KernelTx, conversationId: number): void {
  for (const tool of readLive(tx, conversationId).tools ?? []) {
    if (tool.taskId !== undefined) clearToolProgress(tx, conversationId, tool.taskId);
  }
}

/** Withdraws queued inputs (not writes) as `unanswered` `aborted`: `conversation.abort()`. */
export function withdrawInputs(tx: KernelTx, conversationId: number): number[] {
  const inbox = readInbox(tx, conversationId);
  const withdrawn = inbox.items.filter((item) => item.mode !== "write");
  if (withdrawn.length === 0) return [];
  for (const item of withdrawn)
    settle(tx, item.submissionId, "unanswered", {
      reason: "aborted",
      message: "The conversation was aborted before this input was answered.",
    });
  writeInbox(tx, conversationId, { items: inbox.items.filter((item) => item.mode === "write") });
  return withdrawn.map((item) => item.submissionId);
}

/** Settles an open submission; a settled one is left as it is. */
export function settle(tx: KernelTx, submissionId: number, status: "done" | "unanswered", result: Record<string, unknown>): void {
  const record = tx.submission(submissionId);
  if (!record || (record.status !== "queued" && record.status !== "running")) return;
  tx.putSubmission({ ...record, status, result: asJson(result), settledAt: tx.now() });
}

/** Places the selected inbox items in id order (writes as entries, inputs as `pi.user`); returns the inputs. */
function placeSelected(tx: KernelTx, conversationId: number, inbox: InboxState, selected: InboxState["items"]): number[] {
  if (selected.length === 0) return [];
  const chosen = new Set(selected);
  writeInbox(tx, conversationId, { items: inbox.items.filter((item) => !chosen.has(item)) });
  const inputs: number[] = [];
  for (const item of [...selected].sort((a, b) => a.submissionId - b.submissionId)) {
    const record = tx.submission(item.submissionId);
    if (record?.status !== "queued") continue;
    if (record.type === "write") placeWrite(tx, record);
    else {
      placeInput(tx, record);
      inputs.push(record.id);
    }
  }
  return inputs;
}

function placeInput(tx: KernelTx, record: SubmissionRecord): void {
  const payload = record.payload as unknown as InputPayload;
  const message: UserMessage = { role: "user", content: payload.content, timestamp: tx.now() };
  const placed: UserEntryPayload = {
    message,
    submissionId: record.id,
    ...(record.requestId !== undefined ? { requestId: record.requestId } : {}),
  };
  const entryId = appendEntry(tx, record.conversationId, "pi.user", placed);
  tx.putSubmission({ ...record, status: "running", payload: asJson({ ...payload, entryId }) });
}

function placeWrite(tx: KernelTx, record: SubmissionRecord): void {
  const payload = record.payload as unknown as WritePayload;
  const { kind, ...rest } = payload.entry;
  const entryId = appendEntry(tx, record.conversationId, kind, rest);
  tx.putSubmission({
    ...record,
    status: "done",
    payload: asJson({ ...payload, entryId }),
    result: asJson({ entryId }),
    settledAt: tx.now(),
  });
}
