/**
 * What `followObject` (follow.ts) is given and returns: the worker's follow options (`serveHarness({ follow })`) and the
 * follow link as the worker's host uses it. Moved out of follow.ts.
 */
import type { ServerCallPort } from "../agent/server-port.ts";
import type { ApprovalRecord, Decision } from "../agent/tasks/approvals.ts";
import type { SubmissionDraft } from "../agent/types.ts";
import type { LogHistory } from "../follow/fork.ts";
import type { PageCallPort } from "../follow/page-call-relay.ts";
import type { LeaseHolder } from "../follow/wire.ts";
import type { Harness, LeaseOptions } from "../harness.ts";
import type { Storage } from "../storage/storage.ts";
import type { SocketLike } from "./socket.ts";

export interface FollowObjectOptions {
  /** The object's follow link: the URL of its `/follow` socket (ws:, wss:, http: or https:). */
  url: string;
  /**
   * This tab's name in the lease (the object calls itself "object"; bind it in the object's `follow.authorize`). In
   * `serveHarness` the default is this browser's own, `devicePlace()`: `tab-<random id>` kept in the origin's private
   * file system, the same across reloads and tabs, another in another browser (decision 0046). A promise is waited
   * for before the harness opens (`TabFollow.ready`). Default here "tab".
   */
  place?: string | Promise<string>;
  /**
   * Told once when this tab's copy cannot follow the object (decision 0038): its log left the object's history
   * (`findFork(storage, theirs)` names the fork) or is behind what the object keeps. The copy then applies nothing.
   */
  onForked?(theirs: LogHistory): void;
  /**
   * Take the lease back by itself (decision 0044): whenever this tab follows its object with the link up — it loaded
   * while the object ran, or came back online after the object took over — the worker asks for the lease back, as
   * `client.runHere()` does. Not after the page's own `client.leave()`: a page that moved the agent to the object keeps
   * it there until it runs here again or loads anew. Default false: the agent stays where it runs until the page asks. Give one tab per place
   * this option (two that both take it back hand the lease to and fro).
   */
  returnWhenOnline?: boolean;
  /**
   * Rebuild this tab's copy from the object's snapshot by itself when it cannot follow (decision 0047): its copy
   * forked (the fork is kept first, and stays), is behind the object's trimmed log, or is a new device's. The worker
   * closes its read-only harness, replaces the copy in one transaction, opens it again (the page's views move) and
   * follows the object live. A failed rebuild is tried again on a timer (decision 0070) at most `rebuildTries` times
   * in a row, then after the link reconnects or the page's `retryRebuild()` (decision 0078). Default true (decision 0053,
   * after the Chromium test `e2e/rebuild.e2e.ts`); `false`: the copy stays as it is and follows nothing (the fork is
   * still kept, and `onForked` told).
   */
  rebuild?: boolean;
  /**
   * Failed rebuilds in a row (of failures that pass by themselves, retried 1 s doubling to 30 s apart) after which the
   * worker stops rebuilding by itself and the ready status says `rebuild: { kind: "stopped", … }` until a reconnect or
   * the page's `retryRebuild()`. A whole number from 1 to 1,000; anything else is refused with `InvalidSetting` when
   * the worker starts. Default 8 (about two minutes).
   */
  rebuildTries?: number;
  /** For tests: how the worker opens its socket (default the runtime's `WebSocket`). */
  connect?: (url: string) => SocketLike;
}

/** Where the agent of a following tab runs now. */
export type FollowPlace = "here" | "elsewhere";

/** A worker's follow link, as `serveHarness` wires it. */
/**
 * What the page needs to say, on a socket of its own, that it is leaving (decision 0101): the follow address (the
 * worker's own, token included: the page's code gave it), this tab's place, the epoch it holds and `position`, the
 * object's acknowledged head. The worker tells its own page each time it moves, and `undefined` once it holds no lease.
 */
export interface LeavingTicket {
  url: string;
  place: string;
  epoch: number;
  position: number;
}

