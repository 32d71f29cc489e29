import { type Conversation, ConversationView, type Harness } from "../src/index.ts";
import { type ChatClient, DurableChatTransport } from "../src/react/index.ts";
import type { AgentOpened } from "./agent-support.ts";
import { ctx } from "./support.ts";

/** A page-side client of an in-process harness: the same view store a worker's client feeds, over direct calls. */
export function inProcessClient(harness: Harness, conversation: Conversation, pageId = "page-1"): ChatClient {
  return {
    pageId,
    // A page in the same process never goes while its harness lives: nothing to release.
    watchPageCalls: async () => () => {},
    openConversation: () =>
      ConversationView.open({
        watch: async (listener) => conversation.watch(listener),
        entriesBefore: (beforeId, limit) => conversation.entriesBefore(beforeId, limit, ctx),
      }),
    submit: async (_id, draft) => (await conversation.submit(draft, ctx)).id,
    waitForSubmission: async (id) => (await harness.submission(id, ctx)).wait(ctx),
    decide: (_id, call, decision) => conversation.decide(call, decision, ctx),
    claimPageCall: (_id, callId, claim) => conversation.claimPageCall(callId, claim, ctx),
    answerPageCall: (_id, callId, claimId, result) => conversation.answerPageCall(callId, claimId, result, ctx),
  };
}

export function transportFor(opened: AgentOpened, options: { pageTools?: string[]; pageId?: string } = {}): DurableChatTransport {
  return new DurableChatTransport({
    client: inProcessClient(opened.harness, opened.root, options.pageId),
    conversationId: opened.root.id,
    ...(options.pageTools ? { pageTools: options.pageTools } : {}),
  });
}
