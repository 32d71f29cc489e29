import type { ConversationView } from "../agent/view/view-store.ts";
import type { HarnessClient, Unsubscribe } from "../browser/client.ts";

export type { Unsubscribe };

/**
 * The part of `HarnessClient` (pi-durable-web/client) the hooks and the chat transport use. A
 * `HarnessClient` is one; a test may pass any object of this shape (an in-memory host, a fake).
 */
export type ReactHarnessClient = Pick<
  HarnessClient,
  | "status"
  | "onStatus"
  | "requestTakeover"
  | "onReport"
  | "watchTasks"
  | "submit"
  | "waitForSubmission"
  | "decide"
  | "pageId"
  | "providePageTools"
  | "watchPageCalls"
  | "claimPageCall"
  | "answerPageCall"
  | "close"
  | "terminate"
> & {
  /**
   * As `HarnessClient.openConversation`; its promise may carry `cancel()` (a `HarnessClient`'s does, decision 0111),
   * which the hooks and the transport call when they no longer want a view still being opened.
   */
  openConversation(conversationId: number): Promise<ConversationView>;
};

/** What the chat transport needs of a client. */
export type ChatClient = Pick<
  ReactHarnessClient,
  "openConversation" | "submit" | "waitForSubmission" | "decide" | "pageId" | "watchPageCalls" | "claimPageCall" | "answerPageCall"
>;
