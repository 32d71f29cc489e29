import type { Context } from "../../base/context.ts";
import type { KernelTx } from "../../session/tx.ts";
import type { SubmissionRecord } from "../../storage/records.ts";
import type { AgentKernel } from "../kernel.ts";
import type { ConversationFeed } from "../view/view.ts";

/**
 * What conversations and submissions need of the agent that made them (the `Conversations` is the one
 * implementation): the kernel, commits in a conversation, the admission line, settlement, shared feeds.
 */
export interface ConversationPort {
  readonly kernel: AgentKernel;
  /** Commits `body` in conversation `conversationId` (its new tasks and entries belong there). */
  commitIn<T>(conversationId: number, body: (tx: KernelTx) => T, context: Context): Promise<T>;
  /** Runs `work` after every earlier admission has been stored. */
  exclusive<T>(work: () => Promise<T>): Promise<T>;
  /** Resolves once submission `id` is settled (`done` or `unanswered`). */
  settled(id: number, check: () => Promise<SubmissionRecord | undefined>): Promise<SubmissionRecord | undefined>;
  /** The shared view of a conversation that opens on its last `page` entries, created on first use. */
  feed(conversationId: number, page: number): ConversationFeed;
  /** Forgets a view nobody listens to. */
  release(feed: ConversationFeed): void;
}
