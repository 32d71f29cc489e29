/**
 * What the object's end of follow links (`ObjectEnd`, object-end.ts) is given and asks: its options, the door a
 * caller's frames go through (`FollowAuthorize`, with what the object reads for it: `FollowRequest`, decision 0051),
 * and the stores the platform keeps for it.
 */
import type { Clock } from "../base/clock.ts";
import type { IdSource } from "../base/ids.ts";
import type { Json } from "../base/json.ts";
import type { Harness, LeaseOptions } from "../harness.ts";
import type { LogMark } from "../storage/records.ts";
import type { Storage } from "../storage/storage.ts";
import type { LeaseBook } from "./arbiter.ts";
import type { LoggedBatch } from "./handover.ts";
import type { SnapshotLimits } from "./snapshot-limit.ts";
import type { FollowTopic } from "./wire.ts";

/** What a caller asks of the object on a follow link, for `authorize`. */
export type FollowAction = "push" | "release" | `${string}.${string}`;

/**
 * Whether the connection's caller may do `action` (false, or a thrown `NotAuthorized`, refuses it; any other throw, the
 * library's errors included, is `AuthorizeFailed`, retryable — decision 0117 and its second review). `place` is the
 * place the frame speaks for when it names one — a push's or release's `from`, the first argument of `lease.*` and
 * `follow.*` calls, the `place` of a `server-tools.call` request — so an app can bind a caller to its own place
 * (another device must not take or hand back the lease, or have server tools run, under this tab's name).
 */
export type FollowAuthorize = (action: FollowAction, place?: string, request?: FollowRequest) => boolean | Promise<boolean>;

/**
 * What else the door is told about a call, read by the object rather than taken from the caller (decision 0051).
 * For `page-calls.claimPageCall` and `page-calls.answerPageCall`: `conversationId`, the conversation whose page tool
 * call it is — present only when the harness that holds the lease here has that call in the conversation the call
 * names (else the call would find nothing there) — so an app can grant page calls per conversation; and `place` (the
 * door's second argument) is the place the connection follows or speaks for, when it named one. For `copy.submit`,
 * `copy.decide` and `copy.abortConversation` (a following tab's writes, decisions 0096, 0097): `conversationId`, the conversation the call names — the one the
 * caller asks to write to, so an app grants it per conversation as it grants a page's submit — and `place` the place
 * the connection follows.
 */
export interface FollowRequest {
  conversationId?: number;
}

/**
 * Told which place a connection speaks for: its caller may push, and it pushed for that place or was granted its
 * lease (the platform keeps it with the connection, so `ObjectEndOptions.connection` finds it after a hibernation).
 */
export type SpeaksFor = (place: string) => void;

/**
 * Serves the tab's calls of one topic besides `lease` (server tool calls, say). `caller` is who asks: the platform's
 * authenticated caller (`caller:<key>`) when it named one, else the connection — for a handler that bounds what one
 * caller may have waiting (topic `copy`, decision 0097).
 */
export type ObjectTopicHandler = (method: string, args: Json[], caller: unknown) => Promise<Json> | Json;

export interface ObjectEndOptions {
  /** This place's name ("object"). */
  place: string;
  /** The copy of the log. */
  storage: Storage;
  /** The lease's arbiter, whose record this place stores. */
  book: LeaseBook;
  clock: Clock;
  /** The random part of the ids this object mints (its calls of tabs, its snapshots; decision 0078). Default `randomIds`. */
  newId?: IdSource;
  /** Opens the harness under `lease` on the copy and starts it (the takeover: recovery as after a crash). */
  open(storage: Storage, lease: LeaseOptions): Promise<Harness>;
  /** The link's topics (default `FOLLOW_TOPICS`). */
  topics?: Readonly<Record<string, FollowTopic>>;
  /** Stores one pushed transaction in the copy (default `storage.apply`; a follower harness's, so views update). */
  apply?(batch: LoggedBatch): Promise<void>;
  /**
   * Where lease answers are kept by request id beyond this instance (the object's SQLite), so a duplicate call
   * that reaches the next instance gets the answer the first one gave — above all an `acquire`'s grant, which
   * would otherwise mint another epoch. Default: in memory only.
   */
  answers?: AnswerStore;
  /** Whether a timer on `clock` watches the lease's expiry (default true; an object's alarm does it instead). */
  watchExpiry?: boolean;
  /**
   * Told when this place handed the lease back to a tab (`lease.handBack`, decision 0038): its harness stopped
   * writing at `position` (drained, closed) and the release to the tab is recorded; this place follows again.
   */
  onHandedBack?(mark: LogMark): void;
  /**
   * Told each time this place's switch (`ObjectEnd.switching`) may have begun or ended — the hand-back's drain begins or
   * ends, the lease was released — so that its pages are told the status again (decision 0145: `opening` meanwhile).
   */
  onSwitch?(): void;
  /**
   * Told once when another place was granted the lease while this place's harness is open here (an idle object's lease
   * lapsed, decision 0052, and a tab took it): that harness writes nothing more, and while it is open this place answers
   * the new holder's pushes `NotReady` (decision 0145). The platform ends this instance then — drops or closes its
   * harness and starts the next `ObjectEnd` on the copy, which follows the new holder and stores its pushes, each once
   * (decision 0149; Cloudflare aborts the instance). Keep this instance's lease answers for the next one
   * (`ObjectEndOptions.answers`): a repeated call must be answered the same there, not granted again. Without this hook
   * the new holder is answered `NotReady` while this instance lives. Not told while this place's own takeover is still opening its harness (it holds no epoch yet): that open
   * ends read-only and this instance follows on, or it is found superseded at the new holder's next push.
   */
  onSuperseded?(): void;
  /**
   * The open connection of `place` (the platform's: the newest that spoke for it, see `SpeaksFor`), for this
   * object's calls of the tab. Default: the connection that last spoke for it to this instance.
   */
  connection?(place: string): ((frame: string) => void) | undefined;
  /**
   * Told the pages whose page tool calls were claimed through `connection` (`page-calls`, decision 0044) each time
   * they change, for the platform to keep with the connection (a follow socket's attachment): its next instance opens
   * the harness with them among `connectedPages` and gives them back to `restorePages`, so a claim made through a
   * follow socket lives as long as the socket, across instances, as a page socket's does (decision 0051).
   */
  claimedPages?(connection: unknown, pages: readonly string[]): void;
  /** Transactions the log's tail keeps behind the head while this place holds the lease (`FeedOptions.keepLog`). */
  keepLog?: number;
  /** Bytes of transactions one round of pushes to a lagging tab reads, and the feed keeps in memory (`FeedOptions.roundBytes`). */
  roundBytes?: number;
  /** How often each caller, and all together, may have a new snapshot taken (decision 0053; `SnapshotLimits`). */
  snapshotLimits?: SnapshotLimits;
}

/** Lease answers by request id, kept where the lease's record is (synchronous, as the record's own load/save). */
export interface AnswerStore {
  get(id: string): Json | undefined;
  put(id: string, answer: Json): void;
}
