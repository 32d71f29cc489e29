/**
 * A following tab's writes, made through its object (decisions 0096, 0097): while this tab's harness is a read-only
 * copy (another tab or the object holds the lease), a `submit`, `decide` or `abortConversation` its page makes goes
 * over the follow link to the object (topic `copy`), which forwards it to the holder under its key as it does for a
 * page connected to it. The answer waits until this tab's copy shows the write (its page reads it next:
 * `waitForSubmission`, `pendingApprovals`, the conversation's view), at most `ARRIVAL_WAIT_MS`.
 */

import type { Clock } from "../base/clock.ts";
import { BACKGROUND_CONTEXT as ctx } from "../base/context.ts";
import type { Json } from "../base/json.ts";
import { ReadOnlySession } from "../errors.ts";
import { abortThroughObject, type CopyMethod, decideThroughObject, submitThroughObject } from "../follow/copy-writes.ts";
import type { Harness } from "../harness.ts";
import type { HarnessService } from "../host/protocol.ts";
import type { FollowPlace } from "./follow-options.ts";

/** How long a forwarded write's answer waits for this tab's copy to show it (then it answers anyway). */
export const ARRIVAL_WAIT_MS = 10_000;

/** The writes a following tab makes through its object: the host's own signatures. */
export type FollowWrites = Pick<HarnessService, CopyMethod>;

/**
 * This tab's copy as the writes see it: the harness attached now, and word of the next one (a copy that could not
 * follow — forked, behind — is closed and rebuilt from the object's snapshot, then attached anew).
 */
export interface TabCopies {
  current(): Harness | undefined;
  onAttach(listener: () => void): () => void;
}

/**
 * The writes through the object over `call` (the link's `FollowLink.call`), each keyed (a `requestId` or `decisionId`
 * minted when the page gave none), each answered once this tab's current copy shows it — the copy attached when the
 * answer came, or the one rebuilt after it (decision 0097: before, a copy that forked during the wait answered with
 * an id it lacked).
 */
export function followingWrites(
  call: (topic: string, method: string, args: Json[]) => Promise<Json>,
  copies: TabCopies,
  clock: Clock,
): FollowWrites {
  return {
    async submit(conversationId, draft) {
      const keyed = { ...draft, requestId: draft.requestId ?? crypto.randomUUID() };
      const id = await submitThroughObject(call, conversationId, keyed);
      await arrival(copies, clock, async (harness) => (await harness.storage.getSubmission(id)) !== undefined);
      return id;
    },
    async decide(conversationId, callRef, decision) {
      const keyed = { ...decision, decisionId: decision.decisionId ?? crypto.randomUUID() };
      const record = await decideThroughObject(call, conversationId, callRef, keyed);
      // Shown once the call no longer waits here (the holder's commit that decided it arrived).
      await arrival(copies, clock, (harness) =>
        harness
          .conversation(conversationId)
          .pendingApprovals()
          .every((pending) => pending.taskId !== record.taskId),
      );
      return record;
    },
    async abortConversation(conversationId) {
      // The run and compactions this copy shows: answered once it shows them ended (as the holder's own abort).
      const here = copies.current();
      const tasks = here && !here.closed ? await stoppable(here, conversationId) : [];
      await abortThroughObject(call, conversationId);
      await arrival(copies, clock, async (harness) =>
        (await Promise.all(tasks.map((task) => harness.getTask(task, ctx)))).every(
          (task) => task === undefined || task.state.status === "terminal",
        ),
      );
    },
  };
}

/** The conversation's run and compactions that have not ended, in `harness`'s copy. */
async function stoppable(harness: Harness, conversationId: number): Promise<number[]> {
  return (await harness.inspect(ctx)).tasks
    .map((task) => task.record)
    .filter(
      (record) =>
        record.conversationId === conversationId &&
        (record.kind === "pi.generation" || record.kind === "pi.compaction") &&
        record.state.status !== "terminal",
    )
    .map((record) => record.id);
}

/**
 * Resolves once `arrived(copy)` holds for this tab's current copy (checked now, after each commit it follows, and
 * again for a copy attached meanwhile), or after `ARRIVAL_WAIT_MS` with a copy open. A copy that closed (it is being
 * rebuilt) is waited past: the rebuilt one is asked when it is attached. Decision 0103: the bound does not end the wait
 * while no copy is open (a rebuild longer than it): the next copy attached — rebuilt, or the old one reopened after a
 * failed rebuild — gets `ARRIVAL_WAIT_MS` of its own. Before, the answer went with an id no copy of the tab held.
 */
function arrival(copies: TabCopies, clock: Clock, arrived: (copy: Harness) => boolean | Promise<boolean>): Promise<void> {
  return new Promise((resolve) => {
    let done = false;
    let watching: Harness | undefined;
    let unwatch = () => {};
    const stops: Array<() => void> = [];
    const finish = () => {
      if (done) return;
      done = true;
      unwatch();
      for (const stop of stops) stop();
      resolve();
    };
    const check = (copy: Harness) => {
      if (done || copy !== watching) return;
      Promise.resolve()
        .then(() => arrived(copy))
        .then(
          (yes) => void (yes && copy === watching && finish()),
          () => void (!copy.closed && copy === watching && finish()), // a copy that cannot tell: answered as it is
        );
    };
    const watch = () => {
      const copy = copies.current();
      if (done || copy === watching) return;
      unwatch();
      unwatch = () => {};
      watching = copy;
      if (!copy || copy.closed) return; // no copy to ask now: the next attached one is
      unwatch = copy.onCommit(() => check(copy));
      check(copy);
    };
    let waitedOut = false;
    const bound = () => {
      waitedOut = false;
      stops.push(clock.setTimer(ARRIVAL_WAIT_MS, () => (watching && !watching.closed ? finish() : void (waitedOut = true))));
    };
    stops.push(
      copies.onAttach(() => {
        watch();
        if (waitedOut && watching && !watching.closed) bound();
      }),
    );
    bound();
    watch();
  });
}

/**
 * The worker's service with its writes made through the object while the tab follows it: the harness's own first
 * (a tab that holds the lease writes here; a draft or decision it finds malformed is refused here, sent nowhere), and
 * on `ReadOnlySession` while the agent runs elsewhere, through the object (whose copy answers a key it already holds).
 */
export function writesThroughObject(service: HarnessService, follow: { readonly place: FollowPlace } & FollowWrites): HarnessService {
  const elsewhere =
    <A extends unknown[], R>(local: (...args: A) => Promise<R>, remote: (...args: A) => Promise<R>) =>
    async (...args: A): Promise<R> => {
      try {
        return await local(...args);
      } catch (error) {
        if (error instanceof ReadOnlySession && follow.place === "elsewhere") return remote(...args);
        throw error;
      }
    };
  return {
    ...service,
    submit: elsewhere(
      (conversationId, draft) => service.submit(conversationId, draft),
      (conversationId, draft) => follow.submit(conversationId, draft),
    ),
    decide: elsewhere(
      (conversationId, call, decision) => service.decide(conversationId, call, decision),
      (conversationId, call, decision) => follow.decide(conversationId, call, decision),
    ),
    abortConversation: elsewhere(
      (conversationId) => service.abortConversation(conversationId),
      (conversationId) => follow.abortConversation(conversationId),
    ),
  };
}
