import type { Json } from "../../base/json.ts";
import {
  AlreadyDecided,
  ApprovalMismatch,
  ApprovalWithdrawn,
  type DecisionSummary,
  InvalidSubmission,
  NoPendingApproval,
  NotFound,
} from "../../errors.ts";
import type { DocumentReader } from "../../session/documents.ts";
import type { KernelTx, Tx } from "../../session/tx.ts";
import type { TaskRecord } from "../../storage/records.ts";
import { wakeSleeper } from "../../tasks/transitions.ts";
import { APPROVAL_PHASE, approvalKey, asJson, scopeOf } from "../conversation/documents.ts";

/**
 * A person in the loop (DESIGN §4c). A tool call that needs a decision is a `pi.tool` task asleep without a
 * deadline at checkpoint `approval` (its final arguments in it), next to its approval record: the document
 * `pi.approval:<callId>` in its conversation's scope. One commit decides it (`decideIn`): the record takes the
 * decision and the task is woken; every later decision finds the record decided and is refused, naming the
 * first. The record stays after the call ended, so a late decision is told what happened — for the
 * conversation's last `KEPT_DECISIONS` ended calls that asked (`endApproval`); older records are let go.
 */
/**
 * How many ended calls of one conversation keep their approval record, so that a late decision (an offline
 * tab, a second person) is told the first one (decision 0024). A record past that is deleted.
 */
export const KEPT_DECISIONS = 64;
/** The conversation's ended calls that still have a record, oldest first: `[callId, taskId]` pairs. */
const ENDED_KEY = "pi.approvals.ended";

export interface ApprovalRecord {
  taskId: number;
  callId: string;
  toolName: string;
  /** Binds a decision to the arguments the person saw (`argumentsHash` of the final arguments). */
  argumentsHash: string;
  requestedAt: number;
  /** Harness clock: no decision by then denies the call with reason "expired". */
  expiresAt?: number;
  status: "awaiting" | "approved" | "denied" | "withdrawn";
  reason?: string;
  decidedAt?: number;
  by?: DecisionSummary["by"];
  /** The key the deciding call carried: the same call sent again (a tab's retry) gets this record back. */
  decisionId?: string;
}

/** A decision as `decide` takes it. `argumentsHash`, when given, must be the one the call waits with. */
export interface Decision {
  approved: boolean;
  reason?: string;
  argumentsHash?: string;
  /**
   * An idempotency key: a decision sent again with the same key (after a lost connection, by a follower tab's
   * retry) returns the record it made instead of `AlreadyDecided`. A follower tab adds one to every decision.
   */
  decisionId?: string;
}

/** A call waiting for a person, as `inspect()`, `pendingApprovals()` and the view show it. */
export interface PendingApproval {
  conversationId: number;
  taskId: number;
  callId: string;
  toolName: string;
  arguments: { [key: string]: Json };
  argumentsHash: string;
  requestedAt: number;
  expiresAt?: number;
  /** How long it has waited, on the harness clock, when this was read. */
  ageMs: number;
}

/** The `approval` checkpoint of a `pi.tool` task: the call's final arguments, committed before anything ran. */
export type ApprovalCheckpoint = {
  phase: "approval";
  arguments: { [key: string]: Json };
  replay: "safe" | "unsafe";
};

export function readApproval(from: DocumentReader, conversationId: number, callId: string): ApprovalRecord | undefined {
  return from.document(scopeOf(conversationId), approvalKey(callId)) as ApprovalRecord | undefined;
}

export function writeApproval(tx: Tx, conversationId: number, record: ApprovalRecord): void {
  tx.setDocument(scopeOf(conversationId), approvalKey(record.callId), asJson(record));
}

/**
 * In the commit that ends the call `callId` of task `taskId` (its result): its record joins the conversation's
 * ended calls, and the oldest one past `KEPT_DECISIONS` is deleted (only if it is still that call's: a model
 * may give a later call the same id). Keeps what an app's memory and storage hold of decisions bounded.
 */
