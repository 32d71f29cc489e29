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

import { type Clock, systemClock } from "../base/clock.ts";
import { BACKGROUND_CONTEXT } from "../base/context.ts";
import type { Json } from "../base/json.ts";
import { LeaseNotHeld, StaleEpoch } from "../errors.ts";
import { LEAVING_GRACE_MS, type LeaseArbiter, type LeaseGrant } from "../follow/arbiter.ts";
import { Follower } from "../follow/follower.ts";
import { deliverFork, type LogHistory } from "../follow/fork.ts";
import { answerForwarded } from "../follow/forwarding.ts";
import { FollowLink } from "../follow/link-client.ts";
import { Mirror, remoteArbiter } from "../follow/mirror.ts";
import { DEVICE_PAGE_CALLS, linkPageCalls, PAGE_CALLS, PageCallRelay } from "../follow/page-call-relay.ts";
import { linkServerCalls } from "../follow/server-call-client.ts";
import { rebuildFromObject } from "../follow/snapshot.ts";
import type { LeaseHolder } from "../follow/wire.ts";
import type { Harness } from "../harness.ts";
import { runWaitingNow } from "../storage/sqlite/wasm/event-loop.ts";
import type { Storage } from "../storage/storage.ts";
import { CLOSE_WAIT_MS, settledWithin, unanswered } from "./follow-leaving.ts";
import type { FollowObjectOptions, FollowPlace, LeavingTicket, TabFollow } from "./follow-options.ts";
import { unreachable } from "./follow-unreachable.ts";
import { followingWrites } from "./follow-writes.ts";
import { RebuildRetry, rebuildTriesOf } from "./rebuild-retry.ts";
import type { SocketLike } from "./socket.ts";

export type { FollowObjectOptions, TabFollow } from "./follow-options.ts";

