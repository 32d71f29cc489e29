import { cloneJson, type Json } from "../../base/json.ts";
import { type DocumentReader, defineDocument } from "../../session/documents.ts";
import type { Tx } from "../../session/tx.ts";
import type { AssistantMessage, Model, Usage } from "../model-types.ts";
import type { AgentConfig, BuiltinEntryKind, InboxState, LiveState, ToolProgress, UsageState } from "../types.ts";

/**
 * Where the agent keeps its documents: one scope per conversation. `pi.live` holds the run; each tool call's
 * progress is a document of its own (`pi.live.tool:<taskId>`) so that a progress or result commit writes one
 * small row instead of the whole round (a round can have hundreds of calls).
 */
export const scopeOf = (conversationId: number): string => `conversation:${conversationId}`;
export const LIVE = "pi.live";
export const INBOX = "pi.inbox";
export const USAGE = "pi.usage";
export const AGENT = "pi.agent";
export const TOOL_PREFIX = "pi.live.tool:";
export const toolKey = (taskId: number): string => `${TOOL_PREFIX}${taskId}`;
/** A tool call that asks a person: its record's key, and the phase its task sleeps at until the decision. */
export const APPROVAL_PREFIX = "pi.approval:";
export const APPROVAL_PHASE = "approval";
export const approvalKey = (callId: string): string => `${APPROVAL_PREFIX}${callId}`;
/** A page tool's call: its record's key, and the phase its task sleeps at until a page answers. */
export const PAGE_CALL_PREFIX = "pi.page-call:";
export const PAGE_PHASE = "page";
export const pageCallKey = (callId: string): string => `${PAGE_CALL_PREFIX}${callId}`;
/** A server tool's call sent to the server (decision 0036): the phase its task runs at while it waits for the answer. */
export const SERVER_PHASE = "server";

/** Anything stored is JSON; these typed documents are, by construction. */
export function asJson<T>(value: T): Json {
  return value as unknown as Json;
}

/** The agent's documents of a conversation (in its scope, `scopeOf(conversationId)`). */
export const LiveDocument = defineDocument<LiveState>(LIVE, () => ({}));
export const InboxDocument = defineDocument<InboxState>(INBOX, () => ({ items: [] }));
export const UsageDocument = defineDocument<UsageState>(USAGE, () => ({ models: {} }));
export const AgentDocument = defineDocument<AgentConfig>(AGENT, () => ({}));

export function readLive(tx: DocumentReader, conversationId: number): LiveState {
  return LiveDocument.read(tx, scopeOf(conversationId));
}

export function writeLive(tx: Tx, conversationId: number, live: LiveState): void {
  LiveDocument.write(tx, scopeOf(conversationId), dropUndefined(live));
}

export function readInbox(tx: Tx, conversationId: number): InboxState {
  return InboxDocument.read(tx, scopeOf(conversationId));
}

export function writeInbox(tx: Tx, conversationId: number, inbox: InboxState): void {
  InboxDocument.write(tx, scopeOf(conversationId), inbox);
}

export function readAgentConfig(from: DocumentReader, conversationId: number): AgentConfig {
  return AgentDocument.read(from, scopeOf(conversationId));
}

export function readToolProgress(tx: Tx, conversationId: number, taskId: number): ToolProgress | undefined {
  return tx.document(scopeOf(conversationId), toolKey(taskId)) as ToolProgress | undefined;
}

export function writeToolProgress(tx: Tx, conversationId: number, taskId: number, progress: ToolProgress): void {
  tx.setDocument(scopeOf(conversationId), toolKey(taskId), asJson(dropUndefined(progress)));
}

/** Removes a call's progress document, if it has one (most calls never write output). */
export function clearToolProgress(tx: Tx, conversationId: number, taskId: number): void {
  if (readToolProgress(tx, conversationId, taskId) !== undefined) tx.deleteDocument(scopeOf(conversationId), toolKey(taskId));
}

/**
 * Appends a built-in entry; the committing task (if any) is recorded as its author. The payload must not be
 * changed afterwards (it is stored as is; storage rejects the whole commit if it is not JSON).
 */
export function appendEntry(tx: Tx, conversationId: number, kind: BuiltinEntryKind | string, payload: object): number {
  return tx.appendEntry({ kind, payload: asJson(payload), conversationId });
}

/** Appends an assistant message and adds its usage to `pi.usage`, in the same commit. */
export function appendAssistant(tx: Tx, conversationId: number, message: AssistantMessage): number {
  const entryId = appendEntry(tx, conversationId, "pi.assistant", { message });
  addUsage(tx, conversationId, `${message.provider}/${message.model}`, message.usage);
  return entryId;
}

/** The usage of a message no model produced (a summary's or a failure's placeholder): every count zero. */
export function zeroUsage(): Usage {
  return {
    input: 0,
    output: 0,
    cacheRead: 0,
    cacheWrite: 0,
    totalTokens: 0,
    cost: { input: 0, output: 0, cacheRead: 0, cacheWrite: 0, total: 0 },
  };
}

/** The answer stored for a model request that failed (`text` says why): no content, no usage, `stopReason` error. */
export function failedAnswer(model: Model, text: string, now: number): AssistantMessage {
  return {
    role: "assistant",
    content: [],
    api: model.api,
    provider: model.provider,
    model: model.id,
    usage: zeroUsage(),
    stopReason: "error",
    errorMessage: text,
    timestamp: now,
  };
}

export function addUsage(tx: Tx, conversationId: number, key: string, usage: Usage | undefined): void {
  if (!usage) return;
  const current = UsageDocument.read(tx, scopeOf(conversationId));
  const previous = current.models[key];
  const sum = (a: number | undefined, b: number | undefined) => (a ?? 0) + (b ?? 0);
  const next: Usage = {
    input: sum(previous?.input, usage.input),
    output: sum(previous?.output, usage.output),
    cacheRead: sum(previous?.cacheRead, usage.cacheRead),
    cacheWrite: sum(previous?.cacheWrite, usage.cacheWrite),
    totalTokens: sum(previous?.totalTokens, usage.totalTokens),
    cost: {
      input: sum(previous?.cost.input, usage.cost?.input),
      output: sum(previous?.cost.output, usage.cost?.output),
      cacheRead: sum(previous?.cost.cacheRead, usage.cost?.cacheRead),
      cacheWrite: sum(previous?.cost.cacheWrite, usage.cost?.cacheWrite),
      total: sum(previous?.cost.total, usage.cost?.total),
    },
  };
  UsageDocument.write(tx, scopeOf(conversationId), { models: { ...current.models, [key]: next } });
}

/** A JSON copy without `undefined` members (JSON would drop them anyway; this keeps records tidy in memory). */
export function dropUndefined<T>(value: T): T {
  return cloneJson(value);
}