export function endApproval(tx: Tx, conversationId: number, callId: string, taskId: number): void {
  const scope = scopeOf(conversationId);
  const ended = ((tx.document(scope, ENDED_KEY) as Array<[string, number]> | undefined) ?? []).filter(([, id]) => id !== taskId);
  ended.push([callId, taskId]);
  while (ended.length > KEPT_DECISIONS) {
    const [oldCall, oldTask] = ended.shift()!;
    if (readApproval(tx, conversationId, oldCall)?.taskId === oldTask) tx.deleteDocument(scope, approvalKey(oldCall));
  }
  tx.setDocument(scope, ENDED_KEY, ended);
}

export function summary(record: ApprovalRecord): DecisionSummary {
  return {
    approved: record.status === "approved",
    ...(record.reason !== undefined ? { reason: record.reason } : {}),
    by: record.by ?? "person",
    decidedAt: record.decidedAt ?? record.requestedAt,
  };
}

/** True when `record` waits and its expiry has come (the decision is then "denied, expired", whoever asks). */
export function expired(record: ApprovalRecord, now: number): boolean {
  return record.status === "awaiting" && record.expiresAt !== undefined && now >= record.expiresAt;
}

/**
 * The decision commit: exactly one decision per call. Refuses (writing nothing) a call that was decided
 * (`AlreadyDecided`, naming the first decision; an expired call counts as denied by its expiry), withdrawn
 * (`ApprovalWithdrawn`), ended or never asked (`NoPendingApproval`), unknown (`NotFound`), or decided for other
 * arguments (`ApprovalMismatch`).
 */
export function decideIn(tx: KernelTx, conversationId: number, callId: string, decision: Decision, taskId?: number): ApprovalRecord {
  const record = readApproval(tx, conversationId, callId);
  if (!record || (taskId !== undefined && record.taskId !== taskId)) {
    const why = `its tool never asked, or the call ended before the conversation's last ${KEPT_DECISIONS} that did (its tool result in the transcript says how it was decided)`;
    if (taskId !== undefined) throw new NoPendingApproval(callId, taskId, `it holds no decision record: ${why}`);
    throw new NotFound(`Conversation ${conversationId} has no decision record for tool call ${JSON.stringify(callId)}: ${why}.`);
  }
  const now = tx.now();
  const decided = record.status === "approved" || record.status === "denied";
  if (decided && decision.decisionId !== undefined && record.decisionId === decision.decisionId) return record;
  if (decided) throw new AlreadyDecided(callId, record.taskId, summary(record));
  if (record.status === "withdrawn") throw new ApprovalWithdrawn(callId, record.taskId);
  if (expired(record, now))
    throw new AlreadyDecided(callId, record.taskId, { approved: false, reason: "expired", by: "expiry", decidedAt: record.expiresAt! });
  if (decision.argumentsHash !== undefined && decision.argumentsHash !== record.argumentsHash)
    throw new ApprovalMismatch(callId, record.taskId, record.argumentsHash, decision.argumentsHash);
  const task = tx.task(record.taskId);
  if (!task) throw new NoPendingApproval(callId, record.taskId, "the call has ended");
  if (task.abortRequested) throw new ApprovalWithdrawn(callId, record.taskId);
  const next: ApprovalRecord = {
    ...record,
    status: decision.approved ? "approved" : "denied",
    ...(decision.reason !== undefined ? { reason: decision.reason } : {}),
    decidedAt: now,
    by: "person",
    ...(decision.decisionId !== undefined ? { decisionId: decision.decisionId } : {}),
  };
  writeApproval(tx, conversationId, next);
  // Asleep at `approval` (the usual case) it wakes now; otherwise its approval phase is under way and reads the
  // record in its own commit.
  wakeSleeper(tx, record.taskId, APPROVAL_PHASE);
  return next;
}

/** Refuses a malformed `decide()` call before anything is read. */
export function checkDecision(call: string | number, decision: Decision): void {
  if (!(typeof call === "string" ? call !== "" : Number.isSafeInteger(call)))
    throw new InvalidSubmission(`decide() takes a tool call id (a string) or its task id (an integer); got ${JSON.stringify(call)}.`);
  if (typeof decision?.approved !== "boolean") throw new InvalidSubmission("A decision is { approved: true | false, reason? }.");
  if (decision.reason !== undefined && typeof decision.reason !== "string") throw new InvalidSubmission("A decision's reason is a string.");
  if (decision.argumentsHash !== undefined && typeof decision.argumentsHash !== "string")
    throw new InvalidSubmission("A decision's argumentsHash is the string pendingApprovals() gives.");
  if (decision.decisionId !== undefined && (typeof decision.decisionId !== "string" || decision.decisionId === ""))
    throw new InvalidSubmission("A decision's decisionId is a non-empty string.");
}

