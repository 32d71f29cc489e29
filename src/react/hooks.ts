import { useCallback, useEffect, useMemo, useState, useSyncExternalStore } from "react";
import type { ApprovalRecord, Decision } from "../agent/tasks/approvals.ts";
import type { SubmissionDraft, UserContent } from "../agent/types.ts";
import type { ConversationViewState } from "../agent/view/view.ts";
import type { ConversationView } from "../agent/view/view-store.ts";
import type { Json } from "../base/json.ts";
import type { HarnessStatus } from "../browser/client.ts";
import { NotReady } from "../errors.ts";
import type { Inspection } from "../harness.ts";
import { cancelPending } from "../host/pending-subscription.ts";
import type { Report } from "../reports.ts";
import type { TaskRecord, TaskStatus } from "../storage/records.ts";
import type { ReactHarnessClient, Unsubscribe } from "./client.ts";
import { useHarnessClient } from "./provider.ts";

const STARTING: HarnessStatus = Object.freeze({ kind: "starting" });
const noSubscription = () => () => {};

export interface HarnessStatusResult {
  /** starting, waiting-for-lock, opening, recovering, ready, reconnecting (a Durable Object by URL), failed or closed (src/host/protocol.ts). */
  status: HarnessStatus;
  /** Asks the tab that owns the database to close it, so this one opens it (for `waiting-for-lock`). */
  requestTakeover: () => Promise<void>;
}

/** The harness's status, re-rendered on every change, and the takeover request. */
export function useHarnessStatus(): HarnessStatusResult {
  const client = useHarnessClient<ReactHarnessClient>();
  const status = useSyncExternalStore(client ? (onChange) => client.onStatus(onChange) : noSubscription, () => client?.status ?? STARTING);
  const requestTakeover = useCallback(() => (client ? client.requestTakeover() : Promise.resolve()), [client]);
  return { status, requestTakeover };
}

/**
 * A subscription the host answers asynchronously: subscribed in an effect, ended on unmount (also when the
 * unmount comes before the host resolved the subscription).
 */
function useRemoteSubscription<T>(
  subscribe: ((listener: (value: T) => void, lost: (error: Error) => void) => Promise<Unsubscribe>) | undefined,
  onValue: (value: T) => void,
): void {
  const [lost, setLost] = useState<{ subscribe: unknown; error: Error }>();
  useEffect(() => {
    if (!subscribe) return;
    let ended = false;
    let unsubscribe: Unsubscribe | undefined;
    subscribe(
      (value) => {
        if (!ended) onValue(value);
      },
      // Refused when the transport asked it again (decision 0114): thrown into the nearest error boundary.
      (error) => !ended && setLost({ subscribe, error }),
    ).then(
      (stop) => (ended ? stop() : (unsubscribe = stop)),
      () => {},
    );
    return () => {
      ended = true;
      unsubscribe?.();
    };
  }, [subscribe, onValue]);
  if (lost && lost.subscribe === subscribe) throw lost.error;
}

/**
 * The page's view of one conversation, kept current by deltas (older pages with `view.loadOlder()`);
 * undefined until its snapshot arrived. Closed on unmount or when `conversationId` changes. A failed open, and a
 * view lost later (the host refused it when a reconnect asked it again, decision 0114), throw the host's error into
 * the nearest error boundary.
 */
export function useConversationView(conversationId: number | undefined): ConversationView | undefined {
  const client = useHarnessClient<ReactHarnessClient>();
  const [opened, setOpened] = useState<{ id: number; view: ConversationView } | { id: number; error: unknown }>();
  useEffect(() => {
    if (!client || conversationId === undefined) return;
    let ended = false;
    let view: ConversationView | undefined;
    const opening = client.openConversation(conversationId);
    opening.then(
      (opened) => {
        if (ended) return opened.close();
        view = opened;
        setOpened({ id: conversationId, view: opened });
        // Lost (the host refused it when the transport asked it again, decision 0114): thrown as a failed open is.
        opened.onLost((error) => !ended && setOpened({ id: conversationId, error }));
      },
      (error: unknown) => !ended && setOpened({ id: conversationId, error }),
    );
    return () => {
      ended = true;
      // Open: closed. Unmounted while a following copy waits for the conversation: the wait ends too (decision 0111);
      // only then, since a client's cancel after the open may unsubscribe a second time.
      if (view) view.close();
      else cancelPending(opening);
    };
  }, [client, conversationId]);
  if (!opened || opened.id !== conversationId) return undefined;
  if ("error" in opened) throw opened.error;
  return opened.view;
}

/**
 * One conversation as React state: the committed view plus its live part (`state.streaming`, not durable
 * yet). The same object until the next update arrives, so it works as a dependency and with `memo`.
 * Undefined until the view's snapshot arrived; a failed open throws into the nearest error boundary.
 */
export function useConversation(conversationId: number | undefined): ConversationViewState | undefined {
  const view = useConversationView(conversationId);
  return useSyncExternalStore(view ? (onChange) => view.subscribe(onChange) : noSubscription, () => view?.state);
}

export interface SubmitOptions {
  /**
   * Idempotence key: a submission with a key the conversation already has is that submission, not a second
   * input (so a retried send after a reload is harmless). Default: a fresh key per call.
   */
  requestId?: string;
  /** What to do while the conversation answers: `followUp` (default), `steer`, or `reject` (ConversationBusy). */
  whenBusy?: "followUp" | "steer" | "reject";
}

