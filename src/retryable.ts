/**
 * Which of the library's errors are worth retrying. Every class in `./errors.ts` has an entry (the compiler
 * asks for one when a class is added): `true` when the same call, unchanged, may succeed later because what
 * stopped it passes by itself (a lock, a lost connection, a busy conversation, a worker being replaced);
 * `false` when trying again gives the same answer until the caller changes something (its arguments, its
 * options, the database, its code).
 *
 * A retryable error does not say the call had no effect: after `ConnectionLost` it may have run, so retry
 * only what is safe to run twice (reads, and creations with a key).
 */
import * as errors from "./errors.ts";

type ErrorClassName = {
  [K in keyof typeof errors]: (typeof errors)[K] extends abstract new (...args: never[]) => errors.DurableError ? K : never;
}[keyof typeof errors];

export const RETRYABLE: { readonly [K in ErrorClassName]: boolean } = {
  DurableError: false,
  ReadOnlySession: false,
  HarnessClosed: false,
  InvalidSetting: false,
  SchemaTooNew: false,
  // Open the file writable once: the same read-only open is refused until then.
  TasksBehindLog: false,
  DatabaseCorrupt: false,
  // Free space (or ask for persistent storage) first; the failed commit left no trace.
  StorageQuotaExceeded: false,
  DatabaseLocked: true,
  QueryNotReadOnly: false,
  QueryFailed: false,
  // The same statement over the same rows stops at the same limit: narrow it, or raise queryLimits.
  QueryLimitExceeded: false,
  NotFound: false,
  InvalidCommit: false,
  InvocationEnded: false,
  InvalidDefinition: false,
  StorageUnavailable: true,
  ConversationBusy: true,
  InvalidSubmission: false,
  // Past settings.limits or not JSON: the same value is refused again.
  InvalidInput: false,
  FileNotFound: false,
  InvalidPath: false,
  WorkerGone: true,
  ConnectionLost: true,
  NoHarnessProvider: false,
  UnsupportedChatRequest: false,
  NotReady: true,
  CrashSweepViolation: false,
  TaskKeyConflict: false,
  UnknownTaskKind: false,
  ToolCallEnded: false,
  CrashPointsOff: false,
  UnknownMethod: false,
  InvalidRequest: false,
  MethodNotServed: false,
  ImageUnavailable: false,
  ViewUpdateOutOfOrder: true,
  InvalidArguments: false,
  UnknownAppMethod: false,
  // The caller needs another identity or the app another policy; the same call is refused again.
  NotAuthorized: false,
  // The app's authorize hook failed (its bug, a store it reads that was down): no answer about this caller yet.
  AuthorizeFailed: true,
  // The caller holds its share of subscriptions: refused again until it unsubscribes one (decision 0148).
  TooManySubscriptions: false,
  // The caller's calls in flight are answered in time: then there is room (decision 0148).
  TooManyCallsInFlight: true,
  // Not the agent's own call (or its intent has not reached the object): the same ask is refused again.
  ServerCallNotInCopy: false,
  // The hand-over's outcome is the object's once the lease expired: reload, or runHere() once online.
  HandOverUnanswered: false,
  // A decision is final: once a call was decided, withdrawn or ended, deciding it again gives the same answer.
  AlreadyDecided: false,
  ApprovalWithdrawn: false,
  NoPendingApproval: false,
  ApprovalMismatch: false,
  // Another place holds a newer epoch: the same commit is refused again; take the lease again first.
  StaleEpoch: false,
  // The lease must be taken (or its arbiter reached) before a write can succeed.
  LeaseNotHeld: false,
  // The same position is refused again: send the one after the stored head.
  LogOutOfOrder: false,
  // The same malformed message is refused again: send one the follow link describes.
  FollowMessageRefused: false,
  // A tab and a Worker of different releases stay so until one is deployed again.
  FollowVersionMismatch: false,
  // The same call succeeds unchanged once the lease comes to this place (or made where the conversation runs).
  RunsElsewhere: true,
  // A new snapshot is served when asked again (the one asked for was displaced, or the object has a history by then).
  SnapshotUnavailable: true,
  // The object's parts limit refused every retry of one part: later, the limit has refilled.
  SnapshotPartsBusy: true,
  // The caller's writes waiting at the copy are answered in time (once the holder is reachable): then there is room.
  TooManyWaitingWrites: true,
  // A page tool call is claimed once and answered once: the same claim or result is refused again.
  PageCallTaken: false,
  PageCallEnded: false,
  PageClaimLost: false,
};

/** Whether `error` is one of the library's errors that is worth retrying (see `RETRYABLE`). */
export function isRetryable(error: unknown): boolean {
  if (!(error instanceof errors.DurableError)) return false;
  return Object.hasOwn(RETRYABLE, error.name) && RETRYABLE[error.name as ErrorClassName];
}