/** The calls of `tasks` that wait for a person, oldest first. */
export function pendingApprovals(
  tasks: Iterable<TaskRecord>,
  documents: DocumentReader,
  now: number,
  conversationId?: number,
): PendingApproval[] {
  const out: PendingApproval[] = [];
  for (const task of tasks) {
    if (task.kind !== "pi.tool" || (conversationId !== undefined && task.conversationId !== conversationId)) continue;
    const pending = pendingOf(task, documents, now);
    if (pending) out.push(pending);
  }
  return out.sort((a, b) => a.requestedAt - b.requestedAt || a.taskId - b.taskId);
}

/** The pending approval of one live `pi.tool` task, or undefined when it does not wait for a person. */
export function pendingOf(task: TaskRecord, documents: DocumentReader, now: number): PendingApproval | undefined {
  const state = task.state;
  if (state.status === "completing" || state.status === "terminal" || state.checkpoint.phase !== APPROVAL_PHASE) return undefined;
  if (task.abortRequested) return undefined;
  const input = task.input as { callId?: string };
  if (typeof input.callId !== "string") return undefined;
  const record = readApproval(documents, task.conversationId, input.callId);
  if (record?.status !== "awaiting" || record.taskId !== task.id || expired(record, now)) return undefined;
  const checkpoint = state.checkpoint as unknown as ApprovalCheckpoint;
  return {
    conversationId: task.conversationId,
    taskId: task.id,
    callId: record.callId,
    toolName: record.toolName,
    arguments: checkpoint.arguments,
    argumentsHash: record.argumentsHash,
    requestedAt: record.requestedAt,
    ...(record.expiresAt !== undefined ? { expiresAt: record.expiresAt } : {}),
    ageMs: Math.max(0, now - record.requestedAt),
  };
}

/**
 * A short, stable hash of JSON arguments (keys in sorted order, so `{a, b}` and `{b, a}` agree): what a
 * decision is bound to. Not a security boundary — it tells a stale card from the call that waits now.
 */
export function argumentsHash(value: Json): string {
  const text = canonical(value);
  // cyrb53: two 32-bit lanes, 53 bits in all.
  let h1 = 0xdeadbeef;
  let h2 = 0x41c6ce57;
  for (let i = 0; i < text.length; i++) {
    const code = text.charCodeAt(i);
    h1 = Math.imul(h1 ^ code, 2654435761);
    h2 = Math.imul(h2 ^ code, 1597334677);
  }
  h1 = Math.imul(h1 ^ (h1 >>> 16), 2246822507) ^ Math.imul(h2 ^ (h2 >>> 13), 3266489909);
  h2 = Math.imul(h2 ^ (h2 >>> 16), 2246822507) ^ Math.imul(h1 ^ (h1 >>> 13), 3266489909);
  return (4294967296 * (2097151 & h2) + (h1 >>> 0)).toString(16).padStart(14, "0");
}

/** JSON with object keys sorted, built without recursion (arguments stay off the call stack however deep). */
function canonical(value: Json): string {
  const out: string[] = [];
  const stack: Array<Json | Token> = [value];
  while (stack.length > 0) {
    const item = stack.pop()!;
    if (item instanceof Token) out.push(item.text);
    else if (Array.isArray(item)) {
      out.push("[");
      stack.push(CLOSE_ARRAY);
      for (let i = item.length - 1; i >= 0; i--) {
        stack.push(item[i]!);
        if (i > 0) stack.push(COMMA);
      }
    } else if (item !== null && typeof item === "object") {
      const keys = Object.keys(item).sort();
      out.push("{");
      stack.push(CLOSE_OBJECT);
      for (let i = keys.length - 1; i >= 0; i--) {
        stack.push(item[keys[i]!]!);
        stack.push(new Token(`${JSON.stringify(keys[i])}:`));
        if (i > 0) stack.push(COMMA);
      }
    } else out.push(JSON.stringify(item));
  }
  return out.join("");
}

class Token {
  constructor(readonly text: string) {}
}
const COMMA = new Token(",");
const CLOSE_ARRAY = new Token("]");
const CLOSE_OBJECT = new Token("}");
