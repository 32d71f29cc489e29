/**
 * The host's page tool methods (decision 0028): a page watches for the calls of the page tools it provides,
 * claims one, answers it. A page provides its tools while it watches: when its last watch ends — it
 * unsubscribed, its tab closed (a follower's connection dropped), its socket went — the calls it claimed are
 * released and follow their replay policy. (A page whose worker went with it is covered by the next open.)
 */

import { PAGE_CALL_PREFIX, scopeOf } from "../agent/conversation/documents.ts";
import { BACKGROUND_CONTEXT as ctx } from "../base/context.ts";
import type { Harness } from "../harness.ts";
import { safely } from "./listeners.ts";
import type { HarnessService } from "./protocol.ts";

type PageCallMethods = Pick<HarnessService, "watchPageCalls" | "claimPageCall" | "answerPageCall">;

export function pageCallMethods(requireHarness: () => Harness): PageCallMethods {
  /** Live watches per page id: the page's claims are released when its last one ends. */
  const watching = new Map<string, number>();
  return {
    watchPageCalls(conversationId, { pageId, tools }, listener) {
      const open = requireHarness();
      const conversation = open.conversation(conversationId);
      const provided = new Set(tools);
      const scope = scopeOf(conversationId);
      let last: string | undefined;
      const publish = () => {
        const calls = conversation.pendingPageCalls().filter((call) => provided.has(call.toolName));
        const text = JSON.stringify(calls);
        if (text === last) return;
        last = text;
        safely(() => listener(calls));
      };
      publish();
      const stop = open.onCommit(({ batch }) => {
        const touched =
          batch.documents.some((document) => document.scope === scope && document.key.startsWith(PAGE_CALL_PREFIX)) ||
          batch.tasks.some((task) => task.kind === "pi.tool" && task.conversationId === conversationId);
        if (touched) publish();
      });
      watching.set(pageId, (watching.get(pageId) ?? 0) + 1);
      let subscribed = true;
      return () => {
        if (!subscribed) return;
        subscribed = false;
        stop();
        const left = (watching.get(pageId) ?? 1) - 1;
        if (left > 0) {
          watching.set(pageId, left);
          return;
        }
        watching.delete(pageId);
        if (!open.closed) open.releasePage(pageId, ctx).catch(() => {});
      };
    },
    claimPageCall: async (conversationId, callId, claim) => requireHarness().conversation(conversationId).claimPageCall(callId, claim, ctx),
    answerPageCall: async (conversationId, callId, claimId, result) =>
      requireHarness().conversation(conversationId).answerPageCall(callId, claimId, result, ctx),
  };
}
