/**
 * A harness object while it follows (decision 0031): the object's end of its follow links (`ObjectEnd`), started
 * once per instance on the copy; each follow frame through the caller's `follow.authorize`; the alarm at the lease's
 * expiry while another place holds it; and, after a hand-back to a tab (decision 0038), the instance's end in its
 * alarm. object.ts routes the follow socket's frames, its closing and the alarm here; follow.ts is the socket and the
 * object's SQLite rows.
 */
import { systemClock } from "../base/clock.ts";
import type { Json } from "../base/json.ts";
import { sha256Text } from "../base/sha256.ts";
import type { LeaseBook } from "../follow/arbiter.ts";
import { COPY } from "../follow/copy-writes.ts";
import type { LoggedBatch } from "../follow/handover.ts";
import { tellingFailures } from "../follow/object-door.ts";
import { ObjectEnd } from "../follow/object-end.ts";
import type { ObjectTopicHandler } from "../follow/object-end-options.ts";
import { SERVER_TOOLS_TOPIC } from "../follow/server-call-messages.ts";
import type { Harness } from "../harness.ts";
import type { OnAuthorizeError } from "../host/doors.ts";
import type { Storage } from "../storage/storage.ts";
import {
  claimsKept,
  type FollowOptions,
  followCaller,
  followConnection,
  followingSockets,
  keepClaimedPages,
  lastOfPlace,
  markFollowing,
  objectAnswers,
  refuseFollow,
  sendFollow,
  speaksFor,
} from "./follow.ts";
import type { DurableObjectState, DurableObjectStorage, HibernatableWebSocket } from "./types.ts";

export interface FollowingOptions {
  /** The object's place in the lease. */
  place: string;
  /** Where the lease's answers are kept (the object's storage, beside the book's record). */
  storage: DurableObjectStorage;
  /** The copy of the tab's log. */
  copy: Promise<Storage>;
  book: LeaseBook;
  /** Stores a pushed transaction through the copy's follower harness, so pages watching the copy see it. */
  apply(batch: LoggedBatch): Promise<void>;
  /** The takeover: opens the object's harness under the lease and starts it. */
  open(): Promise<Harness>;
  /** The tab's server tool calls (decision 0036), when the object serves them. */
  serverTools?: ObjectTopicHandler;
  /** What a following tab's writes are made through (topic `copy`, decisions 0096, 0097): the service pages get. */
  copyWrites?: ObjectTopicHandler;
  /** Pages whose sockets stayed through a hibernation subscribe again (to the copy). */
  restorePages(): void;
  /** Whether the object's harness is open here (it holds the lease). */
  holds(): boolean;
  /**
   * Whether the harness open here may no longer write under its lease: it lapsed while the object was idle (the
   * renewal is parked, decision 0052), or another place took it since. A release (a hand-back) is no lapse.
   */
  lapsed(): boolean;
  /** Told each time this instance's switch or lapse (`switching`) may have begun or ended: pages are told the status again. */
  switchMoved?(): void;
  /** Told when `follow.authorize` failed (threw anything but `NotAuthorized`; decision 0117, later). */
  onAuthorizeError?: OnAuthorizeError<Json>;
}

export class ObjectFollowing {
  /** The object's end of the follow links, once started on the copy. */
  readonly end: Promise<ObjectEnd>;
  /** The same, once started. */
  #started: ObjectEnd | undefined;
  readonly #ctx: DurableObjectState;
  readonly #follow: FollowOptions;
  readonly #holds: () => boolean;
  readonly #lapsed: () => boolean;
  readonly #authorizeFailed: OnAuthorizeError<Json> | undefined;
  readonly #switchMoved: (() => void) | undefined;
  #expiryAlarm: number | undefined;
  /** This instance handed the lease back to a tab: it ends after its answer (the next one follows). */
  #handedBack = false;
  /** This instance's lease lapsed while it held it (decision 0052): it ends in its alarm, as after a hand-back. */
  #ending = false;
  /** Another place was granted the lease while this instance's harness is open (`onSuperseded`, decision 0149). */
  #superseded = false;
  /** ... found in an event that is over (its writes stored): the next follow frame ends the instance, alarm or not. */
  #supersededBefore = false;

