/** Between a page and its harness: transports, methods, doors, the React and testing helpers. */
import { DurableError } from "./base.ts";

/** The worker that owns the database is gone (terminated, crashed, or its page reloaded); the call was not answered. */
export class WorkerGone extends DurableError {
  override name = "WorkerGone";
}

/**
 * The WebSocket to the host (or the link to a leader tab: closed, or silent to the ask whether it is there) was lost while
 * a call was in flight; the call may or may not have run.
 */
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

/**
 * A hook was asked to act before its client or conversation was there; or a tab's status ask had no answer in time (the
 * tabs' endpoint gives it up and asks again: the review of decision 0132, L3); or a page's call found no tab with the
 * database ready in time and was not sent (decision 0146); or the object answered between its harnesses (0135, 0139).
 */
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

/**
 * The host's `authorize` hook failed (it threw or rejected) while it decided a call (decision 0117): the app's bug, or a
 * store the hook reads that was down — not a refusal of this caller. Nothing ran; the same call may succeed later
 * (retryable: a reconnecting page keeps its subscriptions and asks them again). The hook's own error stays at the host
 * (`cause`, never sent to the page): its message may say what the app keeps to itself.
 */
export class AuthorizeFailed extends DurableError {
  override name = "AuthorizeFailed";
  constructor(
    readonly method: string,
    options?: { cause?: unknown },
  ) {
    super(
      `The host could not decide whether this caller may make ${JSON.stringify(method)}: its authorize check failed. Nothing was done; try again later.`,
      options,
    );
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

/**
 * A caller (one page's port, one socket, one follower tab) already holds `limit` subscriptions at this host, held or
 * still waiting for their answer (decision 0148). Nothing was subscribed; its other subscriptions go on. Not retryable:
 * the same subscribe is refused until the caller unsubscribes one (or the app raises `callerLimits.maxSubscriptions`);
 * one given up before its answer frees its place once the host answers it (0148's review).
 */
export class TooManySubscriptions extends DurableError {
  override name = "TooManySubscriptions";
  constructor(
    readonly method: string,
    readonly limit: number,
  ) {
    super(
      `${method} was not subscribed: this caller already holds ${limit} subscriptions here (at most ${limit}, waiting ones included). ` +
        "Nothing was subscribed; unsubscribe one first (one given up before its answer keeps its place until the host answers it), " +
        "or raise callerLimits.maxSubscriptions where the host is served.",
    );
  }
}

/**
 * A caller (one page's port, one socket, one follower tab) already has `limit` calls in flight at this host, waiting
 * for their answers (decision 0148). Nothing ran. Retryable: there is room again once one of its calls is answered.
 */
export class TooManyCallsInFlight extends DurableError {
  override name = "TooManyCallsInFlight";
  constructor(
    readonly method: string,
    readonly limit: number,
  ) {
    super(
      `${method} was not run: this caller already has ${limit} calls waiting for their answers here (at most ${limit} at once). ` +
        "Nothing was done; send it again once one of them is answered (or raise callerLimits.maxCallsInFlight where the host is served).",
    );
  }
}
