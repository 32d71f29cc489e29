import { type Context, throwIfCancelled, waitFor } from "../../base/context.ts";
import { cloneJson } from "../../base/json.ts";
import { HarnessClosed, InvalidSetting, InvalidSubmission, NotFound, ReadOnlySession } from "../../errors.ts";
import type { DocumentReader } from "../../session/documents.ts";
import { documentKey } from "../../session/keys.ts";
import type { Tx } from "../../session/tx.ts";
import type { ConversationRecord, EntryRecord, SubmissionRecord } from "../../storage/records.ts";
import { type ApprovalRecord, checkDecision, type Decision, decideIn, type PendingApproval, pendingApprovals } from "../tasks/approvals.ts";
import { addCompactionStatus, CompactionTask } from "../tasks/compaction.ts";
import {
  answerIn,
  claimIn,
  type PageCallClaimed,
  type PageCallRecord,
  type PageCheckpoint,
  type PageToolResult,
  type PendingPageCall,
  pendingPageCalls,
  readPageCall,
} from "../tasks/page-calls.ts";
import type { AgentChange, AgentConfig, ModelRef, SubmissionDraft } from "../types.ts";
import {
  type ConversationViewState,
  DEFAULT_VIEW_PAGE,
  type EntryPage,
  indexToolResults,
  type ViewListener,
  type ViewUpdateListener,
  viewDocuments,
} from "../view/view.ts";
import { ConversationViewStore } from "../view/view-store.ts";
import { AgentDocument, readAgentConfig, readLive, scopeOf } from "./documents.ts";
import { agentChange, draftProblem } from "./drafts.ts";
import type { ConversationPort } from "./port.ts";
import { admit, createConversationTask, withdrawInputs } from "./runs.ts";
import { Submission } from "./submission.ts";

/**
 * A conversation: its entries, its documents (`pi.agent`, `pi.live`, `pi.inbox`, `pi.usage`) and the runs that
 * answer its inputs. Every method that writes does so in one atomic commit.
 */