  constructor(ctx: DurableObjectState, follow: FollowOptions, options: FollowingOptions) {
    this.#ctx = ctx;
    this.#follow = follow;
    this.#holds = options.holds;
    this.#lapsed = options.lapsed;
    this.#authorizeFailed = options.onAuthorizeError;
    this.#switchMoved = options.switchMoved;
    // Follows until a release or the lease's expiry lets it take over: then the harness opens (`open`), its recovery
    // the new epoch's first transaction, and starts.
    this.end = ctx.blockConcurrencyWhile(async () => {
      const end = await ObjectEnd.start({
        place: options.place,
        newId: () => crypto.randomUUID(), // the core is given its random source (decision 0078)
        storage: await options.copy,
        book: options.book,
        answers: objectAnswers(options.storage),
        watchExpiry: false, // the alarm watches it (armExpiry): a pending timer would keep the object from hibernating
        ...(follow.keepLog === undefined ? {} : { keepLog: follow.keepLog }),
        // Handed back to a tab (decision 0038): this instance's harness is drained and closed, and its host serves
        // it; the object starts again as a follower (message() ends the instance once the answer is out).
        onHandedBack: () => {
          this.#handedBack = true;
        },
        onSwitch: () => this.#switchMoved?.(), // its pages' status says `opening` meanwhile (decision 0145)
        // A tab took the lapsed lease (decision 0149): this instance ends — in its alarm, or at the next follow frame.
        onSuperseded: () => {
          this.#superseded = true;
          this.ended();
        },
        clock: systemClock,
        apply: options.apply, // pages watching the copy see each push
        connection: (tab) => followConnection(ctx, tab), // the object's calls of its tab (decision 0037)
        // Claims made through a follow socket outlive this instance with the socket (decision 0051).
        claimedPages: (socket, pages) => keepClaimedPages(socket as HibernatableWebSocket, pages),
        open: options.open,
      });
      if (options.serverTools) end.serve(SERVER_TOOLS_TOPIC, options.serverTools); // the tab's server tools (decision 0036)
      if (options.copyWrites) end.serve(COPY, options.copyWrites); // a following tab's writes (decisions 0096, 0097)
      // Tabs that followed the object's last instance are pushed to again (decision 0038).
      for (const socket of followingSockets(ctx)) end.rejoin(socket, (frame) => sendFollow(socket, frame), followCaller(socket)?.place);
      for (const [socket, pages] of claimsKept(ctx)) end.restorePages(socket, pages);
      options.restorePages(); // pages that stayed through a hibernation watch the copy again
      return end;
    });
    this.end
      .then((end) => {
        this.#started = end;
        this.armExpiry();
      })
      .catch(() => {});
  }

