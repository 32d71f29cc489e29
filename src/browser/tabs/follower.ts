/// <reference lib="webworker" />
/** The follower's side of every tab being live (./wire.ts): the page's endpoint over its own worker and the leader's. */

import { type Clock, systemClock } from "../../base/clock.ts";
import { safely } from "../../base/safely.ts";
import { ConnectionLost } from "../../errors.ts";
import { type HostEndpoint, refusalOf, type SubscriptionLost } from "../../host/endpoint.ts";
import { hostWaitingFor } from "../../host/error-wire.ts";
import { cancelPending, pendingSubscription } from "../../host/pending-subscription.ts";
import type { HarnessStatus } from "../../host/protocol.ts";
import { isRetryable } from "../../retryable.ts";
import { type Bound, OWN, PlaceWaits, sendCall, type Target, type Way } from "./calls.ts";
import { followLeaders } from "./leaders.ts";
import type { Link } from "./link.ts";
import { pastOwnDoor } from "./own-door.ts";
import { OwnLeaves } from "./own-left.ts";
import { watchStatus } from "./own-status.ts";
import { isLocal, isLoss } from "./retry.ts";
import { UnservedWaits } from "./unserved.ts";
import { broker } from "./wire.ts";

interface Subscription {
  method: string;
  args: unknown[];
  emit: (value: unknown) => void;
  /** Attached once at least: it moves with the database. */
  live: boolean;
  /** Told when the place the database moved to refuses it (decision 0114). */
  lost: SubscriptionLost | undefined;
  on?: Target;
  remote?: Promise<number>;
}

export interface TabsEndpoint extends HostEndpoint {
  /**
   * Asks again now what a door refused or waits to ask: this tab's worker's status, the leader's (decision 0132).
   * Resolves once each ask is answered (decision 0138): the status shows that answer then.
   */
  askAgain(): Promise<void>;
  /** Stops following (the page's worker is gone or the client was disposed). */
  close(): void;
}

export interface TabsEndpointOptions {
  /** The clock of the waits that ask again and of the resend window (the page's by default; a test's manual clock). */
  clock?: Clock;
  /** The draws of the backoff between two sends of a call (`Math.random` by default), as the socket's (review of 0146, L2). */
  random?: () => number;
}

const OWN_OPENS = new Set<HarnessStatus["kind"]>(["opening", "recovering", "ready"]);

