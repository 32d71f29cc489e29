import type { Json } from "../../base/json.ts";
import { InvalidArguments, NotFound, PageCallEnded, PageCallTaken, PageClaimLost } from "../../errors.ts";
import type { DocumentReader } from "../../session/documents.ts";
import type { KernelTx, Tx } from "../../session/tx.ts";
import type { TaskRecord } from "../../storage/records.ts";
import { wakeSleeper } from "../../tasks/transitions.ts";
import { asJson, PAGE_PHASE, pageCallKey, scopeOf } from "../conversation/documents.ts";
import { pageToolResult } from "../conversation/drafts.ts";
import type { ToolContent } from "../tool.ts";

/**
 * Page tools (DESIGN §4c, decision 0028). A call of a tool that runs in a page is a `pi.tool` task asleep
 * without a deadline at checkpoint `page` (its final arguments in it), next to its page-call record: the
 * document `pi.page-call:<callId>` in its conversation's scope. A page that provides the tool claims it in one
 * commit (the first claim wins; the record names it), runs it, and sends its result under that claim: one
 * commit writes the result into the record and wakes the task, which commits it as the call's result. A claim
 * lives as long as the harness that granted it and the page that holds it: at open, and when a host sees the
 * claiming page go, a claim is released and the woken task follows its replay policy.
 */

/** What a page sends as a page tool's result: text, or content items with an error flag and details. */
export type PageToolResult = string | { content?: string | ToolContent; isError?: boolean; details?: Json };

export interface PageCallRecord {
  taskId: number;
  callId: string;
  toolName: string;
  /**
   * `waiting` for a page to claim it; `claimed` by one (`claim`); `answered`: the result is in (`result`),
   * the task commits it; `released`: the claim was dropped while the page ran it (the task applies its replay
   * policy); `done` / `interrupted` / `withdrawn`: the call has ended.
   */
  status: "waiting" | "claimed" | "answered" | "released" | "done" | "interrupted" | "withdrawn";
  requestedAt: number;
  /** How many claims the call has had (a safe call runs again after a released one). */
  attempts: number;
  claim?: PageClaim;
  /** Only while `answered`: the task moves it into the call's result entry. */
  result?: Json;
  endedAt?: number;
}

export interface PageClaim {
  /** The claiming page's key for this claim: the result must carry it. */
  claimId: string;
  /** The page (a tab's id) that holds it: a host that sees that page go releases its claims. */
  pageId?: string;
  at: number;
}

/** A page tool call a page may claim, as `pendingPageCalls()` and the view show it. */
export interface PendingPageCall {
  conversationId: number;
  taskId: number;
  callId: string;
  toolName: string;
  arguments: { [key: string]: Json };
  status: "waiting" | "claimed";
  requestedAt: number;
  attempts: number;
  claimedAt?: number;
}

/** The `page` checkpoint of a `pi.tool` task: the final arguments, committed before any page saw them. */
export type PageCheckpoint = {
  phase: "page";
  arguments: { [key: string]: Json };
  replay: "safe" | "unsafe";
};

/** What a claim gives the page that won it: the call to run. */
export interface PageCallClaimed {
  callId: string;
  taskId: number;
  toolName: string;
  arguments: { [key: string]: Json };
  claimId: string;
  attempt: number;
}

/** How many ended page calls' records a conversation keeps (a late claim or result is told how its call ended). */
export const KEPT_PAGE_CALLS = 64;
const ENDED_KEY = "pi.page-calls.ended";

/**
 * The ending commit's part: the call joins its conversation's list of ended page calls and the record of the
 * oldest past `KEPT_PAGE_CALLS` is deleted (if it is still that call's), so records stay bounded.
 */
export function endPageCall(tx: Tx, conversationId: number, record: PageCallRecord): void {
  const scope = scopeOf(conversationId);
  const ended = ((tx.document(scope, ENDED_KEY) as Array<[string, number]> | undefined) ?? []).filter(([, id]) => id !== record.taskId);
  ended.push([record.callId, record.taskId]);
  while (ended.length > KEPT_PAGE_CALLS) {
    const [oldCall, oldTask] = ended.shift()!;
    if (readPageCall(tx, conversationId, oldCall)?.taskId === oldTask) tx.deleteDocument(scope, pageCallKey(oldCall));
  }
  tx.setDocument(scope, ENDED_KEY, ended);
}

