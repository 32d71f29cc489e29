import { type Context, throwIfCancelled, waitFor } from "../../base/context.ts";
import { cloneJson } from "../../base/json.ts";
import { SerialQueue } from "../../base/serial.ts";
import { KeyedWaiters } from "../../base/waiters.ts";
import { HarnessClosed, ReadOnlySession } from "../../errors.ts";
import { mirroredKind, notFound, storedKind } from "../../session/ids.ts";
import { documentKey } from "../../session/keys.ts";
import type { Published } from "../../session/session.ts";
import type { KernelTx } from "../../session/tx.ts";
import type { SubmissionRecord, TaskRecord } from "../../storage/records.ts";
import type { AgentKernel } from "../kernel.ts";
import { type PendingApproval, pendingApprovals } from "../tasks/approvals.ts";
import { convertPartial } from "../tasks/generation.ts";
import { type PendingPageCall, pendingPageCalls, releaseIn } from "../tasks/page-calls.ts";
import type { AgentChange } from "../types.ts";
import { ConversationFeed, type LiveEvent } from "../view/view.ts";
import { applyChange, Conversation } from "./conversation.ts";
import { AgentDocument, readLive, scopeOf, writeLive } from "./documents.ts";
import type { ConversationPort } from "./port.ts";
import { endRun } from "./runs.ts";
import { Submission } from "./submission.ts";

/**
 * The agent's per-harness state, built by `Harness.open` over the kernel it is given (`AgentKernel`): the
 * conversations and submissions, settled-submission waiters, live views, the admission lock (so a repeated
 * requestId is looked up and admitted without another admission in between), and the cleanup that keeps
 * `pi.live` honest when the scheduler ends a built-in task itself (a fault or an orphan writes no visible
 * result of its own).
 */
export class Conversations implements ConversationPort {
  readonly kernel: AgentKernel;
  readonly #waiters = new KeyedWaiters<number, SubmissionRecord>();
  /** Views by conversation and page size (`${conversationId}/${page}`). */
  readonly #feeds = new Map<string, ConversationFeed>();
  readonly #admission = new SerialQueue();
  #closed = false;

