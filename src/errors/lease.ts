/** The fenced log and its lease (decision 0029). */
import { DurableError } from "./base.ts";

/**
 * A commit (or a push of one) made under a lease epoch that a newer one has superseded: another place took the
 * lease. Nothing was written. The place that made it no longer holds the lease: open read-only and follow the
 * holder, or take the lease back through the arbiter (docs/decisions/0029).
 */
export class StaleEpoch extends DurableError {
  override name = "StaleEpoch";
  constructor(
    readonly epoch: number,
    readonly current: number,
    where: string,
  ) {
    super(
      `A commit of lease epoch ${epoch} was refused by ${where}: epoch ${current} has superseded it (another place holds the lease). ` +
        "Nothing was written; reopen read-only and follow the holder, or take the lease again.",
    );
  }
}

/**
 * A write at a place that does not hold the lease (never took it, handed it over, or let it expire on the harness
 * clock). Nothing was written; take the lease (open the harness with its arbiter again) or open read-only.
 */
export class LeaseNotHeld extends DurableError {
  override name = "LeaseNotHeld";
  constructor(
    readonly place: string,
    why: string,
  ) {
    super(`${place} does not hold the lease (${why}), so it may not write. Nothing was written; take the lease again or open read-only.`);
  }
}

/**
 * A commit that does not continue the log where it stands: its position is not the stored head + 1 (a gap, or a
 * position already taken). Nothing was written; send the commits after the stored head, in order.
 */
export class LogOutOfOrder extends DurableError {
  override name = "LogOutOfOrder";
  constructor(
    readonly position: number,
    readonly head: number,
    where: string,
  ) {
    super(`${where} is at log position ${head} and was given position ${position}: send position ${head + 1} next. Nothing was written.`);
  }
}

/**
 * A message on a follow link (src/follow/wire.ts) that the receiver refused before acting on it: too large
 * (`size`), nested too deep (`depth`), not JSON (`json`), or not one of the link's messages (`shape`). Nothing
 * was applied or answered. The sender and the receiver differ in version, or the sender is not the library:
 * send what `src/follow/wire.ts` describes (its builders split what is too large).
 */
export class FollowMessageRefused extends DurableError {
  override name = "FollowMessageRefused";
  constructor(
    readonly reason: "size" | "depth" | "json" | "shape" | "digest",
    detail: string,
  ) {
    super(`A follow-link message was refused (${reason}): ${detail}. Nothing was applied; send the messages src/follow/wire.ts describes.`);
  }
}

/**
 * A tab and a Durable Object whose follow links speak different versions of the wire (docs/decisions/0046): a tab
 * and a Worker deployed apart. Version 1 is the wire before versions (it has no `wire.hello`). Nothing was sent
 * or applied; deploy the Worker and the tab's app of the same release (or one that speaks both versions).
 */
export class FollowVersionMismatch extends DurableError {
  override name = "FollowVersionMismatch";
  constructor(
    readonly tab: number,
    readonly object: number,
  ) {
    super(
      `The tab speaks follow wire version ${tab} and the Durable Object version ${object}${object === 1 || tab === 1 ? " (1: before the wire had versions)" : ""}: ` +
        "they cannot follow each other, and nothing was sent or applied. " +
        (tab < object
          ? "The tab's app is older than the Worker: reload the tab to load the app of the Worker's release."
          : "Deploy the Worker and the tab's app from the same release."),
    );
  }
}

/**
 * A write sent to a place that serves a read-only copy of the conversation (decision 0034), of a kind the copy does
 * not forward to the place that holds the lease (configuration, task creation, powers). Nothing was done; make the
 * call where the conversation runs, or again once the lease is here.
 */
export class RunsElsewhere extends DurableError {
  override name = "RunsElsewhere";
  constructor(
    readonly method: string,
    readonly place: string,
  ) {
    super(
      `${method} was not done: this place serves a read-only copy and the conversation runs at ${place}. ` +
        "Make the call there, or again once this place holds the lease (submit, abortConversation and decide are forwarded from here).",
    );
  }
}

/**
 * The object could not serve (a part of) a snapshot of its copy (decision 0047): it holds no history yet (`empty`),
 * the snapshot asked for is no longer kept (`gone`: the object's instance restarted, or newer snapshots displaced
 * it), or its copy is larger than a snapshot carries (`size`). Nothing was changed at either end; ask for a new
 * snapshot (`gone`), or follow once the object has a history (`empty`).
 */
export class SnapshotUnavailable extends DurableError {
  override name = "SnapshotUnavailable";
  constructor(
    readonly reason: "empty" | "gone" | "size" | "busy",
    detail: string,
  ) {
    super(`The object's snapshot is unavailable (${reason}): ${detail}. Nothing was changed; ask for a new snapshot.`);
  }
}

/**
 * The object kept answering `busy` for one part of a snapshot the tab was reading (decision 0064): its parts limit was
 * held empty by other callers for every retry `fetchSnapshot` made (bounded backoff on the harness clock). Nothing was
 * replaced; rebuild again later (the object may have displaced the snapshot by then, and a new one is taken).
 */
export class SnapshotPartsBusy extends DurableError {
  override name = "SnapshotPartsBusy";
  constructor(
    readonly snapshotId: string,
    readonly index: number,
    readonly attempts: number,
  ) {
    super(
      `The object answered busy ${attempts} times for part ${index} of snapshot ${JSON.stringify(snapshotId)}. Nothing was replaced; rebuild again later.`,
    );
  }
}

/**
 * A server tool call the lease holder asked the object for (decision 0036) that is not a call of the object's copy of
 * its log (decision 0051): the call id names no `pi.tool` task of that conversation in its `server` phase, or that
 * task's call is another tool or has other arguments. Nothing was run or stored. A tab whose intent commit had not
 * reached the object yet asks after its acknowledgement; anything else was not asked by the agent.
 */
export class ServerCallNotInCopy extends DurableError {
  override name = "ServerCallNotInCopy";
  constructor(
    readonly callId: string,
    why: string,
  ) {
    super(
      `Server tool call ${JSON.stringify(callId)} is not a call of the object's copy: ${why}. Nothing was run or stored; only the agent's own calls run on the server.`,
    );
  }
}

/**
 * A page's `leave()` handed the lease over (the rest of the log and the release were sent) and the object's answer
 * never came: the link has been down past the lease's expiry (decision 0051). The object takes the lease at that
 * expiry, as after a lost release; nothing runs here any more. Reload the page, or `runHere()` once online.
 */
export class HandOverUnanswered extends DurableError {
  override name = "HandOverUnanswered";
  constructor(position: number) {
    super(
      `The hand-over at log position ${position} was sent and the object never answered; the link has been down past the lease's expiry, so the object takes the lease then. Nothing runs here any more: reload, or runHere() once online.`,
    );
  }
}

/**
 * A caller already has its share of writes waiting at a place that serves a copy (decision 0097: a following tab's
 * `copy.submit`, `copy.decide`, `copy.abortConversation` wait there until the place that holds the lease answers
 * them). Nothing was forwarded or stored; the caller's other writes and every other caller's go on.
 */
export class TooManyWaitingWrites extends DurableError {
  override name = "TooManyWaitingWrites";
  constructor(
    readonly method: string,
    readonly limit: number,
  ) {
    super(
      `${method} was not sent: this caller already has ${limit} writes waiting for the place that holds the lease (at most ${limit} at once). ` +
        "Nothing was forwarded or stored. Send it again once one of them is answered (a write sent again under its key is never made twice).",
    );
  }
}
