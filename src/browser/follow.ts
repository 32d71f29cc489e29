/**
 * The tab's worker under its Durable Object's lease (`serveHarness({ follow: { url } })`, decisions 0031 and 0035):
 * a follow link from the worker to the object's `/follow` socket, the lease asked of the object over it, every
 * stored transaction pushed live while this tab holds the lease, and the hand-over when the page leaves.
 *
 * - Opened under the object's lease: granted, the tab runs the work and mirrors it, and before an external effect
 *   waits until the object acknowledged the commit that recorded it (`confirm`, decision 0032); refused (the object
 *   or another device holds it), the harness opens read-only (S5) and the agent runs there.
 * - Leaving (`pagehide`, told by the page's client): a leaving page's worker has about one task's worth of time
 *   (decision 0035), so it does not drain: it gives up writing at once at its head, sends what the object lacks and
 *   the release in the same task. The phases it cut stay `running`: the object counts their restarts, as after a
 *   crash. A tab that could not finish (a closed browser, a crashed renderer) is covered by the lease's expiry.
 * - Not holding the lease (the object runs the work), the read-only harness follows the object live: it applies
 *   every transaction the object stores (`Follower`, decision 0038), so the page's views move; a copy that left the
 *   object's history (a fork) follows nothing and `onForked` is told.
 * - The socket comes back by itself after a drop (doubling delays up to 10 s); the link sends again what was not
 *   answered, the mirror pushes what was not acknowledged.
 */

import type { ServerCallPort } from "../agent/server-port.ts";
import { type Clock, systemClock } from "../base/clock.ts";
import { BACKGROUND_CONTEXT } from "../base/context.ts";
import type { Json } from "../base/json.ts";
import { HandOverUnanswered, LeaseNotHeld, StaleEpoch } from "../errors.ts";
import type { LeaseArbiter, LeaseGrant } from "../follow/arbiter.ts";
import { Follower } from "../follow/follower.ts";
import { deliverFork, type LogHistory } from "../follow/fork.ts";
import { answerForwarded } from "../follow/forwarding.ts";
import { FollowLink } from "../follow/link-client.ts";
import { Mirror, remoteArbiter } from "../follow/mirror.ts";
import { DEVICE_PAGE_CALLS, linkPageCalls, PAGE_CALLS, type PageCallPort, PageCallRelay } from "../follow/page-call-relay.ts";
import { linkServerCalls } from "../follow/server-call-client.ts";
import { rebuildFromObject } from "../follow/snapshot.ts";
import type { LeaseHolder } from "../follow/wire.ts";
import type { Harness, LeaseOptions } from "../harness.ts";
import type { LogMark } from "../storage/records.ts";
import type { Storage } from "../storage/storage.ts";
import { RebuildRetry } from "./rebuild-retry.ts";
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
   * follows the object live. A failed rebuild is tried again on a timer (decision 0070) at most `REBUILD_TRIES` times
   * in a row, then after the link reconnects or the page's `retryRebuild()` (decision 0078). Default true (decision 0053,
   * after the Chromium test `e2e/rebuild.e2e.ts`); `false`: the copy stays as it is and follows nothing (the fork is
   * still kept, and `onForked` told).
   */
  rebuild?: boolean;
  /** For tests: how the worker opens its socket (default the runtime's `WebSocket`). */
  connect?: (url: string) => SocketLike;
}

/** Where the agent of a following tab runs now. */
export type FollowPlace = "here" | "elsewhere";