export class Conversation {
  readonly id: number;
  readonly #host: ConversationPort;
  /** Reads the committed documents (the session's mirror). */
  readonly #committed: DocumentReader = {
    document: (scope, key) => this.#host.kernel.session.documents.get(documentKey(scope, key))?.value,
  };

  /** @internal Conversations come from the harness (`root`, `createConversation`, `conversation`). */
  constructor(host: ConversationPort, id: number) {
    this.#host = host;
    this.id = id;
  }

  /**
   * Commits `body(tx)` atomically in this conversation and returns what it returns, once durable.
   * `tx.createTask(Definition, input)` creates a task here and returns its id.
   */
  commit<T>(body: (tx: Tx) => T, context: Context): Promise<T> {
    return this.#host.commitIn(this.id, body, context);
  }

  /** The stored record of this conversation. */
  record(): ConversationRecord | undefined {
    return this.#host.kernel.session.conversations.get(this.id);
  }

  /** The committed `pi.agent` configuration. */
  agent(): AgentConfig {
    return cloneJson(readAgentConfig(this.#committed, this.id));
  }

  /** True while a run answers an input (`pi.live.run` is set). */
  get busy(): boolean {
    return readLive(this.#committed, this.id).run !== undefined;
  }

  /**
   * Changes the model, instructions or offered tools; `null` clears a field, `undefined` keeps it. Applies
   * from the next model request on (a request in flight keeps what it was prepared with).
   */
  async configure(change: AgentChange, context: Context): Promise<AgentConfig> {
    const next = (tx: Tx) => applyChange(readAgentConfig(tx, this.id), change);
    return this.commit((tx) => {
      const config = next(tx);
      AgentDocument.write(tx, scopeOf(this.id), config);
      return config;
    }, context);
  }

  /**
   * Submits an input (answered by a run) or a write (an entry appended at the next boundary). A `requestId`
   * already used in this conversation returns the existing submission, also after a reopen. While busy, an
   * input is a follow-up (answered after the current run), a steer (joins the current run after its tool
   * round) or rejected with `ConversationBusy`. Starts scheduling.
   */
  async submit(draft: SubmissionDraft, context: Context): Promise<Submission> {
    throwIfCancelled(context);
    checkDraft(draft);
    const kernel = this.#host.kernel;
    if (kernel.closed) throw new HarnessClosed();
    if (kernel.readOnly) throw new ReadOnlySession("submit()");
    const session = kernel.session;
    const admitted = this.#host.exclusive(async (): Promise<SubmissionRecord> => {
      if (draft.requestId !== undefined) {
        const existing = await session.storage.findSubmission(this.id, draft.requestId);
        if (existing) {
          if (existing.type !== draft.type) {
            throw new InvalidSubmission(
              `requestId ${JSON.stringify(draft.requestId)} was already used for a ${existing.type} submission (${existing.id}) in conversation ${this.id}.`,
            );
          }
          return existing;
        }
      }
      return session.commit((tx) => admit(tx, this.id, draft), { conversationId: this.id });
    });
    const record = await waitFor(admitted, context);
    kernel.resume();
    return new Submission(this.#host, record.id, this.id);
  }

  /**
   * Aborts the current run (its tool calls end `aborted`, its inputs `unanswered` with reason `aborted`),
   * withdraws queued inputs, cancels manual compactions, and resolves once they have ended.
   */
  async abort(context: Context): Promise<void> {
    throwIfCancelled(context);
    // The agent's own commits get the kernel's transaction (withdrawing settles submissions).
    const tasks = await this.#host.commitIn(
      this.id,
      (tx) => {
        withdrawInputs(tx, this.id);
        const live = readLive(tx, this.id);
        return [...(live.run ? [live.run.taskId] : []), ...(live.compactions ?? []).map((status) => status.taskId)];
      },
      context,
    );
    for (const taskId of tasks) await this.#host.kernel.abortTask(taskId, context);
    for (const taskId of tasks) await this.#host.kernel.waitForTask(taskId, context);
  }

  /**
   * Starts a manual compaction (S10): older entries are summarized through the model into a `pi.compaction`
   * entry. Returns the compaction task's id; it does not make the conversation busy. Starts scheduling.
   */
  async compact(options: { instructions?: string }, context: Context): Promise<number> {
    const instructions = options?.instructions;
    const taskId = await this.#host.commitIn(
      this.id,
      (tx) => {
        const id = createConversationTask(tx, CompactionTask, { reason: "manual", ...(instructions ? { instructions } : {}) }, this.id);
        addCompactionStatus(tx, this.id, id);
        return id;
      },
      context,
    );
    this.#host.kernel.resume();
    return taskId;
  }

  /**
   * Decides a tool call that waits for a person (by its call id, or its tool task's id), in one commit: approved
   * (the tool then runs once) or denied (the model gets a result that says so, with `reason`). Exactly once: a
   * second decision rejects with `AlreadyDecided` naming the first; a withdrawn call with `ApprovalWithdrawn`, a
   * call that does not wait with `NoPendingApproval`, an unknown one with `NotFound`, and a decision given for
   * other arguments (`argumentsHash` of `pendingApprovals()`) with `ApprovalMismatch`. Starts scheduling.
   */
  async decide(call: string | number, decision: Decision, context: Context): Promise<ApprovalRecord> {
    checkDecision(call, decision);
    this.#writable("decide()", context);
    const kernel = this.#host.kernel;
    const callId = typeof call === "string" ? call : await waitFor(this.#callIdOf(call), context);
    const { approved, reason, argumentsHash, decisionId } = decision;
    const clean: Decision = {
      approved,
      ...(reason !== undefined ? { reason } : {}),
      ...(argumentsHash !== undefined ? { argumentsHash } : {}),
      ...(decisionId !== undefined ? { decisionId } : {}),
    };
    const decided = await this.#host.commitIn(
      this.id,
      (tx) => decideIn(tx, this.id, callId, clean, typeof call === "number" ? call : undefined),
      context,
    );
    kernel.resume();
    return cloneJson(decided);
  }

  /** The tool calls of this conversation that wait for a person, oldest first, with their arguments and age. */
  pendingApprovals(): PendingApproval[] {
    const session = this.#host.kernel.session;
    return cloneJson(pendingApprovals(session.live.values(), this.#committed, this.#host.kernel.session.clock.now(), this.id));
  }

  /**
   * Claims a page tool call for the page that will run it, in one commit (decision 0028): the first claim
   * wins, another page's is `PageCallTaken`, the same `claimId` again gets the claim back. Run the tool only
   * with a claim; send its result with `answerPageCall` under the same `claimId`.
   */
  async claimPageCall(callId: string, claim: { claimId: string; pageId?: string }, context: Context): Promise<PageCallClaimed> {
    this.#writable("claimPageCall()", context);
    let unsafe = true;
    const claimed = await this.#host.commitIn(
      this.id,
      (tx) => {
        const won = claimIn(tx, this.id, callId, claim);
        const state = tx.task(won.taskId)?.state as { checkpoint?: PageCheckpoint } | undefined;
        unsafe = state?.checkpoint?.replay !== "safe";
        return won;
      },
      context,
    );
    // Decision 0032: the page runs an unsafe tool only once its claim is held where a takeover would recover from.
    const fence = this.#host.kernel.session.fence;
    if (unsafe && fence) await fence.confirmed(context);
    return cloneJson(claimed);
  }

  /**
   * Commits a claimed page tool call's result (once: a second one is `PageCallEnded`; under a released claim
   * `PageClaimLost`; malformed `InvalidArguments`, past `settings.limits` `InvalidInput`), and the turn goes on.
   */
  async answerPageCall(callId: string, claimId: string, result: PageToolResult, context: Context): Promise<PageCallRecord> {
    this.#writable("answerPageCall()", context);
    const answered = await this.#host.commitIn(this.id, (tx) => answerIn(tx, this.id, callId, claimId, result), context);
    this.#host.kernel.resume();
    return cloneJson(answered);
  }

  /**
   * Whether this conversation has the page tool call `callId` (waiting, claimed, or among its last ended ones), as
   * committed: the follow link's door reads a page call's conversation here rather than take a caller's word for it.
   */
  hasPageCall(callId: string): boolean {
    return readPageCall(this.#committed, this.id, callId) !== undefined;
  }

  /** The page tool calls of this conversation that wait for a page or that a page runs, oldest first. */
  pendingPageCalls(): PendingPageCall[] {
    return cloneJson(pendingPageCalls(this.#host.kernel.session.live.values(), this.#committed, this.id));
  }

  #writable(what: string, context: Context): void {
    throwIfCancelled(context);
    if (this.#host.kernel.closed) throw new HarnessClosed();
    if (this.#host.kernel.readOnly) throw new ReadOnlySession(what);
  }

  /** The call id of tool task `taskId` of this conversation. */
  async #callIdOf(taskId: number): Promise<string> {
    const session = this.#host.kernel.session;
    const task = session.live.get(taskId) ?? (await session.storage.getTask(taskId));
    if (task?.kind !== "pi.tool" || task.conversationId !== this.id)
      throw new NotFound(`Conversation ${this.id} has no tool call whose task is ${taskId}.`);
    return (task.input as { callId: string }).callId;
  }

  /** Every committed entry of this conversation, in id order. */
  async entries(context: Context): Promise<EntryRecord[]> {
    throwIfCancelled(context);
    return waitFor(this.#host.kernel.session.storage.listEntries(this.id), context);
  }

  /** A consistent snapshot of the view (entries plus documents), as committed. */
  async view(context: Context): Promise<ConversationViewState> {
    throwIfCancelled(context);
    const session = this.#host.kernel.session;
    return waitFor(
      session.read(async () => {
        const entries = await session.storage.listEntries(this.id);
        const results = indexToolResults(entries);
        return { conversationId: this.id, entries, ...viewDocuments(session, this.id, (taskId) => results.get(taskId)) };
      }),
      context,
    );
  }

  /**
   * Calls `listener` with the view now (once loaded) and after every commit that touches this conversation.
   * It never sees anything uncommitted. Returns the unsubscribe function.
   */
  subscribe(listener: ViewListener): () => void {
    const store = new ConversationViewStore();
    return this.watch(
      (update) => {
        if (update.type !== "live") listener(store.apply(update));
      },
      { page: Infinity },
    );
  }

  /**
   * The view as updates, for a page or any other far side: a snapshot of the last `page` entries (default
   * 200) and the documents, then per commit only what changed, and `live` frames of the partial answer and
   * tool output between commits (not durable). Apply them with a `ConversationViewStore`. Returns the
   * unsubscribe function.
   */
  watch(listener: ViewUpdateListener, options: { page?: number } = {}): () => void {
    const page = options.page ?? DEFAULT_VIEW_PAGE;
    if (!(page === Infinity || (Number.isInteger(page) && page > 0)))
      throw new InvalidSetting(`A view's page is a positive whole number of entries (or Infinity); got ${String(page)}.`);
    const host = this.#host;
    const feed = host.feed(this.id, page);
    const unsubscribe = feed.subscribe(listener);
    return () => {
      unsubscribe();
      host.release(feed);
    };
  }

  /** The `limit` committed entries before entry `beforeId` (older pages of a view, loaded on demand). */
  async entriesBefore(beforeId: number, limit: number, context: Context): Promise<EntryPage> {
    throwIfCancelled(context);
    if (!Number.isInteger(limit) || limit <= 0)
      throw new InvalidSetting(`limit is a positive whole number of entries; got ${String(limit)}.`);
    const loaded = await waitFor(this.#host.kernel.session.storage.listEntries(this.id, { beforeId, last: limit + 1 }), context);
    const hasOlder = loaded.length > limit;
    return { entries: hasOlder ? loaded.slice(1) : loaded, hasOlder };
  }
}

/** `"provider/id"` or anything with `provider` and `id` (a pi-ai `Model`). */
export function modelRef(model: ModelRef | string): ModelRef {
  if (typeof model === "string") {
    const slash = model.indexOf("/");
    if (slash <= 0 || slash === model.length - 1)
      throw new InvalidSetting(`A model is "provider/id" or a pi-ai Model; got ${JSON.stringify(model)}.`);
    return { provider: model.slice(0, slash), id: model.slice(slash + 1) };
  }
  if (typeof model?.provider !== "string" || typeof model.id !== "string")
    throw new InvalidSetting('A model needs a provider and an id (pass a pi-ai Model or "provider/id").');
  return { provider: model.provider, id: model.id };
}

export function applyChange(current: AgentConfig, change: AgentChange): AgentConfig {
  const problem = agentChange(change, "the agent change");
  if (problem) throw new InvalidSetting(`${problem}.`);
  const next: AgentConfig = { ...current };
  if (change.model === null) delete next.model;
  else if (change.model !== undefined) next.model = modelRef(change.model);
  if (change.instructions === null) delete next.instructions;
  else if (change.instructions !== undefined) {
    if (typeof change.instructions !== "string") throw new InvalidSetting("instructions must be a string.");
    next.instructions = change.instructions;
  }
  if (change.tools === null) delete next.tools;
  else if (change.tools !== undefined) {
    if (!Array.isArray(change.tools) || change.tools.some((name) => typeof name !== "string"))
      throw new InvalidSetting("tools must be an array of tool names.");
    next.tools = [...change.tools];
  }
  return next;
}

function checkDraft(draft: SubmissionDraft): void {
  const problem = draftProblem(draft);
  if (problem)
    throw new InvalidSubmission(
      `${problem}. A submission is { type: "input", content } (a non-empty string or text/image items) or { type: "write", entry }.`,
    );
}
