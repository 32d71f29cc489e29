/**
 * A following tab's submissions, made through its object (decision 0096): while this tab's harness is a read-only
 * copy (another tab or the object holds the lease), a `submit` its page makes goes over the follow link to the object
 * (`copy.submit`), which forwards it to the holder under its `requestId` as it does a page connected to it. The
 * answer waits until this tab's copy holds the submission (its page reads it next: `waitForSubmission`), at most
 * `ARRIVAL_WAIT_MS`.
 */
import type { SubmissionDraft } from "../agent/types.ts";
import type { Clock } from "../base/clock.ts";
import type { Json } from "../base/json.ts";
import { ReadOnlySession } from "../errors.ts";
import { submitThroughObject } from "../follow/copy-writes.ts";
import type { Harness } from "../harness.ts";
import type { HarnessService } from "../host/protocol.ts";
import type { FollowPlace } from "./follow-options.ts";

/** How long a forwarded submission's answer waits for this tab's copy to hold it (then it answers anyway). */
export const ARRIVAL_WAIT_MS = 10_000;

/** Sends `draft` through the object (a `requestId` minted when it has none); resolves with its id once the copy has it. */
export async function submitFollowing(
  call: (topic: string, method: string, args: Json[]) => Promise<Json>,
  copy: Harness | undefined,
  clock: Clock,
  conversationId: number,
  draft: SubmissionDraft,
): Promise<number> {
  const keyed = { ...draft, requestId: draft.requestId ?? crypto.randomUUID() };
  const id = await submitThroughObject(call, conversationId, keyed);
  if (copy && !copy.closed) await arrival(copy, id, clock);
  return id;
}

/** Resolves once `copy` holds submission `id` (a commit it followed carried it), or after `ARRIVAL_WAIT_MS`. */
function arrival(copy: Harness, id: number, clock: Clock): Promise<void> {
  return new Promise((resolve) => {
    let done = false;
    const stops: Array<() => void> = [];
    const finish = () => {
      if (done) return;
      done = true;
      for (const stop of stops) stop();
      resolve();
    };
    stops.push(
      copy.onCommit(({ batch }) => {
        if (batch.submissions.some((record) => record.id === id)) finish();
      }),
    );
    stops.push(clock.setTimer(ARRIVAL_WAIT_MS, finish));
    copy.storage.getSubmission(id).then((record) => void (record && finish()), finish);
  });
}

/**
 * The worker's service with its `submit` made through the object while the tab follows it: the harness's own first
 * (a tab that holds the lease submits here; a draft it finds malformed is refused here, sent nowhere), and on
 * `ReadOnlySession` while the agent runs elsewhere, through the object (whose copy answers a key it already holds).
 */
export function submitsThroughObject(
  service: HarnessService,
  follow: { readonly place: FollowPlace; submit(conversationId: number, draft: SubmissionDraft): Promise<number> },
): HarnessService {
  return {
    ...service,
    async submit(conversationId, draft) {
      try {
        return await service.submit(conversationId, draft);
      } catch (error) {
        if (error instanceof ReadOnlySession && follow.place === "elsewhere") return follow.submit(conversationId, draft);
        throw error;
      }
    },
  };
}