export function readPageCall(from: DocumentReader, conversationId: number, callId: string): PageCallRecord | undefined {
  return from.document(scopeOf(conversationId), pageCallKey(callId)) as PageCallRecord | undefined;
}

export function writePageCall(tx: Tx, conversationId: number, record: PageCallRecord): void {
  tx.setDocument(scopeOf(conversationId), pageCallKey(record.callId), asJson(record));
}

const ended = (record: PageCallRecord): "result" | "interrupted" | "withdrawn" | undefined =>
  record.status === "answered" || record.status === "done"
    ? "result"
    : record.status === "interrupted"
      ? "interrupted"
      : record.status === "withdrawn"
        ? "withdrawn"
        : undefined;

function liveRecord(tx: KernelTx, conversationId: number, callId: string): { record: PageCallRecord; task: TaskRecord | undefined } {
  const record = readPageCall(tx, conversationId, callId);
  if (!record)
    throw new NotFound(
      `Conversation ${conversationId} has no page tool call ${JSON.stringify(callId)} (or it ended before the conversation's last ${KEPT_PAGE_CALLS} page calls; its tool result in the transcript says how).`,
    );
  return { record, task: tx.task(record.taskId) };
}

/**
 * The claim commit: the first page to claim a waiting call runs it. The same `claimId` again (a page's retry)
 * gets its claim back; another page's claim is `PageCallTaken`; an ended call `PageCallEnded`.
 */
export function claimIn(
  tx: KernelTx,
  conversationId: number,
  callId: string,
  claim: { claimId: string; pageId?: string },
): PageCallClaimed {
  const { record, task } = liveRecord(tx, conversationId, callId);
  const end = ended(record);
  if (end) throw new PageCallEnded(callId, record.taskId, end);
  if (!task || task.abortRequested) throw new PageCallEnded(callId, record.taskId, "withdrawn");
  const state = task.state;
  const checkpoint = "checkpoint" in state ? (state.checkpoint as unknown as PageCheckpoint) : undefined;
  if (checkpoint?.phase !== PAGE_PHASE) throw new PageCallEnded(callId, record.taskId, "interrupted");
  const claimed = (attempt: number, claimId: string): PageCallClaimed => ({
    callId,
    taskId: record.taskId,
    toolName: record.toolName,
    arguments: checkpoint.arguments,
    claimId,
    attempt,
  });
  if (record.status === "claimed") {
    if (record.claim?.claimId === claim.claimId) return claimed(record.attempts, claim.claimId);
    throw new PageCallTaken(callId, record.taskId, record.claim?.at ?? record.requestedAt);
  }
  // A released claim waits for its task to apply the replay policy: nobody may claim it in between.
  if (record.status === "released") throw new PageCallTaken(callId, record.taskId, record.claim?.at ?? record.requestedAt);
  const next: PageCallRecord = {
    ...record,
    status: "claimed",
    attempts: record.attempts + 1,
    claim: { claimId: claim.claimId, ...(claim.pageId !== undefined ? { pageId: claim.pageId } : {}), at: tx.now() },
  };
  writePageCall(tx, conversationId, next);
  return claimed(next.attempts, claim.claimId);
}

/**
 * The result commit: a result under the claim that holds the call goes into the record and wakes the task.
 * A second result is `PageCallEnded`; a result under a claim the call no longer holds is `PageClaimLost`;
 * a malformed one `InvalidArguments`, an oversized one `InvalidInput` (nothing written).
 */
