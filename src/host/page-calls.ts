/**
 * The host's page tool methods (decision 0028): a page watches for the calls of the page tools it provides,
 * claims one, answers it. A page provides its tools while it watches: when its last watch ends — it
 * unsubscribed, its tab closed (a follower's connection dropped), its socket went — the calls it claimed are
 * released and follow their replay policy. (A page whose worker went with it is covered by the next open.)
 *
 * While the conversation runs elsewhere (a tab that follows its object, decision 0044) the watch reads the copy,
 * which moves with every transaction the holder pushes, and claims, answers and releases go to the holder
 * (`elsewhere`). When the host opens its harness again (`runHere`), every watch moves to the new harness
 * (`rebind`), and the pages still watching keep their claims (`watchingPages`, the open's `connectedPages`).
 */

import { PAGE_CALL_PREFIX, scopeOf } from "../agent/conversation/documents.ts";
import { BACKGROUND_CONTEXT as ctx } from "../base/context.ts";
import { safely } from "../base/safely.ts";
import { NotFound } from "../errors.ts";
import { type PageCallPort, requirePageId } from "../follow/page-call-relay.ts";
import type { Harness } from "../harness.ts";
import type { HarnessService } from "./protocol.ts";

type PageCallMethods = Pick<HarnessService, "watchPageCalls" | "claimPageCall" | "answerPageCall">;

export interface PageCallHost {
  /** The open harness (throws while there is none). */
  requireHarness(): Harness;
  /** Where claims, answers and releases go while the conversation runs elsewhere; undefined: here. */
  elsewhere?: () => PageCallPort | undefined;
  /** Watches to move when the host opens its harness again. */
  rebinds: Set<(next: Harness | Error) => void>;
  /** Whether the host is opening its harness again (a rebuild): a watch made now starts on the next one. */
  reopening?: () => boolean;
}

export interface PageCallService extends PageCallMethods {
  /** The pages that watch now: their claims survive the host's next open of its harness (`connectedPages`). */
  watchingPages(): string[];
}

export function pageCallMethods(host: PageCallHost): PageCallService {
  const { requireHarness, elsewhere, rebinds, reopening } = host;
  /** Live watches per page id: the page's claims are released when its last one ends. */
  const watching = new Map<string, number>();
  const release = (open: Harness, pageId: string) => {
    const port = elsewhere?.();
    if (port) port.releasePage(pageId).catch(() => {});
    else if (!open.closed && !open.readOnly) open.releasePage(pageId, ctx).catch(() => {});
  };
  return {
    watchPageCalls(conversationId, { pageId, tools }, listener, lost) {
      // While the host reopens (a rebuild, decision 0053) the watch starts on the harness it opens next.
      let open: Harness | undefined;
      try {
        open = requireHarness();
      } catch (error) {
        if (!reopening?.()) throw error;
      }
      open?.conversation(conversationId);
      const provided = new Set(tools);
      const scope = scopeOf(conversationId);
      let last: string | undefined;
      const publish = () => {
        if (!open || open.closed) return; // a commit told after a close (review of 0140, M2): nothing to read there
        const calls = open
          .conversation(conversationId)
          .pendingPageCalls()
          .filter((call) => provided.has(call.toolName));
        const text = JSON.stringify(calls);
        if (text === last) return;
        last = text;
        safely(() => listener(calls));
      };
      const watch = (): (() => void) =>
        open
          ? open.onCommit(({ batch }) => {
              const touched =
                batch.documents.some((document) => document.scope === scope && document.key.startsWith(PAGE_CALL_PREFIX)) ||
                batch.tasks.some((task) => task.kind === "pi.tool" && task.conversationId === conversationId);
              if (touched) publish();
            })
          : () => {};
      publish();
      let stop = watch();
      let subscribed = true;
      const rebind = (next: Harness | Error) => {
        // Given up during this move (an earlier watch's listener, told synchronously, unsubscribed it): it stays given
        // up (review of 0140, L1; before, it was subscribed to the new harness again and its listener called after).
        if (!subscribed) return;
        stop();
        try {
          if (next instanceof Error) throw next; // nothing opened again (decision 0117, later): ended the same way
          open = next;
          next.conversation(conversationId);
        } catch (error) {
          // Not in the harness opened again (decision 0117): the watch has ended and its owner is told. Before, the
          // NotFound was thrown out of the host's reopen, and the watches after this one were not moved.
          stop = () => {};
          unsubscribe();
          safely(() => lost?.(error instanceof Error ? error : new NotFound(`Conversation ${conversationId} is gone.`)));
          return;
        }
        stop = watch();
        last = undefined; // published again: a claim that failed while the host reopened is tried again
        publish();
      };
      rebinds.add(rebind);
      watching.set(pageId, (watching.get(pageId) ?? 0) + 1);
      const unsubscribe = () => {
        if (!subscribed) return;
        subscribed = false;
        stop();
        rebinds.delete(rebind);
        const left = (watching.get(pageId) ?? 1) - 1;
        if (left > 0) {
          watching.set(pageId, left);
          return;
        }
        watching.delete(pageId);
        if (open) release(open, pageId);
      };
      return unsubscribe;
    },
    async claimPageCall(conversationId, callId, claim) {
      const port = elsewhere?.();
      if (port) return port.claimPageCall(conversationId, callId, requirePageId(claim));
      return requireHarness().conversation(conversationId).claimPageCall(callId, claim, ctx);
    },
    async answerPageCall(conversationId, callId, claimId, result) {
      const port = elsewhere?.();
      if (port) return port.answerPageCall(conversationId, callId, claimId, result);
      return requireHarness().conversation(conversationId).answerPageCall(callId, claimId, result, ctx);
    },
    watchingPages: () => [...watching.keys()],
  };
}
