/**
 * Every error the library throws on purpose is one of these classes. `name` is stable (match on it, not on
 * the message); the message says what happened and what to do next.
 */
export class DurableError extends Error {
  // Spelled out in every class: a production build minifies class names, and callers match on `name`.
  override name: string = "DurableError";
  constructor(message: string, options?: { cause?: unknown }) {
    super(message, options);
  }
}

/** A write, `resume()`, `submit()` or task creation on a harness opened with `readOnly: true`. */
export class ReadOnlySession extends DurableError {
  override name = "ReadOnlySession";
  constructor(what: string) {
    super(`${what} is not allowed: this harness was opened read-only. Open it without readOnly to change it.`);
  }
}

/** Any call on a harness (or storage) after `close()`. */
export class HarnessClosed extends DurableError {
  override name = "HarnessClosed";
  constructor(what = "Harness") {
    super(`${what} is closed. Open a new one on the same storage to continue.`);
  }
}

/** A bad `HarnessOptions` / `settings` value, rejected at open before anything is read or written. */
export class InvalidSetting extends DurableError {
  override name = "InvalidSetting";
}

/** The database was written by a newer version of pi-durable-web. Nothing was changed. */
export class SchemaTooNew extends DurableError {
  override name = "SchemaTooNew";
  constructor(
    readonly found: number,
    readonly supported: number,
  ) {
    super(
      `The database has schema version ${found}, but this pi-durable-web supports at most ${supported}. ` +
        `Upgrade pi-durable-web to open it; the database was left unmodified.`,
    );
  }
}

/** The bytes are not a SQLite database, or the database failed its integrity check. Nothing was changed. */
export class DatabaseCorrupt extends DurableError {
  override name = "DatabaseCorrupt";
}

/** The storage quota of the origin (or disk) is exhausted; the failed commit left no trace. */
export class StorageQuotaExceeded extends DurableError {
  override name = "StorageQuotaExceeded";
}

/** Another owner (for example another tab) holds the database. */
export class DatabaseLocked extends DurableError {
  override name = "DatabaseLocked";
}

/**
 * A statement passed to `storage.query()` would write, or change the connection (a PRAGMA that sets
 * something, transaction control, ATTACH), or is more than one statement. It was not run, and nothing changed.
 */
export class QueryNotReadOnly extends DurableError {
  override name = "QueryNotReadOnly";
  constructor(sql: string, why = "this statement would write or change the connection") {
    super(`storage.query() runs one read-only statement only; ${why}: ${sql.slice(0, 120)}`);
  }
}

/** SQLite could not prepare or run a `storage.query()` statement (a typo, an unknown column, a statement too long). Nothing changed. */
export class QueryFailed extends DurableError {
  override name = "QueryFailed";
  constructor(sqliteMessage: string, options?: { cause?: unknown }) {
    super(`storage.query() failed: ${sqliteMessage}. Fix the statement and run it again; nothing was changed.`, options);
  }
}

/** A `storage.query()` statement returned or cost more than its limit (`queryLimits`); it was stopped, nothing changed. */
export class QueryLimitExceeded extends DurableError {
  override name = "QueryLimitExceeded";
  constructor(
    readonly limit: "maxRows" | "maxBytes" | "maxSteps",
    readonly value: number,
  ) {
    const what = { maxRows: `more than ${value} rows`, maxBytes: `more than ${value} bytes`, maxSteps: `more than ${value} SQLite steps` }[
      limit
    ];
    super(
      `storage.query() stopped the statement: it would return or take ${what} (queryLimits.${limit}). Add a LIMIT or a ` +
        `narrower WHERE, or raise queryLimits.${limit} where the storage is opened.`,
    );
  }
}

/** A task, conversation or submission id that does not exist. */
export class NotFound extends DurableError {
  override name = "NotFound";
}

/** A commit that breaks a rule of the task model (waiting on itself, a child in another conversation, …). */
export class InvalidCommit extends DurableError {
  override name = "InvalidCommit";
}