export function answerIn(tx: KernelTx, conversationId: number, callId: string, claimId: string, result: PageToolResult): PageCallRecord {
  const problem = pageToolResult(result, "result");
  if (problem) throw new InvalidArguments("answerPageCall", problem);
  const { record } = liveRecord(tx, conversationId, callId);
  const end = ended(record);
  if (end) throw new PageCallEnded(callId, record.taskId, end);
  if (record.status === "claimed" && record.claim?.claimId !== claimId)
    throw new PageCallTaken(callId, record.taskId, record.claim?.at ?? record.requestedAt);
  if (record.status !== "claimed") throw new PageClaimLost(callId, record.taskId);
  const admitted = tx.admit(result, () => `The result of page tool call ${callId}`) as Json;
  // The result entry the task will write from it must fit the limits too, or its commit could never be stored.
  tx.admit(resultEntryOf(record, result, tx.now()), () => `The result entry of page tool call ${callId}`);
  const next: PageCallRecord = { ...record, status: "answered", result: admitted };
  writePageCall(tx, conversationId, next);
  wakeSleeper(tx, record.taskId, PAGE_PHASE);
  const { result: _result, ...rest } = next;
  return rest;
}

/** The `pi.tool-result` payload a result becomes (its size and depth, for the limits; hooks may change it). */
function resultEntryOf(record: PageCallRecord, result: PageToolResult, now: number): Json {
  const given = typeof result === "string" ? { content: result } : result;
  const content = typeof given.content === "string" ? [{ type: "text", text: given.content }] : (given.content ?? []);
  return {
    message: {
      role: "toolResult",
      toolCallId: record.callId,
      toolName: record.toolName,
      content,
      isError: given.isError === true,
      ...(given.details !== undefined ? { details: given.details } : {}),
      timestamp: now,
    },
  } as unknown as Json;
}

/**
 * Releases claims (at open: every claim but those of `keep`, the pages still connected across the open; when a
 * host sees a page go: that page's) and wakes their tasks, which apply the replay policy. Returns how many it released.
 */
export function releaseIn(tx: KernelTx, tasks: Iterable<TaskRecord>, pageId?: string, keep?: ReadonlySet<string>): number {
  let released = 0;
  for (const task of tasks) {
    if (task.kind !== "pi.tool" || task.state.status !== "sleeping" || task.state.checkpoint.phase !== PAGE_PHASE) continue;
    const callId = (task.input as { callId?: string }).callId;
    if (typeof callId !== "string") continue;
    const record = readPageCall(tx, task.conversationId, callId);
    if (record?.status !== "claimed" || record.taskId !== task.id) continue;
    if (pageId !== undefined && record.claim?.pageId !== pageId) continue;
    if (record.claim?.pageId !== undefined && keep?.has(record.claim.pageId)) continue;
    writePageCall(tx, task.conversationId, { ...record, status: "released" });
    wakeSleeper(tx, task.id, PAGE_PHASE);
    released++;
  }
  return released;
}

/** The page tool calls of `tasks` a page may claim or is running, oldest first. */
export function pendingPageCalls(tasks: Iterable<TaskRecord>, documents: DocumentReader, conversationId?: number): PendingPageCall[] {
  const out: PendingPageCall[] = [];
  for (const task of tasks) {
    if (task.kind !== "pi.tool" || (conversationId !== undefined && task.conversationId !== conversationId)) continue;
    const pending = pendingPageCallOf(task, documents);
    if (pending) out.push(pending);
  }
  return out.sort((a, b) => a.requestedAt - b.requestedAt || a.taskId - b.taskId);
}

/** The page call of one live `pi.tool` task, while it waits for a page or a page runs it. */
export function pendingPageCallOf(task: TaskRecord, documents: DocumentReader): PendingPageCall | undefined {
  const state = task.state;
  if (state.status !== "sleeping" || state.checkpoint.phase !== PAGE_PHASE || task.abortRequested) return undefined;
  const callId = (task.input as { callId?: string }).callId;
  if (typeof callId !== "string") return undefined;
  const record = readPageCall(documents, task.conversationId, callId);
  if ((record?.status !== "waiting" && record?.status !== "claimed") || record.taskId !== task.id) return undefined;
  return {
    conversationId: task.conversationId,
    taskId: task.id,
    callId,
    toolName: record.toolName,
    arguments: (state.checkpoint as unknown as PageCheckpoint).arguments,
    status: record.status,
    requestedAt: record.requestedAt,
    attempts: record.attempts,
    ...(record.status === "claimed" && record.claim ? { claimedAt: record.claim.at } : {}),
  };
}