  constructor(kernel: AgentKernel) {
    this.kernel = kernel;
    kernel.session.subscribe((published) => this.#observe(published));
  }

  /**
   * The root conversation, created on first use. `agent` (model, instructions, tools) is applied when it
   * changes the stored configuration, so passing the same options at every start writes nothing.
   */
  async root(context: Context, options: { agent?: AgentChange } = {}): Promise<Conversation> {
    const session = this.kernel.session;
    const existing = session.rootConversationId;
    if (existing !== undefined) {
      const root = this.conversation(existing);
      if (
        options.agent &&
        !this.kernel.readOnly &&
        JSON.stringify(applyChange(root.agent(), options.agent)) !== JSON.stringify(root.agent())
      ) {
        await root.configure(options.agent, context);
      }
      return root;
    }
    if (this.kernel.readOnly) throw new ReadOnlySession("Creating the root conversation");
    const agent = options.agent ? applyChange({}, options.agent) : undefined;
    const id = await waitFor(
      session.commit((tx) => {
        if (session.rootConversationId !== undefined) return session.rootConversationId;
        const created = tx.createConversation();
        tx.setRootConversation(created);
        if (agent) AgentDocument.write(tx, scopeOf(created), agent);
        return created;
      }),
      context,
    );
    return this.conversation(id);
  }

  /** Creates a conversation of its own (not the root), configured with `agent`. */
  async createConversation(options: { agent?: AgentChange }, context: Context): Promise<Conversation> {
    if (this.kernel.readOnly) throw new ReadOnlySession("Creating a conversation");
    const agent = options?.agent ? applyChange({}, options.agent) : undefined;
    const id = await waitFor(
      this.kernel.session.commit((tx) => {
        const created = tx.createConversation();
        if (agent) AgentDocument.write(tx, scopeOf(created), agent);
        return created;
      }),
      context,
    );
    return this.conversation(id);
  }

  /** The harness clock. */
  now(): number {
    return this.kernel.session.clock.now();
  }

  /** Every tool call that waits for a person, in every conversation, oldest first (for `inspect()`). */
  pendingApprovals(): PendingApproval[] {
    const session = this.kernel.session;
    const documents = { document: (scope: string, key: string) => session.documents.get(documentKey(scope, key))?.value };
    return cloneJson(pendingApprovals(session.live.values(), documents, this.now()));
  }

  /**
   * Releases the page tool calls page `pageId` claimed (the host saw it go: a closed tab, a dropped socket);
   * their tasks follow their replay policy. Resolves with how many it released.
   */
  async releasePage(pageId: string, context: Context): Promise<number> {
    const session = this.kernel.session;
    if (this.kernel.readOnly || this.kernel.closed) return 0;
    const released = await waitFor(
      session.commit((tx) => releaseIn(tx, session.live.values(), pageId)),
      context,
    );
    if (released > 0) this.kernel.resume();
    return released;
  }

  /** Every page tool call that waits for a page or that a page runs, in every conversation (for `inspect()`). */
  pendingPageCalls(): PendingPageCall[] {
    const session = this.kernel.session;
    const documents = { document: (scope: string, key: string) => session.documents.get(documentKey(scope, key))?.value };
    return cloneJson(pendingPageCalls(session.live.values(), documents));
  }

  /** A handle on an existing conversation. */
  conversation(id: number): Conversation {
    if (!this.kernel.session.conversations.has(id)) throw notFound("conversation", id, mirroredKind(this.kernel.session, id));
    return new Conversation(this, id);
  }

  /** Reacquires a submission by id (for example after a reopen); `NotFound` when there is none. */
  async submission(id: number, context: Context): Promise<Submission> {
    const session = this.kernel.session;
    const record = session.openSubmissions.get(id) ?? (await waitFor(session.storage.getSubmission(id), context));
    if (!record) throw notFound("submission", id, await waitFor(storedKind(session, id), context));
    return new Submission(this, record.id, record.conversationId);
  }

  /** Commits `body` in conversation `conversationId` (its new tasks and entries belong there). */
  commitIn<T>(conversationId: number, body: (tx: KernelTx) => T, context: Context): Promise<T> {
    throwIfCancelled(context);
    if (this.kernel.closed) throw new HarnessClosed();
    return waitFor(this.kernel.session.commit(body, { conversationId }), context);
  }

  /** Runs `work` after every earlier admission has been stored. */
  exclusive<T>(work: () => Promise<T>): Promise<T> {
    return this.#admission.run(work);
  }

  /** Resolves once submission `id` is settled (`done` or `unanswered`). */
  settled(id: number, check: () => Promise<SubmissionRecord | undefined>): Promise<SubmissionRecord | undefined> {
    if (this.#closed) return Promise.reject(new HarnessClosed());
    return this.kernel.session
      .read(async () => {
        const record = await check();
        if (!record || record.status === "done" || record.status === "unanswered") return { record };
        return { waiting: this.#waiters.wait(id) };
      })
      .then((result) => ("waiting" in result ? result.waiting : result.record));
  }

  /** The shared view of a conversation that opens on its last `page` entries, created on first use. */
  feed(conversationId: number, page: number): ConversationFeed {
    const key = `${conversationId}/${page}`;
    let feed = this.#feeds.get(key);
    if (!feed) this.#feeds.set(key, (feed = new ConversationFeed(this.kernel.session, conversationId, page)));
    return feed;
  }

  /** Forgets a view nobody listens to. */
  release(feed: ConversationFeed): void {
    const key = `${feed.conversationId}/${feed.page}`;
    if (this.#feeds.get(key) === feed && !feed.listening) this.#feeds.delete(key);
  }

  /** A running task's live event (`runtime.live`): shown by the conversation's views, never stored. */
  live({ taskId, conversationId, event }: { taskId: number; conversationId: number; event: unknown }): void {
    for (const feed of this.#feeds.values()) if (feed.conversationId === conversationId) feed.live(taskId, event as LiveEvent);
  }

  close(): void {
    this.#closed = true;
    this.#waiters.rejectAll(() => new HarnessClosed());
  }

  /**
   * At open: a run (or compaction status) whose task is no longer live was left by a crash between the
   * scheduler's fault and its cleanup; clean it now, in one commit.
   */
  async sweep(connectedPages: ReadonlySet<string> = new Set()): Promise<void> {
    const session = this.kernel.session;
    await session.commit((tx) => {
      // A claim from before the open was cut off with it (0028), unless its page is still connected.
      releaseIn(tx, session.live.values(), undefined, connectedPages);
      for (const conversationId of session.conversations.keys()) {
        const live = readLive(tx, conversationId);
        if (live.run && !tx.task(live.run.taskId)) {
          endRun(tx, conversationId, live.run.taskId, {
            status: "unanswered",
            reason: "faulted",
            message: `Task ${live.run.taskId} ended without answering.`,
          });
        }
        const compactions = readLive(tx, conversationId).compactions ?? [];
        const alive = compactions.filter((status) => tx.task(status.taskId));
        if (alive.length !== compactions.length) {
          const { compactions: _all, ...rest } = readLive(tx, conversationId);
          writeLive(tx, conversationId, alive.length > 0 ? { ...rest, compactions: alive } : rest);
        }
      }
    });
  }

  #observe({ batch }: Published): void {
    // Indexed: most batches' submissions are the shared frozen empty list, which for…of allocates to walk (decision 0077).
    const submissions = batch.submissions;
    for (let at = 0; at < submissions.length; at++) {
      const submission = submissions[at]!;
      if (submission.status !== "done" && submission.status !== "unanswered") continue;
      this.#waiters.resolve(submission.id, () => submission);
    }
    const tasks = batch.tasks;
    for (let at = 0; at < tasks.length; at++) {
      const task = tasks[at]!;
      if (task.state.status !== "terminal") continue;
      const outcome = task.state.outcome.status;
      if ((outcome === "faulted" || outcome === "orphaned") && task.kind.startsWith("pi.")) this.#cleanup(task);
    }
    for (const feed of this.#feeds.values()) feed.apply(batch);
  }

  /**
   * The visible result the scheduler could not write for a faulted or orphaned built-in task. (A faulted
   * tool needs none: it has no result entry, and context derivation answers its call with a synthesized
   * "result unavailable".)
   */
  #cleanup(task: TaskRecord): void {
    if (this.#closed || this.kernel.readOnly) return;
    const conversationId = task.conversationId;
    const outcome = task.state.status === "terminal" ? task.state.outcome : undefined;
    const message =
      outcome?.status === "faulted"
        ? outcome.error.message
        : `Task ${task.id} was orphaned (${outcome?.status === "orphaned" ? outcome.reason : "unknown"}).`;
    // Listeners run on the commit line and must not commit there: queue the cleanup behind it.
    queueMicrotask(() => {
      this.kernel.session
        .commit((tx: KernelTx) => {
          const live = readLive(tx, conversationId);
          if (task.kind === "pi.generation" && live.run?.taskId === task.id) {
            convertPartial(tx, conversationId);
            endRun(tx, conversationId, task.id, { status: "unanswered", reason: "faulted", message });
          } else if (task.kind === "pi.compaction" && live.compactions?.some((status) => status.taskId === task.id)) {
            const compactions = live.compactions.filter((status) => status.taskId !== task.id);
            const { compactions: _all, ...rest } = live;
            writeLive(tx, conversationId, {
              ...rest,
              ...(compactions.length > 0 ? { compactions } : {}),
              compactionFailure: { taskId: task.id, reason: "faulted", message, at: tx.now() },
            });
          }
        })
        .catch((error) => {
          if (!this.#closed) this.kernel.report({ kind: "error", error, taskId: task.id });
        });
    });
  }
}