export interface TabFollow {
  /** `HarnessOptions.lease` for the worker's harness: this tab's place, the object as the arbiter. */
  readonly lease: LeaseOptions;
  /** Resolves once this tab's place is known (open the harness after it: the lease names it). */
  readonly ready: Promise<void>;
  /**
   * `HarnessOptions.serverCalls` for the worker's harness: a tool declared `runsOn: "server"` is asked of the object
   * over the link while this tab holds the lease (decision 0036), never run in the tab.
   */
  readonly serverCalls: ServerCallPort;
  /**
   * Where the page's page tool calls go while the object runs the conversation (decision 0044): claimed, answered
   * and released at the object, over the link; undefined while this tab runs it (its own harness answers).
   */
  readonly pageCalls: PageCallPort | undefined;
  /**
   * Hears each time this tab starts following its object with the link up (a load while the object runs, each
   * reconnection after): the moment `returnWhenOnline` takes the lease back. Not after this page's own `leave()` (it
   * moved the agent to the object on purpose) until it takes the lease back. Returns the function that stops it.
   */
  onFollowing(listener: () => void): () => void;
  /**
   * Hears, while this tab holds the lease and mirrors it, where the object stands (`LeavingTicket`, at each
   * acknowledgement that moves its head), and `undefined` when it stops holding it (decision 0101). Returns the
   * function that stops listening.
   */
  onLeavingTicket(listener: (ticket: LeavingTicket | undefined) => void): () => void;
  /** The harness opened: mirrors it when it holds the lease. */
  attach(harness: Harness): void;
  /**
   * The page leaves (its `pagehide`, or the app moves the agent to the object): hands the lease to the object at once,
   * when this tab holds it. Everything a leaving page may still send goes in this task; the promise resolves true
   * once the object says it took the lease (a page that stays may then follow it, below), false when there was
   * nothing to hand over (this tab does not hold the lease, or the link is down: offline the page goes as a crash
   * goes). A page that closes never hears the answer, and needs none. `handedOver` is told once the harness gave the
   * lease up (it stops; the rest and the release sent, or queued behind a read of the log's tail), before the object answers: the host opens its copy again
   * read-only then, so its page's reads never wait on the link (decision 0125). A copy attached before the answer
   * follows the object only once the leave settled (the object took the lease, or refused the rest).
   */
  leave(handedOver?: () => void): Promise<boolean>;
  /**
   * The page said `lease.leaving` under `epoch` on its own socket `agoMs` ago (decision 0101): the object takes the
   * lease over a grace (`LEAVING_GRACE_MS`) after it heard it, so this tab's harness writes nothing from a grace after
   * the word went out (decision 0113: counted from before it was sent, so it stops before the object may take over),
   * and is then opened again read-only and follows, as after any lost lease. Said before `leave()`, whose release,
   * when it comes within the grace, hands the lease over as before. Nothing when the harness holds no lease of `epoch`,
   * or a pinned one (the object does not take a pinned lease at the word). A tab it fenced counts as sent away: it does
   * not take the lease back by itself (`returnWhenOnline`).
   */
  leavingSaid(epoch: number, agoMs: number): void;
  /**
   * Asks the object for the lease back (decision 0038) while this tab follows it: resolves once the object released
   * it to this tab and the copy holds everything up to the release; the caller then opens the harness again under
   * the lease (the host does: `runHere`). `LeaseNotHeld` when this tab does not follow (it runs here, or forked).
   */
  takeBack(): Promise<void>;
  /**
   * Submits `draft` through the object while this tab follows it (decision 0096): forwarded to the holder under its
   * `requestId` (minted when it has none); resolves with the submission's id once this tab's copy holds it.
   */
  submit(conversationId: number, draft: SubmissionDraft): Promise<number>;
  /**
   * Decides a waiting tool call through the object while this tab follows it (decision 0097): forwarded to the holder
   * under its `decisionId` (minted when it has none); resolves with the approval record once this tab's copy no
   * longer shows the call waiting. The holder's errors as its own (`AlreadyDecided`, `NoPendingApproval`, …).
   */
  decide(conversationId: number, call: string | number, decision: Decision): Promise<ApprovalRecord>;
  /**
   * Stops the conversation's run and compactions through the object while this tab follows it (decision 0097);
   * resolves once this tab's copy shows the ones it saw ended.
   */
  abortConversation(conversationId: number): Promise<void>;
  /** Where the agent runs: here while this tab's harness holds the lease, elsewhere otherwise. */
  readonly place: FollowPlace;
  /**
   * Hears each fork this tab found and kept (decision 0039): its push refused as stale (the object took over while
   * it was away), or its lease refused at open with transactions the object's history lacks. Read them with
   * `listForks(harness.storage)`. Returns the function that stops listening.
   */
  onFork(listener: () => void): () => void;
  /**
   * Hears who holds the lease each time the object says it while this tab follows (decision 0057): its `follow.from`
   * answer and its pushes, from the object's own lease record. Returns the function that stops listening.
   */
  onHolder(listener: (holder: LeaseHolder | undefined) => void): () => void;
  /**
   * With `rebuild` (decision 0047): `when(listener)` hears each time this tab's copy cannot follow the object (after
   * its fork, if any, was kept); `run(storage, closeCopy)` replaces the copy from the object's snapshot — the worker's
   * host calls it while it opens its harness again, and `closeCopy` once the snapshot is fetched (decision 0127).
   * `stopped(listener)` hears when the worker stops asking by itself (decision 0078: `tries` failures in a row, the
   * last `error`); `again()` starts afresh (`retryRebuild()`).
   */
  readonly rebuild?: {
    when(listener: () => void): void;
    run(storage: Storage, closeCopy?: () => Promise<void>): Promise<void>;
    /** `run` calls `closeCopy` once the snapshot is fetched, before it changes the storage: the copy reads until then. */
    readonly closesCopy: true;
    stopped(listener: (tries: number, error: unknown) => void): void;
    again(): void;
  };
  /**
   * Stops the link (the worker's harness closed for good), once what the tab stored reached the object (its last
   * commits, a leave's rest and answer) or a link call's bound (15 s, and no later than the lease's expiry) passed.
   */
  close(): Promise<void>;
  /**
   * Resolves once what the tab stored reached the object, or the same bound passed, the link still up: the worker's
   * host awaits it before it closes the storage and lets the database's lock go (review of 0133, M1). `close` after it
   * waits no more.
   */
  drain(): Promise<void>;
}