/** A function that submits an input to the conversation; it resolves with the submission id once durable. */
export function useSubmit(conversationId: number | undefined): (content: UserContent, options?: SubmitOptions) => Promise<number> {
  const client = useHarnessClient<ReactHarnessClient>();
  return useCallback(
    async (content, options = {}) => {
      if (!client) throw new NotReady("The harness client is not there yet: submit after useHarnessStatus() says ready.");
      if (conversationId === undefined) throw new NotReady("useSubmit was given no conversation id yet: wait for it before submitting.");
      const draft: SubmissionDraft = {
        type: "input",
        content,
        requestId: options.requestId ?? crypto.randomUUID(),
        ...(options.whenBusy ? { whenBusy: options.whenBusy } : {}),
      };
      return client.submit(conversationId, draft);
    },
    [client, conversationId],
  );
}

/** A tool call that waits for a person, as a card shows it (from the conversation's view: every tab sees it). */
export interface ApprovalCard {
  taskId: number;
  callId: string;
  toolName: string;
  arguments: { [key: string]: Json };
  /** Pass it with the decision: a card shown for other arguments is then refused (`ApprovalMismatch`). */
  argumentsHash: string;
  /** Harness clock, ms. */
  requestedAt: number;
  expiresAt?: number;
}

/**
 * The conversation's tool calls that wait for a person's decision, in call order; after a reload they are back,
 * and once one is decided (in any tab) it leaves the list. The same array until the view changes.
 */
export function usePendingApprovals(conversationId: number | undefined): ApprovalCard[] {
  const state = useConversation(conversationId);
  return useMemo(() => {
    const cards: ApprovalCard[] = [];
    for (const slot of state?.live.tools ?? []) {
      const approval = slot.approval;
      if (slot.status !== "awaiting-approval" || slot.taskId === undefined || !approval?.arguments) continue;
      cards.push({
        taskId: slot.taskId,
        callId: slot.callId,
        toolName: slot.name,
        arguments: approval.arguments,
        argumentsHash: approval.argumentsHash,
        requestedAt: approval.requestedAt,
        ...(approval.expiresAt !== undefined ? { expiresAt: approval.expiresAt } : {}),
      });
    }
    return cards;
  }, [state?.live.tools]);
}

/**
 * A function that decides a waiting tool call (a card's `callId` or `taskId`), once: it resolves with the
 * approval record, or rejects with `AlreadyDecided` (naming the first decision) when another tab was first.
 */
export function useDecide(conversationId: number | undefined): (call: string | number, decision: Decision) => Promise<ApprovalRecord> {
  const client = useHarnessClient<ReactHarnessClient>();
  return useCallback(
    async (call, decision) => {
      if (!client) throw new NotReady("The harness client is not there yet: decide after useHarnessStatus() says ready.");
      if (conversationId === undefined) throw new NotReady("useDecide was given no conversation id yet: wait for it before deciding.");
      return client.decide(conversationId, call, decision);
    },
    [client, conversationId],
  );
}

/** Which tasks `useTasks` returns; every field given must match. */
export interface TaskFilter {
  kind?: string;
  status?: TaskStatus;
  conversationId?: number;
}

/**
 * The live tasks (the host's task graph, pushed after commits), filtered. The array is the same object
 * until the tasks change; a function filter should be stable (declared outside the component or memoized).
 */
export function useTasks(filter?: TaskFilter | ((task: TaskRecord) => boolean)): TaskRecord[] {
  const inspection = useInspection();
  const key = typeof filter === "function" ? filter : JSON.stringify(filter ?? {});
  // biome-ignore lint/correctness/useExhaustiveDependencies: `key` stands for `filter` (an object filter is compared by its JSON, so a new literal each render does not recompute)
  return useMemo(() => (inspection ? inspection.tasks.map((task) => task.record).filter(matcher(filter)) : EMPTY), [inspection, key]);
}

const EMPTY: TaskRecord[] = [];

function matcher(filter: TaskFilter | ((task: TaskRecord) => boolean) | undefined): (task: TaskRecord) => boolean {
  if (typeof filter === "function") return filter;
  if (!filter) return () => true;
  return (task) =>
    (filter.kind === undefined || task.kind === filter.kind) &&
    (filter.status === undefined || task.state.status === filter.status) &&
    (filter.conversationId === undefined || task.conversationId === filter.conversationId);
}

/** The host's task graph (undefined until the first push); a subscription the host refused again throws (decision 0114). */
export function useInspection(): Inspection | undefined {
  const client = useHarnessClient<ReactHarnessClient>();
  const [inspection, setInspection] = useState<Inspection>();
  const subscribe = useMemo(
    () => client && ((listener: (next: Inspection) => void, lost: (error: Error) => void) => client.watchTasks(listener, lost)),
    [client],
  );
  useRemoteSubscription(subscribe ?? undefined, setInspection);
  return client ? inspection : undefined;
}

/** How many reports `useReports` keeps (the host replays its last 200 to a new subscriber). */
const REPORTS_KEPT = 200;

/** The harness's reports (S7): the last 200 the host kept, then every new one, oldest first. */
export function useReports(): readonly Report[] {
  const client = useHarnessClient<ReactHarnessClient>();
  const [reports, setReports] = useState<readonly Report[]>(EMPTY_REPORTS);
  const subscribe = useMemo(
    () => client && ((listener: (report: Report) => void, lost: (error: Error) => void) => client.onReport(listener, lost)),
    [client],
  );
  const onReport = useCallback((report: Report) => setReports((previous) => [...previous, report].slice(-REPORTS_KEPT)), []);
  useRemoteSubscription(subscribe ?? undefined, onReport);
  return reports;
}

const EMPTY_REPORTS: readonly Report[] = [];
