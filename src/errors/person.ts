/** The person in the loop: approvals and page tools (decisions 0024, 0028). */
import { DurableError } from "./base.ts";

/** How a tool call's approval was decided (the first decision, which stands). */
export interface DecisionSummary {
  approved: boolean;
  reason?: string;
  /** A person through `decide`, the tool's approval rule, or the expiry (`approvalExpiresAfterMs`). */
  by: "person" | "rule" | "expiry";
  decidedAt: number;
}

/** A second decision for a tool call that was already decided: the first one stands, nothing was changed. */
export class AlreadyDecided extends DurableError {
  override name = "AlreadyDecided";
  readonly callId: string;
  readonly taskId: number;
  readonly decision: DecisionSummary;
  constructor(callId: string, taskId: number, decision: DecisionSummary) {
    const who = decision?.by === "person" ? "by a person" : decision?.by === "rule" ? "by its approval rule" : "by its expiry";
    super(
      `Tool call ${callId} (task ${taskId}) was already ${decision?.approved ? "approved" : "denied"} ${who}` +
        `${decision?.reason ? ` (reason: ${decision.reason})` : ""}; that decision stands and nothing was changed. Show the call's current state instead of deciding again.`,
    );
    this.callId = callId;
    this.taskId = taskId;
    this.decision = decision;
  }
}

/** A decision for a tool call that was withdrawn before it was decided (its conversation was aborted). */
export class ApprovalWithdrawn extends DurableError {
  override name = "ApprovalWithdrawn";
  readonly callId: string;
  readonly taskId: number;
  constructor(callId: string, taskId: number) {
    super(
      `Tool call ${callId} (task ${taskId}) no longer waits for a decision: it was withdrawn when its conversation was aborted. Nothing was changed; submit a new input to ask again.`,
    );
    this.callId = callId;
    this.taskId = taskId;
  }
}

/** A decision for a tool call that exists but does not wait for one (it never asked, or it has finished). */
export class NoPendingApproval extends DurableError {
  override name = "NoPendingApproval";
  readonly callId: string;
  readonly taskId: number;
  constructor(callId: string, taskId: number, why: string) {
    super(`Tool call ${callId} (task ${taskId}) does not wait for a decision: ${why}. Nothing was changed.`);
    this.callId = callId;
    this.taskId = taskId;
  }
}

/** A decision given for other arguments than the call waits with (`argumentsHash` differs): nothing was decided. */
export class ApprovalMismatch extends DurableError {
  override name = "ApprovalMismatch";
  readonly callId: string;
  readonly taskId: number;
  constructor(callId: string, taskId: number, expected: string, given: string) {
    super(
      `The decision for tool call ${callId} (task ${taskId}) was given for arguments ${given}, but the call waits with arguments ${expected}. ` +
        `Nothing was decided: show the person the call's current arguments and decide again.`,
    );
    this.callId = callId;
    this.taskId = taskId;
  }
}

/** A claim on a page tool call that another page claimed first: this page must not run it. */
export class PageCallTaken extends DurableError {
  override name = "PageCallTaken";
  readonly callId: string;
  readonly taskId: number;
  readonly claimedAt: number;
  constructor(callId: string, taskId: number, claimedAt: number) {
    super(
      `Page tool call ${callId} (task ${taskId}) was claimed by another page first (at ${claimedAt} on the harness clock); ` +
        "that page runs it. Do not run the tool here: show the call's state instead.",
    );
    this.callId = callId;
    this.taskId = taskId;
    this.claimedAt = claimedAt;
  }
}

/** A claim or a result for a page tool call that has ended (its result is in, or it was interrupted or withdrawn). */
export class PageCallEnded extends DurableError {
  override name = "PageCallEnded";
  readonly callId: string;
  readonly taskId: number;
  readonly ended: "result" | "interrupted" | "withdrawn";
  constructor(callId: string, taskId: number, ended: "result" | "interrupted" | "withdrawn") {
    const why =
      ended === "result"
        ? "its result was already committed (a call has one result)"
        : ended === "interrupted"
          ? "it was interrupted while a page ran it (its replay policy is unsafe) and the model was told so"
          : "it was withdrawn when its conversation was aborted";
    super(`Page tool call ${callId} (task ${taskId}) has ended: ${why}. Nothing was changed; show the call's state instead.`);
    this.callId = callId;
    this.taskId = taskId;
    this.ended = ended;
  }
}

/**
 * A result for a page tool call under a claim it no longer holds: the claim was released (the harness restarted,
 * or the page that held it went) and the call followed its replay policy. The result was not committed.
 */
export class PageClaimLost extends DurableError {
  override name = "PageClaimLost";
  readonly callId: string;
  readonly taskId: number;
  constructor(callId: string, taskId: number) {
    super(
      `Page tool call ${callId} (task ${taskId}) is no longer claimed by this page: the claim was released (the harness restarted or ` +
        "the claiming page went) and the call followed its replay policy. This result was not committed; do not send it again.",
    );
    this.callId = callId;
    this.taskId = taskId;
  }
}