/** Opens the worker's follow link to the object at `options.url`. */
export function followObject(options: FollowObjectOptions, clock: Clock = systemClock): TabFollow {
  const tries = rebuildTriesOf(options.rebuildTries);
  const url = options.url.replace(/^http/, "ws");
  let place = typeof options.place === "string" ? options.place : "tab";
  const ready = Promise.resolve(options.place).then((named) => {
    if (named !== undefined) place = named;
  });
  const connect = options.connect ?? ((target: string) => new WebSocket(target) as SocketLike);
  let socket: SocketLike | undefined;
  let closed = false;
  /** The reconnect's timer while one waits (cancelled by `close()`: decision 0133). */
  let reconnect: (() => void) | undefined;
  let failures = 0;
  /** The socket opened at least once in this worker (before, a failure is said once: the address may be wrong). */
  let everOpened = false;
  let mirror: Mirror | undefined;
  let follower: Follower | undefined;
  let harness: Harness | undefined;
  /** Told each time the host attaches a harness (its first, or one rebuilt after the copy could not follow). */
  const attachListeners = new Set<() => void>();
  const forkListeners = new Set<() => void>();
  const holderListeners = new Set<(holder: LeaseHolder | undefined) => void>();
  const followingListeners = new Set<() => void>();
  // The page's own leaving (decision 0101): where the object stands while this tab holds the lease, for its page.
  const ticketListeners = new Set<(ticket: LeavingTicket | undefined) => void>();
  const tellTicket = (ticket: LeavingTicket | undefined) => {
    for (const listener of [...ticketListeners]) listener(ticket);
  };
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
    reconnect = undefined;
    if (closed) return;
    const ws = (socket = connect(url));
    let lost = false;
    ws.addEventListener("open", () => {
      failures = 0;
      everOpened = true;
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
      if (!everOpened && failures === 0 && !closed) unreachable(url);
      if (!closed) reconnect = clock.setTimer(Math.min(10_000, 250 * 2 ** failures++), open);
    };
    ws.addEventListener("close", drop);
    ws.addEventListener("error", drop);
  };
  open();
  /**
   * After a rebuild that failed on something that passes by itself, the copy asks again on a timer (decision 0070),
   * at most `rebuildTries` (default `REBUILD_TRIES`) times in a row (decision 0078). Before 0070 only a reconnect did: a tab whose take the
   * object refused as `busy` stayed on its forked copy with the link up, until the next load.
   */
  const retry = new RebuildRetry(clock, {
    tries,
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
  const leaveWatch = { clock, link, drops, closed: () => closed, expiresAt: () => expiresAt };
  /** The page's leave under way (settled: undefined): a close lets its answer come first, within a bound. */
  let leaveUnderWay: Promise<unknown> | undefined;
  /** The close's end, once asked: the link ends after what the tab stored reached the object, or the bound passed. */
  let closing: Promise<void> | undefined;
  /** The wait for that delivery (`drain()`), and whether it ended. */
  let draining: Promise<void> | undefined;
  let drained = false;

  /** Another place holds the lease and runs the work: `opened`, a read-only copy, follows it live (decision 0038). */
  const followWith = (opened: Harness) => {
    // A copy that cannot (its log left the object's history) keeps its fork for the app (decision 0039).
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
  };
  /**
   * A leave gave the lease up, the object's answer not here (decision 0125): a copy opened meanwhile reads, and follows
   * once it came — its `follow.from` could reach the object before the rest and the release and read it as forked.
   */
  let answerAwaited = false;
  /** The leave settled: the copy opened meanwhile follows the object now. */
  const answered = () => {
    answerAwaited = false;
    if (harness?.readOnly && !harness.closed && !follower) followWith(harness);
  };

  const rebuild = {
    when: (listener: () => void) => void cannotFollow.add(listener),
    stopped: (listener: (tries: number, error: unknown) => void) => void rebuildStopped.add(listener),
    again: () => retry.again(),
    closesCopy: true as const,
    async run(storage: Storage, closeCopy?: () => Promise<void>) {
      follower?.stop();
      follower = undefined;
      try {
        const fetched = closeCopy ? { fetched: closeCopy } : {};
        await rebuildFromObject({ storage, link, place, now: clock.now(), clock, ...fetched }, BACKGROUND_CONTEXT);
        retry.succeeded();
      } catch (error) {
        retry.failed(error);
        throw error;
      }
    },
  };

  const drain = (): Promise<void> => {
    if (draining) return draining;
    const waits: Promise<unknown>[] = [];
    const last = harness?.lease?.position;
    if (mirror && last !== undefined && !mirror.refused && mirror.acknowledged < last)
      waits.push(mirror.whenAcknowledged(last, BACKGROUND_CONTEXT));
    if (leaveUnderWay) waits.push(leaveUnderWay);
    if (waits.length === 0) drained = true; // nothing to deliver: `close` shuts in this tick
    draining = settledWithin(clock, Math.min(CLOSE_WAIT_MS, expiresAt - clock.now()), waits).then(() => void (drained = true));
    return draining;
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
      for (const listener of [...attachListeners]) listener();
      // Writes another device made at the object's copy, forwarded to the holder (decision 0034): checked there as
      // hostile, refused by a read-only harness (ReadOnlySession) when this tab does not hold the lease.
      link.serve(
        "forward",
        (method, args) => answerForwarded(opened, { method, args }, BACKGROUND_CONTEXT) as Promise<unknown> as Promise<Json>,
      );
      mirror?.stop();
      follower?.stop();
      mirror = follower = undefined;
      tellTicket(undefined);
      if (opened.readOnly || !opened.lease) {
        // Opened while a leave waits for the object's answer: read now, followed once it settles (see `leave`).
        if (!answerAwaited) followWith(opened);
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
      const mirrored = mirror;
      const told = (position: number) => {
        const lease = opened.lease;
        if (mirror === mirrored && lease && !opened.closed) tellTicket({ url, place, epoch: lease.epoch, position: Math.max(0, position) });
      };
      mirrored.onAcknowledged(told);
      told(mirrored.acknowledged);
    },
    async takeBack() {
      const following = follower;
      if (!following) throw new LeaseNotHeld(place, "this tab does not follow its object (it runs here, or its copy forked)");
      await following.takeBack(BACKGROUND_CONTEXT);
      sentAway = false;
      following.stop();
      if (follower === following) follower = undefined;
    },
    leave(handedOver) {
      const leaving = mirror;
      // Offline, nothing of a hand-over can reach the object: the page goes as a crash goes (a takeover lease then
      // expires at the object; a pinned one is the tab's still, and its next load writes on under it, decision 0039).
      if (!link.up) return Promise.resolve(false);
      tellTicket(undefined);
      if (!leaving || harness?.closed) return Promise.resolve(false); // closed: its mirror stays for the close to stop (0136)
      mirror = undefined;
      // Within the task the page's `pagehide` gave us: the head at once (the transaction being stored included),
      // then the rest and the release sent in the same tick (Mirror.leave's eager path).
      const left = harness!
        .handOver(BACKGROUND_CONTEXT, { drain: false })
        .then((mark) => {
          sentAway = true;
          answerAwaited = true;
          const settled = unanswered(leaveWatch, leaving.leave(mark, BACKGROUND_CONTEXT), mark, () => leaving.stop()).finally(answered);
          handedOver?.(); // the rest and the release sent, or queued behind a read of the durable tail (review of 0125, L5)
          return settled;
        })
        .then(() => true);
      const underWay: Promise<void> = left
        .catch(() => {})
        .then(() => {
          if (leaveUnderWay === underWay) leaveUnderWay = undefined;
        });
      leaveUnderWay = underWay;
      // A storage operation that waits for the event loop to turn (the connection's starvation wait) would hold the
      // commit line, and the release behind it, until a second task this page's worker may never get: it goes on now.
      runWaitingNow();
      return left;
    },
    leavingSaid(epoch, agoMs) {
      const current = holding();
      const saidAt = clock.now() - Math.max(0, Number.isFinite(agoMs) ? agoMs : 0);
      // Said only at `pagehide`, just before its `leave()`: a worker fenced by it has been sent away as surely as one
      // whose release went out, so `returnWhenOnline` does not take the lease back (decision 0113, after review).
      if (current?.leaving(epoch, saidAt + LEAVING_GRACE_MS)) sentAway = true;
    },
    ...followingWrites(
      (topic, method, args) => link.call(topic, method, args),
      {
        current: () => harness,
        onAttach: (listener) => {
          attachListeners.add(listener);
          return () => attachListeners.delete(listener);
        },
      },
      clock,
    ),
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
    onLeavingTicket(listener) {
      ticketListeners.add(listener);
      return () => ticketListeners.delete(listener);
    },
    onFork(listener) {
      forkListeners.add(listener);
      return () => forkListeners.delete(listener);
    },
    onHolder(listener) {
      holderListeners.add(listener);
      return () => holderListeners.delete(listener);
    },
    // Nothing of the link outlives it (decision 0133): no reconnect, no frame, no timer; calls and a leave under way
    // reject `HarnessClosed`. Before, a reconnect's timer, the link's resends and a leave's expiry went on. First, what
    // the tab stored reaches the object, within a link call's bound and the lease's expiry (review of 0133, H1): the
    // harness's last commits, and a leave's rest and answer. Before, they were cut, and became the tab's fork.
    // The host's close awaits it before the storage closes and the database's lock goes (review of 0133, M1: not after).
    drain: () => drain(),
    close() {
      if (closing) return closing;
      const shut = () => {
        closed = true;
        tellTicket(undefined);
        retry.close();
        mirror?.stop();
        follower?.stop();
        reconnect?.();
        reconnect = undefined;
        const open = socket;
        socket = undefined;
        link.close();
        for (const check of [...drops]) check();
        open?.close(1000, "the worker closed its harness");
      };
      const delivered = drain();
      if (drained) shut(); // nothing (more) to deliver: closed in this tick
      closing = drained ? Promise.resolve() : delivered.then(shut);
      return closing;
    },
  };
}