  /**
   * Whether this instance is between harnesses, where pages are answered `NotReady`: in its switch after a hand-back
   * (`ObjectEnd.switching`; decision 0139), or holding a lease that lapsed while it was idle (decision 0143): its harness
   * is still open and serves reads, but its fence refuses writes `LeaseNotHeld` until the alarm ends the instance and the
   * next one takes the lease again — a keyed write sent again there is made once.
   */
  get switching(): boolean {
    return (this.#started?.switching ?? false) || this.#ending || (!this.#handedBack && this.#holds() && this.#lapsed());
  }

  /** A frame on a follow link: the object's end answers it; the expiry alarm follows the lease. */
  async message(socket: HibernatableWebSocket, caller: Json, message: string | ArrayBuffer): Promise<void> {
    if (this.#supersededBefore) {
      // Decision 0149: the lease is another place's and this instance's harness still open (its alarm is late, or
      // held), so its copy would answer the new holder NotReady for as long as it lives. This event has written
      // nothing: the instance ends here, the frame's socket with it; the tab connects again and its next instance,
      // which follows the tab, stores its pushes. The grant's writes (the record, the kept answer, the alarm) were made
      // in an earlier event, and this frame may come before they are confirmed: wait for them first (0149's review, L4).
      // A refused sync ends the instance too (0149's second review): living on would keep the superseded harness.
      await this.#ctx.storage.sync?.().catch(() => {});
      this.#ctx.abort("another place took the object's lapsed lease; its next instance follows it");
      return;
    }
    const end = await this.end.catch((error: unknown) => refuseFollow(socket, error));
    if (!end) return;
    const failed = this.#authorizeFailed;
    await end.receive(
      message,
      (frame) => sendFollow(socket, frame),
      tellingFailures(
        (action, place, request) =>
          request === undefined ? this.#follow.authorize(caller, action, place) : this.#follow.authorize(caller, action, place, request),
        failed && ((error, action) => failed(error, { caller, action, door: "follow" })),
      ),
      socket,
      (place) => speaksFor(socket, caller, place),
      callerKey(caller),
    );
    if (end.follows(socket)) markFollowing(socket);
    if (this.#handedBack || this.ended()) {
      // The instance ends in the alarm, an event of its own: an abort here would drop this event's writes (the
      // drain and the release). The next instance starts as a follower (the copy, the record released to the tab,
      // the expiry alarm); a tab that missed the answer asks again there and gets the same release.
      await this.#ctx.storage.setAlarm(systemClock.now());
      this.#supersededBefore = this.#superseded;
      return;
    }
    this.armExpiry();
  }

  /** A follow socket closed: the object's calls waiting on its place are lost, and nothing more is pushed to it. */
  async closed(socket: HibernatableWebSocket): Promise<void> {
    const place = lastOfPlace(this.#ctx, socket);
    const end = await this.end.catch(() => undefined);
    if (place !== undefined) end?.closed(place);
    end?.drop(socket);
  }

  /**
   * The alarm, while this object follows: after a hand-back it ends the instance; otherwise it is the lease's expiry
   * (or an earlier one): the object takes over if it passed. Resolves whether the harness's own alarm rules now.
   */
  async alarm(): Promise<boolean> {
    if (this.#handedBack) {
      this.#ctx.abort("the lease was handed back to a tab; the object follows again");
      return false;
    }
    if (this.#ending || (this.#holds() && this.#lapsed())) {
      // Ended here, in an event of its own (the platform runs a failed alarm again, on the next instance): that one
      // takes the lease under a new epoch when it is still the object's, or follows the place that took it.
      this.#ending = true;
      this.#ctx.abort("the object's lease lapsed while it was idle; its next instance takes it again");
      return false;
    }
    if (this.#holds()) return true;
    this.#expiryAlarm = undefined;
    await (await this.end).checkExpiry();
    if (this.#holds()) return true;
    this.armExpiry();
    return false;
  }

  /**
   * Whether this instance ends because its harness may no longer write under its lease (decision 0052): an idle
   * holder's lease lapsed, or another place took it. Its alarm is set now to end it there, in an event of its own
   * (the next instance takes the lease again, or follows). Serves nothing more from the harness meanwhile.
   */
  ended(): boolean {
    if (this.#ending) return true;
    if (this.#handedBack || !this.#holds() || !this.#lapsed()) return false;
    this.#ending = true;
    void this.#ctx.storage.setAlarm(systemClock.now());
    this.#switchMoved?.(); // its pages are told `opening` (decision 0145): the lapse is known at the first event after it
    return true;
  }

  /**
   * While another place holds the lease, the alarm is at its expiry: an object evicted meanwhile is woken then and
   * takes the lease over (its timers did not survive the eviction). Once it holds the lease, ObjectAlarm rules.
   */
  armExpiry(): void {
    if (this.#holds()) return;
    void this.end.then((end) => {
      const at = end.expiresAt;
      if (this.#holds() || at === undefined || at === this.#expiryAlarm) return;
      this.#expiryAlarm = at;
      void this.#ctx.storage.setAlarm(at + 1);
    });
  }
}

/**
 * The authenticated caller as one bounded key (decision 0064): the snapshot limits count per caller, not per place
 * name the caller declares. A hash, so a large caller value costs the object 64 characters a remembered caller.
 */
export function callerKey(caller: Json): string {
  return sha256Text(JSON.stringify(caller) ?? "null");
}