/** A worker's follow link, as `serveHarness` wires it. */
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
  /** The harness opened: mirrors it when it holds the lease. */
  attach(harness: Harness): void;
  /**
   * The page leaves (its `pagehide`, or the app moves the agent to the object): hands the lease to the object at once,
   * when this tab holds it. Everything a leaving page may still send goes in this task; the promise resolves true
   * once the object says it took the lease (a page that stays may then follow it, below), false when there was
   * nothing to hand over (this tab does not hold the lease, or the link is down: offline the page goes as a crash
   * goes). A page that closes never hears the answer, and needs none.
   */
  leave(): Promise<boolean>;
  /**
   * Asks the object for the lease back (decision 0038) while this tab follows it: resolves once the object released
   * it to this tab and the copy holds everything up to the release; the caller then opens the harness again under
   * the lease (the host does: `runHere`). `LeaseNotHeld` when this tab does not follow (it runs here, or forked).
   */
  takeBack(): Promise<void>;
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
   * its fork, if any, was kept); `run(storage)` replaces the copy from the object's snapshot — the worker's host calls
   * it between closing its harness and opening it again. `stopped(listener)` hears when the worker stops asking by
   * itself (decision 0078: `tries` failures in a row, the last `error`); `again()` starts afresh (`retryRebuild()`).
   */
  readonly rebuild?: {
    when(listener: () => void): void;
    run(storage: Storage): Promise<void>;
    stopped(listener: (tries: number, error: unknown) => void): void;
    again(): void;
  };
  /** Stops the link (the worker's harness closed for good). */
  close(): void;
}