/** The page's side: one endpoint over this tab's worker (`own`) and, while another tab leads, the leader's worker. */
export function tabsEndpoint(own: HostEndpoint, options: TabsEndpointOptions = {}): TabsEndpoint {
  const clock = options.clock ?? systemClock;
  const locks = broker();
  let ownStatus: HarnessStatus = { kind: "starting" };
  let ownLeads = false; // this tab's worker was last seen opening or holding the database (not waiting for the lock)
  /**
   * This tab's worker, its status unseen (refused, or asked again after a throw), answered a call that it waits for the
   * database another tab has open (the host's "not open" names it: decision 0142): the page follows that tab until its
   * watch is told a status, and each call this worker's door lets by and its host answers so goes on there. Before, each
   * call failed "not open (status: waiting-for-lock)" for as long as the other tab led.
   */
  let waitsElsewhere = false;
  let database: string | undefined;
  let current: Target | undefined;
  let disposed = false;
  let lastId = 0;
  const statusListeners = new Map<number, (status: HarnessStatus) => void>();
  const subscriptions = new Map<number, Subscription>();

  /** This tab's worker waits for the database while another tab's has it: follow that one. */
  const following = () =>
    locks !== undefined &&
    !disposed &&
    (waitsElsewhere || ownStatus.kind === "waiting-for-lock" || (ownStatus.kind === "closed" && ownStatus.reason === "takeover"));

  const readyTarget = (): Target | undefined => {
    if (ownStatus.kind === "ready") return OWN;
    const link = leaders.link;
    return link?.status?.kind === "ready" ? link : undefined;
  };
  /** Whether this endpoint cannot see its own worker's status (refused, or asked again after a throw). */
  const unseen = () => ownStatus.kind === "failed" || ownStatus.kind === "reconnecting";
  /**
   * Whether this tab's worker's door decides what this page asks first: its status refused; a throw where that worker is
   * the database (0138's H1), or said another tab has it. A call goes there (review of 0142, M1); a subscription carried
   * elsewhere is let by there first (decision 0144).
   */
  const ownFirst = () => ownStatus.kind === "failed" || (ownStatus.kind === "reconnecting" && (!locks || ownLeads || waitsElsewhere));
  /**
   * Where an attempt goes (`Way`, ./calls.ts): whoever has the database open; until then it waits (while this tab's
   * worker opens or recovers, or another tab leads). A first attempt goes to this tab's worker when that one failed, was
   * closed, or waits for the database where there is no broker (answered as before: not open); to the leader whose door
   * refused this tab its status (./link.ts: its door answers it), as a resend or a forwarded call does. While this page
   * cannot see its own worker's status (refused; a throw where that worker is the database, 0138's H1, or said another
   * tab has it), a call, first or resent, goes to that worker first: its door decides each call as this page's (review
   * of 0142, M1: before, later calls went to the leader, decided as another tab's); a watch until `waitsElsewhere`.
   */
  const pick = (way: Way): Target | undefined => {
    if ((way === "call" || way === "resend") && ownFirst()) return OWN;
    const target = readyTarget();
    if (target || way === "watch-again") return target;
    if (following() && leaders.link?.status?.kind === "failed") return leaders.link;
    if (way === "resend" || way === "forward") return undefined;
    const own = way === "watch" && !waitsElsewhere && ownFirst();
    const settled = own || (ownStatus.kind === "closed" && !following());
    return settled || (!locks && ownStatus.kind === "waiting-for-lock") ? OWN : undefined;
  };
  /**
   * `CallRoute.waitsElsewhere` (./calls.ts): this tab's worker answered with the host's own "not open" naming the
   * database (`hostWaitingFor`; an app's error with a field of that name is no such answer: review of 0142, L2).
   */
  const learnedElsewhere = (error: unknown) => {
    const waitingFor = hostWaitingFor(error);
    if (!locks || disposed || waitingFor === undefined) return false;
    if (unseen()) {
      waitsElsewhere = true;
      database = waitingFor;
      reconsider();
    }
    return true;
  };
  const waits = new PlaceWaits(clock, pick);
  const next = (way: Way, bound?: Bound) => waits.next(way, bound);

  /**
   * Answered subscriptions the database's place could not serve now (a retryable answer: its door's hook threw), by
   * id: asked there again after a backoff; meanwhile the page's status says reconnecting, not ready (decision 0117 after
   * review; before, such a subscription was asked again only at the next move, the page silent and "ready").
   */
  const unserved = new UnservedWaits(clock);
  /** Served again (`true`: its attempt kept a while), refused, unsubscribed, given up: its wait (if any) ends with it. */
  const served = (id: number, again = false) => unserved.end(id, again);
  const status = (): HarnessStatus => {
    const now = place();
    const longest = unserved.longest();
    if (now.kind !== "ready" || !longest) return now;
    return { kind: "reconnecting", attempt: longest.attempt, retryInMs: longest.retryInMs };
  };
  const place = (): HarnessStatus => {
    if (ownStatus.kind === "ready") return { ...ownStatus, role: "leader" };
    if (!following()) return ownStatus;
    const led = leaders.link?.status;
    if (led?.kind === "ready") return { ...led, role: "follower" };
    // The leader's status asked again after a backoff, or refused (./link.ts; decision 0123's review, M1).
    if (led?.kind === "reconnecting" || led?.kind === "failed") return led;
    return { kind: "waiting-for-lock", database: database ?? "" };
  };

  const endpointOf = (target: Target) => (target === OWN ? own : target.endpoint);
  /**
   * Subscribes at `target`: carried there past this tab's worker's door while that door decides first (`ownFirst`,
   * decision 0144) — a first attempt, a move with the database, an ask again alike — unless `decided` (that door let
   * this very attempt by: its host's "not open" named the database another tab has).
   */
  const attach = (id: number, subscription: Subscription, target: Target, decided = false) => {
    subscription.on = target;
    const { method, args } = subscription;
    const carry = () => subscribeAt(id, subscription, target, () => subscription.remote === remote);
    const remote: Promise<number> =
      target !== OWN && !decided && ownFirst() ? pastOwnDoor(own, method, args, learnedElsewhere, carry) : carry();
    subscription.remote = remote;
    remote.catch(() => {
      if (subscription.on === target) subscription.on = undefined;
    });
    return remote;
  };
  /** The subscription at `target` itself; its end is told while the attempt is still the subscription's (`current`). */
  const subscribeAt = (id: number, subscription: Subscription, target: Target, current: () => boolean) =>
    endpointOf(target).subscribe(
      subscription.method,
      subscription.args,
      (value) => {
        if (subscription.on === target) subscription.emit(value);
      },
      // The place ended it itself (decision 0117: a watch its host moved to a harness it opened again that lacks the
      // conversation): ended here too, as a refusal at a move is.
      (error) => {
        if (subscriptions.get(id) !== subscription || !current()) return; // ended, or moved on
        const refusal = refusalOf(error);
        if (!refusal) {
          // It held it no more: asked again there after the backoff (a retryable end), or at the next move.
          subscription.on = undefined;
          if (unservable(error)) askAgain(id, subscription, target);
          return;
        }
        subscriptions.delete(id);
        subscription.on = undefined;
        if (served(id)) changed();
        subscription.lost?.(refusal);
      },
    );
  const detach = (subscription: Subscription) => {
    const { on, remote } = subscription;
    subscription.on = undefined;
    subscription.remote = undefined;
    if (!on || !remote || (on !== OWN && on.closed)) return;
    void remote.then((id) => endpointOf(on).unsubscribe(id)).catch(() => {});
  };

  /** Subscribes on the database's current place, again on the next one after a loss, until answered or refused. */
  const subscribeLive = async (id: number, subscription: Subscription): Promise<number> => {
    for (let fresh = true, decided = false; ; ) {
      const target = await next(fresh ? "watch" : "watch-again");
      try {
        const attaching = attach(id, subscription, target, decided);
        decided = false;
        if (subscriptions.get(id) !== subscription) cancelPending(attaching); // given up while it waited for a place
        await attaching;
        if (subscriptions.get(id) !== subscription) {
          detach(subscription); // unsubscribed meanwhile
          return id;
        }
        subscription.live = true;
        // The database moved while this one subscribed: follow it now.
        if (readyTarget() && readyTarget() !== target) {
          detach(subscription);
          reattach(id, subscription, readyTarget()!);
        }
        return id;
      } catch (error) {
        // This tab's worker's door let it by, and its host waits for the database another tab has: carried there, as a
        // call is (decision 0142), without asking that door again (decision 0144; before, it failed "not open").
        if (target === OWN && learnedElsewhere(error)) {
          decided = true;
          continue;
        }
        if (target !== OWN && isLoss(error)) {
          lose(target);
          fresh = false;
          continue;
        }
        subscriptions.delete(id);
        throw error;
      }
    }
  };

  /**
   * Moves an answered subscription to where the database is now. Refused there (the conversation is not in the
   * database that place opened, its door refuses): it has ended, is moved nowhere again, and its owner's `lost` is
   * told the error (decision 0114; before, it stayed empty and was asked again at every move). A leader lost
   * meanwhile, the database leaving that place as it asked (`HarnessClosed`, "not open": a takeover, a close), or an
   * error that passes by itself (`isRetryable`) is no refusal: the next move asks again.
   */
  const reattach = (id: number, subscription: Subscription, target: Target) => {
    const remote = attach(id, subscription, target);
    remote.then(
      () => subscription.remote === remote && served(id, true) && changed(),
      () => {},
    );
    remote.catch((error: unknown) => {
      if (subscriptions.get(id) !== subscription || subscription.remote !== remote) return; // ended, or moved on
      if (target !== OWN && isLoss(error)) return lose(target);
      // The host's untyped "not open" (`DurableError`) is a database leaving that place too.
      const refusal = (error as { name?: unknown } | undefined)?.name === "DurableError" ? undefined : refusalOf(error);
      if (!refusal) {
        if (unservable(error)) askAgain(id, subscription, target);
        return;
      }
      subscriptions.delete(id);
      if (served(id)) changed();
      subscription.lost?.(refusal);
    });
  };
  /** A place that answered, and could not serve it now (not a place lost: that is a move). */
  const unservable = (error: unknown) => isRetryable(error) && !isLoss(error) && (error as { name?: unknown }).name !== "WorkerGone";
  /** Asks `target` again after a backoff that doubles while it cannot serve the subscription (at most one wait each). */
  const askAgain = (id: number, subscription: Subscription, target: Target) => {
    // A wait already running (asked again at a move meanwhile) is replaced, not doubled (unserved.ts).
    unserved.next(id, () => {
      // Moved meanwhile (the move asked again), or ended: nothing to do.
      if (!disposed && subscriptions.get(id) === subscription && subscription.on === undefined && readyTarget() === target)
        reattach(id, subscription, target);
    });
    changed();
  };

  const changed = () => {
    const now = status();
    for (const listener of statusListeners.values()) safely(() => listener(now)); // a throw never stops the move below
    const target = readyTarget();
    if (target !== current) {
      current = target;
      for (const [id, subscription] of subscriptions) {
        if (!subscription.live) continue;
        detach(subscription);
        if (target) reattach(id, subscription, target);
      }
    }
    waits.wake();
  };

  /**
   * Whether a call to this tab's own worker failed because the database left it (taken over by another tab,
   * which this tab now follows): the harness closed under it, or the call arrived after the close.
   */
  const ownLost = async (error: unknown) => {
    const name = (error as { name?: string } | undefined)?.name;
    // Unseen, only a close under it (its door refuses, its host answers "not open" for itself: review of 0142, M1).
    if (name !== "HarnessClosed" && (ownStatus.kind === "ready" || unseen())) return false;
    // Its status leaving `ready` says where the database went; one that stays `ready` (late, broken, hostile) ends the
    // call `ConnectionLost` `OWN_STATUS_GRACE_MS` after the answer (./own-left.ts; decision 0151 and its review, M2).
    if (ownStatus.kind === "ready") await ownLeft.wait();
    return following();
  };
  const ownLeft = new OwnLeaves(clock);

  const leaders = followLeaders(locks, clock, changed);
  const lose = (link: Link) => leaders.lose(link);

  /** Opens the database's channel while following, and asks who leads; closes it otherwise. */
  const reconsider = () => {
    if (following() && database !== undefined) leaders.open(database);
    else leaders.close();
    changed();
  };

  // This tab's worker's status, asked again while it cannot be served (./own-status.ts; decision 0123).
  const ownWatch = watchStatus(
    own,
    (status) => {
      ownStatus = status;
      if (status.kind !== "reconnecting" && status.kind !== "failed") {
        ownLeads = OWN_OPENS.has(status.kind);
        waitsElsewhere = false; // seen again: the status says where the database is
      }
      if ("database" in ownStatus) database = ownStatus.database;
      if (ownStatus.kind !== "ready") ownLeft.left();
      reconsider();
    },
    { clock },
  );

  return {
    call(method, args) {
      if (isLocal(method)) return own.call(method, args);
      const pause = (ms: number) => waits.pause(ms);
      const route = { clock, next, pause, random: options.random, endpointOf, ownLost, lose, waitsElsewhere: learnedElsewhere };
      return sendCall(route, method, args);
    },
    subscribe(method, args, emit, lost) {
      const id = ++lastId;
      if (method === "onStatus") {
        statusListeners.set(id, emit);
        emit(status());
        return Promise.resolve(id);
      }
      const subscription: Subscription = { method, args, emit, live: false, lost };
      subscriptions.set(id, subscription);
      // A watch the host answers later, given up before its answer (decision 0107): the host it went to releases it.
      return pendingSubscription(subscribeLive(id, subscription), () => {
        if (subscriptions.get(id) !== subscription) return;
        subscriptions.delete(id);
        // Given up while it waited: the wait ends and the status with it (decision 0117, later; before: reconnecting).
        if (served(id)) changed();
        cancelPending(subscription.remote);
      });
    },
    unsubscribe(id) {
      statusListeners.delete(id);
      const subscription = subscriptions.get(id);
      subscriptions.delete(id);
      if (served(id)) changed();
      if (subscription) detach(subscription);
    },
    async askAgain() {
      await Promise.all([ownWatch.again(), leaders.link?.again()]);
    },
    close() {
      disposed = true;
      unserved.clear();
      ownWatch.close();
      reconsider();
      // The calls waiting for a place end with the error the link's calls get at close (a resend's timer cleared now).
      waits.close(new ConnectionLost());
      ownLeft.close(); // and those waiting for this tab's worker's status (review of 0151, L3)
    },
  };
}