/** A runtime call from an invocation that has already ended (the phase returned, or the task was signalled). */
export class InvocationEnded extends DurableError {
  override name = "InvocationEnded";
  constructor(readonly taskId: number) {
    super(`Task ${taskId} invocation has ended; a phase may only use its runtime while it runs.`);
  }
}

/** A task definition or extension that cannot be installed (duplicate name, bad version, …). */
export class InvalidDefinition extends DurableError {
  override name = "InvalidDefinition";
}

/** The environment cannot host the requested database (for example opfs-sahpool outside a dedicated Web Worker). */
export class StorageUnavailable extends DurableError {
  override name = "StorageUnavailable";
}

/** `submit({ whenBusy: "reject" })` while the conversation is answering. Nothing was written; submit again later. */
export class ConversationBusy extends DurableError {
  override name = "ConversationBusy";
  constructor(readonly conversationId: number) {
    super(
      `Conversation ${conversationId} is busy answering; nothing was submitted. Submit with whenBusy "followUp" or "steer", or try again when it is idle.`,
    );
  }
}

/**
 * A value past a limit where it enters the harness (`settings.limits`: nesting depth, serialized size), or
 * not JSON at all, or a commit whose row would be larger than one row of the storage holds
 * (`Storage.maxRowBytes`: a Durable Object's 2 MB). Nothing was written. `limit` names what refused it:
 * `"maxDepth"`, `"maxBytes"`, `"shape"` or `"maxRowBytes"`.
 */
export class InvalidInput extends DurableError {
  override name = "InvalidInput";
  readonly limit: string;
  constructor(message: string, limit: "maxDepth" | "maxBytes" | "shape" | "maxRowBytes", options?: { cause?: unknown }) {
    super(message, options);
    this.limit = limit;
  }
}

/** A `submit()` draft that cannot be admitted (unknown type, empty content, a requestId reused for another type, …). */
export class InvalidSubmission extends DurableError {
  override name = "InvalidSubmission";
}

/** An execution environment has no file at that path. */
export class FileNotFound extends DurableError {
  override name = "FileNotFound";
  constructor(readonly path: string) {
    super(`No file ${JSON.stringify(path)} in this environment.`);
  }
}

/** A path that is not a string or leaves the execution environment's root. */
export class InvalidPath extends DurableError {
  override name = "InvalidPath";
}

/** The worker that owns the database is gone (terminated, crashed, or its page reloaded); the call was not answered. */
export class WorkerGone extends DurableError {
  override name = "WorkerGone";
}

/** The WebSocket to the host (or a leader tab) closed while a call was in flight; the call may or may not have run. */
export class ConnectionLost extends DurableError {
  override name = "ConnectionLost";
  constructor() {
    super(
      "The connection to the harness was lost while this call was in flight; it may or may not have run. It reconnects by itself: check, then retry.",
    );
  }
}

/** A hook of pi-durable-web/react ran outside a `<HarnessProvider>`. */
export class NoHarnessProvider extends DurableError {
  override name = "NoHarnessProvider";
}

/** `useChat` asked the durable transport for something a durable conversation does not do (see the README). */
export class UnsupportedChatRequest extends DurableError {
  override name = "UnsupportedChatRequest";
}

/** A hook was asked to act before its client or conversation was there. */
export class NotReady extends DurableError {
  override name = "NotReady";
}

/** The first crash world of a `crashSweep` (pi-durable-web/testing) that broke an invariant. */
export class CrashSweepViolation extends DurableError {
  override name = "CrashSweepViolation";
  constructor(
    readonly scenario: string,
    /** Where that world crashed: the first crash, then each crash during the recovery before. */
    readonly crashes: readonly { commit: number; edge: "after" | "before" }[],
    readonly invariant: string,
    readonly detail: string,
    readonly log: readonly string[],
  ) {
    const where = crashes.map(({ commit, edge }) => `right ${edge} commit ${commit}`).join(", then in recovery ");
    super(
      `crashSweep ${JSON.stringify(scenario)}: crashing ${where} breaks ${invariant}: ${detail}\n` +
        `Commit log of that world:\n${log.map((line) => `  ${line}`).join("\n")}`,
    );
  }
}