/** Opens the worker's follow link to the object at `options.url`. */
export function followObject(options: FollowObjectOptions, clock: Clock = systemClock): TabFollow {
  const url = options.url.replace(/^http/, "ws");
  let place = typeof options.place === "string" ? options.place : "tab";
  const ready = Promise.resolve(options.place).then((named) => {
    if (named !== undefined) place = named;
  });
  const connect = options.connect ?? ((target: string) => new WebSocket(target) as SocketLike);
  let socket: SocketLike | undefined;
  let closed = false;
  let failures = 0;
  let mirror: Mirror | undefined;
  let follower: Follower | undefined;
  let harness: Harness | undefined;
  const forkListeners = new Set<() => void>();
  const holderListeners = new Set<(holder: LeaseHolder | undefined) => void>();
  const followingListeners = new Set<() => void>();
  // This page moved the agent to the object (`leave()` handed the lease over and the page stayed): following it
  // after that is not "the tab came back", so `onFollowing` stays quiet until the page takes the lease back.
  let sentAway = false;
  /** Told when the copy cannot follow (with `options.rebuild`); not again after a failed rebuild until it is retried. */
  const cannotFollow = new Set<() => void>();
  const rebuildStopped = new Set<(tries: number, error: unknown) => void>();
  /** Keeps this tab's fork against the object's history `theirs`, if it has one, and tells the listeners. */
  const findFork = (opened: Harness, theirs: LogHistory) =>
    deliverFork(opened.storage, theirs, clock.now())
      .then((kept) => {
        if (kept) for (const listener of forkListeners) listener();
      })
      .catch(() => {}); // a storage that closed meanwhile: the next open finds the fork again
  const link = new FollowLink({
    clock,
    newId: () => crypto.randomUUID(), // the core is given its random source (decision 0078)
    send: (frame) => {
      if (!socket) throw new Error("the follow link is down");
      socket.send(frame);
    },
  });
  const pageCalls = linkPageCalls({
    call: (topic, method, args) => link.call(topic, method, args),
    topic: PAGE_CALLS,
    stopped: () => closed,
  });
  const holding = () => (harness && !harness.readOnly && !harness.closed && mirror ? harness : undefined);
  // Page tool calls a device's page made at the object's copy while this tab holds the lease (decision 0044): the
  // link stands for those pages; when it drops, their claims are released here.
  const devicePages = new PageCallRelay(place, holding);
  link.serve(DEVICE_PAGE_CALLS, (method, args) => devicePages.call(method, args, link));

  const open = () => {
    if (closed) return;
    const ws = (socket = connect(url));
    let lost = false;
    ws.addEventListener("open", () => {
      failures = 0;
      link.connected();
    });
    ws.addEventListener("message", (event) => link.receive(event.data));
    const drop = () => {
      if (lost) return;
      lost = true;
      devicePages.dropped(link);
      if (socket === ws) socket = undefined;
      link.disconnected();
      for (const check of [...drops]) check();
      if (!closed) clock.setTimer(Math.min(10_000, 250 * 2 ** failures++), open);
    };
    ws.addEventListener("close", drop);
    ws.addEventListener("error", drop);
  };
  open();
  /**
   * After a rebuild that failed on something that passes by itself, the copy asks again on a timer (decision 0070),
   * at most `REBUILD_TRIES` times in a row (decision 0078). Before 0070 only a reconnect did: a tab whose take the
   * object refused as `busy` stayed on its forked copy with the link up, until the next load.
   */
  const retry = new RebuildRetry(clock, {
    up: () => !closed && link.up,
    // A follower that already found it cannot follow is told no more: ask for it here. One still asking tells it.
    ask: () => {
      if (follower?.forked) for (const listener of cannotFollow) listener();
    },
    stopped: (tries, error) => {
      for (const listener of rebuildStopped) listener(tries, error);
    },
  });
  link.onConnected(() => retry.again());

  // The lease's expiry as the tab's harness reckons it (the last grant's time from when it was asked), for a leave()
  // whose answer never comes (decision 0051).
  const remote = remoteArbiter(link);
  let expiresAt = Number.POSITIVE_INFINITY;
  const granted = async (asked: Promise<LeaseGrant>) => {
    const askedAt = clock.now();
    const grant = await asked;
    expiresAt = askedAt + grant.ttlMs;
    return grant;
  };
  const arbiter: LeaseArbiter = {
    acquire: (at, head, epoch) => granted(remote.acquire(at, head, epoch)),
    renew: (at, epoch) => granted(remote.renew(at, epoch)),
    release: (at, epoch, position, heir) => remote.release(at, epoch, position, heir),
  };
  /** Listeners for the link's drops (a leave that waits for its answer). */
  const drops = new Set<() => void>();
  /**
   * `leaving`, or `HandOverUnanswered` once the link is down past the lease's expiry (at the expiry, or at a drop after
   * it): the object takes the lease then, whether or not the release reached it. A pinned lease never expires: a
   * leave of one waits for the link (the lease is the tab's until the object answers).
   */
  const unanswered = (leaving: Promise<void>, mark: LogMark, stop: () => void): Promise<void> => {
    if (!Number.isFinite(expiresAt)) return leaving;
    return new Promise<void>((resolve, reject) => {
      let settled = false;
      let expired = false;
      const done = (outcome: () => void) => {
        if (settled) return;
        settled = true;
        cancel();
        drops.delete(check);
        outcome();
      };
      const check = () => {
        if (expired && !link.up) {
          stop();
          done(() => reject(new HandOverUnanswered(mark.position)));
        }
      };
      const cancel = clock.setTimer(Math.max(0, expiresAt - clock.now()), () => {
        expired = true;
        check();
      });
      drops.add(check);
      leaving.then(
        () => done(resolve),
        (error: unknown) => done(() => reject(error)),
      );
    });
  };

  const rebuild = {
    when: (listener: () => void) => void cannotFollow.add(listener),
    stopped: (listener: (tries: number, error: unknown) => void) => void rebuildStopped.add(listener),
    again: () => retry.again(),
    async run(storage: Storage) {
      follower?.stop();
      follower = undefined;
      try {
        await rebuildFromObject({ storage, link, place, now: clock.now(), clock }, BACKGROUND_CONTEXT);
        retry.succeeded();
      } catch (error) {
        retry.failed(error);
        throw error;
      }
    },
  };

  return {
    ready,
    ...(options.rebuild !== false ? { rebuild } : {}),
    lease: {
      // Read when the harness opens, after `ready`.
      get place() {
        return place;
      },
      arbiter,
      // Before an external effect the object must hold the commit that recorded it (decision 0032).
      confirm: (position, context) => (mirror ? mirror.whenAcknowledged(position, context) : Promise.resolve()),
      // A pinned lease is reopened offline at once: the worker's Web Lock says its previous incarnation is gone.
      resumePinned: true,
    },
    serverCalls: linkServerCalls(link, clock),
    attach(opened) {
      harness = opened;
      // Writes another device made at the object's copy, forwarded to the holder (decision 0034): checked there as
      // hostile, refused by a read-only harness (ReadOnlySession) when this tab does not hold the lease.
      link.serve(
        "forward",
        (method, args) => answerForwarded(opened, { method, args }, BACKGROUND_CONTEXT) as Promise<unknown> as Promise<Json>,
      );
      mirror?.stop();
      follower?.stop();
      mirror = follower = undefined;
      if (opened.readOnly || !opened.lease) {
        // Another place holds the lease and runs the work: this copy follows it live. A copy that cannot (its log
        // left the object's history) keeps its fork for the app (decision 0039).
        follower = new Follower({
          harness: opened,
          link,
          place,
          onForked: (theirs) => {
            // The fork is kept before anything rebuilds the copy: it is never lost (decision 0047).
            void findFork(opened, theirs).then(() => {
              if (options.rebuild !== false && !retry.waiting) for (const listener of cannotFollow) listener();
            });
            options.onForked?.(theirs);
          },
          onFollowing: () => {
            if (!sentAway) for (const listener of followingListeners) listener();
          },
          onHolder: (holder) => {
            // This tab's own record (an expired lease the object has not taken yet) is no other holder.
            const other = holder?.place === place ? undefined : holder;
            for (const listener of holderListeners) listener(other);
          },
        });
        return;
      }
      mirror = new Mirror({
        harness: opened,
        link,
        clock,
        // The object superseded this tab's epoch (it took over while the tab was away): the unpushed rest is a fork.
        onRefused: (error, theirs) => {
          if (error instanceof StaleEpoch) void findFork(opened, theirs);
        },
      });
    },
    async takeBack() {
      const following = follower;
      if (!following) throw new LeaseNotHeld(place, "this tab does not follow its object (it runs here, or its copy forked)");
      await following.takeBack(BACKGROUND_CONTEXT);
      sentAway = false;
      following.stop();
      if (follower === following) follower = undefined;
    },
    leave() {
      const leaving = mirror;
      // Offline, nothing of a hand-over can reach the object: the page goes as a crash goes (a takeover lease then
      // expires at the object; a pinned one is the tab's still, and its next load writes on under it, decision 0039).
      if (!link.up) return Promise.resolve(false);
      mirror = undefined;
      if (!leaving || harness?.closed) return Promise.resolve(false);
      // Within the task the page's `pagehide` gave us: the head at once (the transaction being stored included),
      // then the rest and the release sent in the same tick (Mirror.leave's eager path).
      return harness!
        .handOver(BACKGROUND_CONTEXT, { drain: false })
        .then((mark) => {
          sentAway = true;
          return unanswered(leaving.leave(mark, BACKGROUND_CONTEXT), mark, () => leaving.stop());
        })
        .then(() => true);
    },
    get place(): FollowPlace {
      return holding() ? "here" : "elsewhere";
    },
    get pageCalls() {
      return holding() ? undefined : pageCalls;
    },
    onFollowing(listener) {
      followingListeners.add(listener);
      return () => followingListeners.delete(listener);
    },
    onFork(listener) {
      forkListeners.add(listener);
      return () => forkListeners.delete(listener);
    },
    onHolder(listener) {
      holderListeners.add(listener);
      return () => holderListeners.delete(listener);
    },
    close() {
      closed = true;
      retry.close();
      mirror?.stop();
      follower?.stop();
      socket?.close(1000, "the worker closed its harness");
    },
  };
}