/** `createTask(kind, input, { key })` with a key that already names a task of another kind or input. Nothing was written. */
export class TaskKeyConflict extends DurableError {
  override name = "TaskKeyConflict";
  readonly key: string;
  readonly taskId: number;
  constructor(key: string, taskId: number, existing: string) {
    super(
      `The key ${JSON.stringify(key)} already names task ${taskId} (${existing}); nothing was created. ` +
        `Pass the same kind and input to get that task again, or use a new key for a new task.`,
    );
    this.key = key;
    this.taskId = taskId;
  }
}

/** A task kind the page asked for is not installed in the worker's registry. */
export class UnknownTaskKind extends DurableError {
  override name = "UnknownTaskKind";
  constructor(
    readonly kind: string,
    installed: readonly string[],
  ) {
    super(`No task kind ${JSON.stringify(kind)} is installed in the worker. Installed: ${installed.join(", ") || "none"}.`);
  }
}

/** `api.output()` / `api.details()` after the tool call they belong to has ended (a late callback in a tool). */
export class ToolCallEnded extends DurableError {
  override name = "ToolCallEnded";
}

/** `armCrashPoint` on a host served with `crashPoints: false` (a production build that turned the test hook off). */
export class CrashPointsOff extends DurableError {
  override name = "CrashPointsOff";
  constructor(readonly crashPoint: string) {
    super(
      `Crash point ${JSON.stringify(crashPoint)} cannot be armed: this host was served with crashPoints: false. Serve it without that option to test crashes.`,
    );
  }
}

/** A method the host's protocol does not have (or a call of a subscription): the page and the host differ in version. */
export class UnknownMethod extends DurableError {
  override name = "UnknownMethod";
  constructor(readonly method: string) {
    super(
      `The host has no method ${JSON.stringify(method)} of that kind; the page and the host come from different versions of pi-durable-web. Load both from one build.`,
    );
  }
}

/** `client.call(name)` with a name that is not one of the app's own methods (`serveHarness({ methods })`, an object's `methods`). */
export class UnknownAppMethod extends DurableError {
  override name = "UnknownAppMethod";
  constructor(readonly method: string) {
    super(
      `The host has no app method ${JSON.stringify(method)}; add it to the methods it is served with (serveHarness({ methods }), or the object's methods).`,
    );
  }
}

/** A request to a host's transport that is not one (a `POST /rpc` body without a method name, say). */
export class InvalidRequest extends DurableError {
  override name = "InvalidRequest";
}

/** A method of the host that this transport does not offer to its callers (a Durable Object's `close`, say). */
export class MethodNotServed extends DurableError {
  override name = "MethodNotServed";
  constructor(
    readonly method: string,
    why: string,
  ) {
    super(`The host does not serve ${JSON.stringify(method)} here: ${why}`);
  }
}

/** A Durable Object cannot hand out its database file as bytes (`exportImage()`). */
export class ImageUnavailable extends DurableError {
  override name = "ImageUnavailable";
  constructor() {
    super(
      "A Durable Object's SQLite database cannot be exported as a file image. Read it with storage.query() (or " +
        "copy rows out through the harness) instead.",
    );
  }
}

/** A view update reached a page-side store before the view's snapshot; subscribe again to get one. */
export class ViewUpdateOutOfOrder extends DurableError {
  override name = "ViewUpdateOutOfOrder";
}

/** A host method called with arguments it does not take (a wrong type, a missing or extra one). Nothing ran. */
export class InvalidArguments extends DurableError {
  override name = "InvalidArguments";
  constructor(
    readonly method: string,
    problem: string,
  ) {
    super(`${method}: ${problem}. Nothing was done; call it as the protocol (HarnessService) declares it.`);
  }
}

/** A call the host's doors refused for this caller: a power the app did not turn on, or its `authorize` said no. Nothing ran. */
export class NotAuthorized extends DurableError {
  override name = "NotAuthorized";
  constructor(
    readonly method: string,
    why: string,
  ) {
    super(`The host refused ${JSON.stringify(method)} for this caller: ${why} Nothing was done.`);
  }
}

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
