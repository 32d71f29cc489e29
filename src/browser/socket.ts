/**
 * The host's endpoint over a WebSocket that comes back: the page side of a Durable Object host
 * (`connectHarness(url)`). Calls wait for the connection, `callWaitMs` at most (then `NotReady`, never sent: decision
 * 0151, ./connection-wait.ts); a connection that drops rejects the calls in flight with `ConnectionLost`, reconnects,
 * and subscribes every live subscription again, so the page's listeners keep hearing from the host (an object that
 * restarted sends the current state anew). What it takes and gives: ./socket-options.ts.
 *
 * A subscribe the host had not answered when its connection dropped (a watch waiting for its conversation) keeps
 * waiting: it is asked again on the next connection and answered there (decision 0111) — an answer there that passes
 * by itself waits and is asked again as below (decision 0117, later); it ends with `cancel()`, with `close()`, or with
 * the host's refusal, and a subscribe that ended is asked nowhere again.
 *
 * One answered on an earlier connection that the host refuses when a reconnect asks it again (the conversation is
 * gone, the caller may no longer watch it) has ended too: it is removed, asked nowhere again, and its owner's `lost` is
 * told the host's error (decision 0114). An answer that passes by itself (`isRetryable`, `HarnessClosed`: a hook that
 * threw, `AuthorizeFailed`) is no refusal: it is kept, and asked again on the same connection after its own backoff
 * (`retryMs`, doubling to `maxRetryMs`), until it is served, refused, given up or its connection drops (the reconnect
 * asks everything again); calls go on meanwhile, and `onState` hears `unserved` (decision 0117, its second review:
 * before, the page closed the healthy connection, and every call on it failed `ConnectionLost` while one subscription
 * could not be served). The status subscription (`onStatus`, the page's client's own) waits so from its first ask on
 * (decision 0123).
 *
 * Reconnects back off: `retryMs` after a connection the host answered on, doubling while attempts fail (a socket that
 * opens and drops before the host says anything is a failed attempt), at most `maxRetryMs`, each delay drawn from its
 * upper half so that many pages dropped at once do not come back in step.
 */

import { ConnectionLost, NotFound, NotReady } from "../errors.ts";
import { refusalOf, type SubscriptionLost } from "../host/endpoint.ts";
import { shapeOf } from "../host/error-wire.ts";
import { type HostMessage, type MessageEndpoint, messageEndpoint } from "../host/messages.ts";
import { cancelPending, pendingSubscription } from "../host/pending-subscription.ts";
import type { ErrorShape } from "../host/protocol.ts";
import { jitteredBackoff } from "./backoff.ts";
import { CALL_WAIT_MS, within } from "./connection-wait.ts";
import { NOT_READY_RESEND_MS } from "./not-ready-resend.ts";
import type { ReconnectingEndpoint, SocketEndpointOptions, SocketLike } from "./socket-options.ts";
import { type SocketState, StateTold } from "./socket-state.ts";

export type { ReconnectingEndpoint, SocketEndpointOptions, SocketLike } from "./socket-options.ts";
export type { SocketState } from "./socket-state.ts";

interface Subscription {
  method: string;
  args: unknown[];
  emit: (value: unknown) => void;
  /** Told when the host refuses it again on a later connection, once it was answered (decision 0114). */
  lost: SubscriptionLost | undefined;
  /** Answered once: from then on a refusal is told to `lost` (before it, the caller's promise rejects). */
  answered?: true;
  /** Its id on the current connection, once subscribed there. */
  remote?: number;
  /** The connection it was (or is being) subscribed on, and that subscribing. */
  link?: MessageEndpoint;
  subscribing?: Promise<void>;
  /** The connection's own subscribe, while it has not answered (given up with `cancelPending`). */
  pending?: Promise<number>;
  /** Answered once, not served on its connection now (a retryable answer): asked there again when `timer` fires. */
  /** `error`: the answer it waits after (the `unserved` state says why; decision 0123's review, L3). */
  wait?: { attempt: number; retryInMs: number; timer: unknown; stale: number | undefined; resume?: () => void; error?: ErrorShape };
  /** When it was last served after a wait, and at which attempt: ended again soon after, its backoff goes on growing. */
  served?: { attempt: number; at: number };
}

export function socketEndpoint(connect: () => SocketLike, options: SocketEndpointOptions = {}): ReconnectingEndpoint {
  const retryMs = options.retryMs ?? 500;
  const maxRetryMs = Math.max(retryMs, options.maxRetryMs ?? 10_000);
  const random = options.random ?? Math.random;
  const callWaitMs = options.callWaitMs ?? CALL_WAIT_MS;
  const now = options.now ?? Date.now;
  const setTimer = options.setTimer ?? ((fire: () => void, ms: number) => setTimeout(fire, ms));
  const clearTimer =
    options.clearTimer ?? (options.setTimer ? () => {} : (timer: unknown) => clearTimeout(timer as ReturnType<typeof setTimeout>));
  /** A backoff's delay: `retryMs`·2^`step`, at most `maxRetryMs`, drawn from its upper half. */
  const backoff = (step: number) => jitteredBackoff(step, retryMs, maxRetryMs, random);
  /** Attempts that failed since a connection the host last answered on (a socket that opens and drops unanswered counts). */
  let failures = 0;
  const subscriptions = new Map<number, Subscription>();
  let lastId = 0;
  let connections = 0;
  let closed = false;
  let socket: SocketLike | undefined;
  /** The open connection's link; none while reconnecting: a call waits for the next one, bounded (decision 0151). */
  let up: MessageEndpoint | undefined;
  /** The link calls go to: the open connection, or the next one while reconnecting (calls wait for it). */
  let current!: Promise<MessageEndpoint>;
  let connected!: (link: MessageEndpoint) => void;
  /** Rejects the link being waited for (close() while reconnecting: it never comes). */
  let refused!: (error: unknown) => void;
  const awaitLink = () => {
    current = new Promise<MessageEndpoint>((resolve, reject) => {
      connected = resolve;
      refused = reject;
    });
    // Refused by close() with nobody waiting is no error; a caller waiting still gets it.
    current.catch(() => {});
  };
  awaitLink();
  const dead = new WeakSet<MessageEndpoint>();

  /** What `onState` heard last: each change told once (./socket-state.ts). */
  const told = new StateTold(options.onState);
  const tell = (state: SocketState) => told.tell(state);
  /** Whether any subscription waits to be asked again on the open connection. */
  const waiting = () => [...subscriptions.values()].some((subscription) => subscription.wait);
  /** Ends `subscription`'s wait (served, refused, given up, its connection gone); `onState` hears when none is left. */
  const endWait = (subscription: Subscription | undefined, report = true) => {
    if (!subscription?.wait) return;
    if (subscription.wait.timer !== undefined) clearTimer(subscription.wait.timer);
    const { resume } = subscription.wait;
    subscription.wait = undefined;
    resume?.(); // a caller's subscribe that waited (its loop asks on the next link, or ends)
    if (report && !closed && !waiting()) tell({ state: "open" });
  };
  /**
   * Served after a wait: its wait ends, and its attempt is kept — a host that answers and then ends it again within
   * `maxRetryMs` (a hook that fails after the answer, an object that keeps refusing at each wake) is asked again at the
   * next backoff, not at the first each time (decision 0117, later; its third review's R4).
   */
  const served = (subscription: Subscription) => {
    if (subscription.wait) subscription.served = { attempt: subscription.wait.attempt, at: now() };
    endWait(subscription);
  };
  /**
   * Asks `subscription` again on `link` after its backoff: one timer per subscription, calls unaffected. `resume`, for a
   * subscribe its caller still waits for: the timer (or the wait's end: a drop, a give-up, close) resumes the caller's
   * loop, which asks itself.
   */
  const askAgain = (link: MessageEndpoint, id: number, subscription: Subscription, error: unknown, resume?: () => void) => {
    // Ended again within `maxRetryMs` of being served after a wait: the backoff goes on from there (0117, later).
    const kept = subscription.served && now() - subscription.served.at < maxRetryMs ? subscription.served.attempt : 0;
    const attempt = (subscription.wait?.attempt ?? kept) + 1;
    // Only a timer it set (a custom clearTimer gets its own handles only; decision 0117's third review).
    if (subscription.wait?.timer !== undefined) clearTimer(subscription.wait.timer);
    // Not served under its id any more: a Durable Object that woke keeps it held for a later wake until it is asked anew.
    const stale = subscription.wait?.stale ?? subscription.remote;
    subscription.remote = undefined;
    const wait = { attempt, retryInMs: backoff(attempt - 1), timer: undefined as unknown, stale, resume, error: shapeOf(error) };
    subscription.wait = wait;
    wait.timer = setTimer(() => {
      if (subscription.wait !== wait || closed || dead.has(link) || subscriptions.get(id) !== subscription) return;
      if (stale !== undefined) link.endpoint.unsubscribe(stale); // what it kept under the old id is released now
      wait.stale = undefined;
      subscription.subscribing = undefined; // a new subscribe on the same connection
      if (resume) {
        wait.resume = undefined;
        resume();
      } else ask(link, id, subscription);
    }, wait.retryInMs);
    let highest: { attempt: number; retryInMs: number; error?: ErrorShape } = wait;
    for (const other of subscriptions.values()) if (other.wait && other.wait.attempt > highest.attempt) highest = other.wait;
    told.unserved(highest);
  };

  /**
   * A subscription answered earlier that the host refused when this connection asked it again, or ended with an error
   * frame after its answer (a Durable Object that woke from hibernation refused it; decision 0114): it has ended —
   * removed, asked nowhere again — and its owner is told the host's error, once. One whose connection dropped before
   * the answer is asked again on the next; one not answered yet ends through its caller's promise instead.
   */
  const refusedAgain = (link: MessageEndpoint, id: number, subscription: Subscription) => (error: unknown) => {
    if (subscriptions.get(id) !== subscription || !subscription.answered || subscription.link !== link) return;
    // What passes by itself is no refusal (`refusalOf`, as on the tabs' endpoint): kept, asked again at the next connection.
    const refusal = refusalOf(error);
    if (!refusal) {
      // Not served now, and the host no longer holds it: an open connection would never ask again (decision 0117 after
      // review). Asked again there after its backoff (0117's second review; a drop's reconnect asks everything anyway).
      if (!dead.has(link) && !closed) askAgain(link, id, subscription, error);
      return;
    }
    subscriptions.delete(id);
    // Its owner hears the refusal before `onState` hears the wait's end: an `open` first showed the page the host's stale
    // status (HarnessClient's, when the refused one is its status subscription; decision 0117, its review seams2).
    subscription.lost?.(refusal);
    endWait(subscription);
  };

  /** Subscribes on `link` once (a reconnect and a subscribe made while reconnecting may both ask). */
  const subscribeOn = (link: MessageEndpoint, id: number, subscription: Subscription): Promise<void> => {
    if (subscription.link === link && subscription.subscribing) return subscription.subscribing;
    subscription.link = link;
    subscription.remote = undefined;
    subscription.subscribing = (async () => {
      // Ended by the host after its answer on this connection (an object that woke refused it again): as refused here.
      const subscribing = link.endpoint.subscribe(
        subscription.method,
        subscription.args,
        subscription.emit,
        refusedAgain(link, id, subscription),
      );
      subscription.pending = subscribing;
      if (subscriptions.get(id) !== subscription) cancelPending(subscribing); // given up meanwhile (decision 0107)
      const remote = await subscribing;
      if (subscriptions.get(id) === subscription && subscription.link === link) subscription.remote = remote;
      else link.endpoint.unsubscribe(remote); // unsubscribed (or connected anew) meanwhile
    })();
    return subscription.subscribing;
  };
  /** (Re-)subscribes an answered subscription on `link`: served ends its wait, an error is judged by `refusedAgain`. */
  const ask = (link: MessageEndpoint, id: number, subscription: Subscription) => {
    const subscribing = subscribeOn(link, id, subscription);
    subscribing.then(
      () => subscription.link === link && subscriptions.get(id) === subscription && served(subscription),
      refusedAgain(link, id, subscription),
    );
    return subscribing;
  };

  /** Gives `id` up (unsubscribe, or cancel on its promise): its wait ends and the host releases every id it held it under. */
  const release = (id: number) => {
    const subscription = subscriptions.get(id);
    subscriptions.delete(id);
    // Given up while it waited: what a woken object kept under its old id is released too.
    const stale = subscription?.wait?.stale;
    if (stale !== undefined && subscription?.link && !dead.has(subscription.link)) subscription.link.endpoint.unsubscribe(stale);
    endWait(subscription);
    if (subscription?.remote !== undefined && subscription.link && !dead.has(subscription.link)) {
      subscription.link.endpoint.unsubscribe(subscription.remote);
    } else {
      // Subscribed again after a reconnect and not answered there yet (the host may make it wait): given up there.
      cancelPending(subscription?.pending);
    }
  };

  const open = () => {
    if (closed) return; // closed while the retry waited: no new socket
    const resolve = connected;
    const ws = (socket = connect());
    const link = messageEndpoint((message) => ws.send(JSON.stringify(message)));
    ws.addEventListener("message", (event) => {
      failures = 0; // the host answered on this connection: a later drop starts the backoff over
      let message: unknown;
      try {
        message = JSON.parse(String(event.data));
      } catch {
        return; // not JSON: no answer to anything (a frame is never thrown out of the socket's listener)
      }
      link.receive(message as HostMessage);
    });
    /** Whether this attempt opened: only then did callers get its link, and a drop makes them wait for the next. */
    let opened = false;
    ws.addEventListener("open", () => {
      opened = true;
      connections++;
      tell({ state: "open" });
      for (const [id, subscription] of subscriptions) ask(link, id, subscription);
      up = link;
      resolve(link);
    });
    let lost = false;
    const drop = () => {
      if (lost) return;
      lost = true;
      dead.add(link);
      if (up === link) up = undefined;
      // The reconnect asks every subscription again: no wait of the dead connection's is kept.
      for (const subscription of subscriptions.values()) endWait(subscription, false);
      link.fail(new ConnectionLost());
      if (closed) {
        current = Promise.reject(new ConnectionLost());
        current.catch(() => {});
        return;
      }
      // Calls and subscriptions made from now on wait for the next connection instead of the dead one. An attempt
      // that failed before it opened gave its link to no one: callers keep waiting on the same promise (renewing it
      // would leave theirs pending for good, even after close()).
      if (opened) awaitLink();
      const delay = backoff(failures);
      failures++;
      tell({ state: "reconnecting", attempt: failures, retryInMs: delay });
      setTimer(open, delay);
    };
    ws.addEventListener("close", drop);
    ws.addEventListener("error", drop);
  };
  open();

  /** The open link; one that dropped while a caller waited for it is passed over for the next. */
  const live = async (): Promise<MessageEndpoint> => {
    let link = await current;
    while (dead.has(link)) link = await current;
    return link;
  };

  return {
    async call(method, args, waitMs = callWaitMs) {
      // Sent a turn later, as before: a drop in this turn sends it on the next connection.
      if (up) await Promise.resolve();
      // None open: it waits for the next, `waitMs` at most (then `NotReady`, never sent; ./connection-wait.ts).
      const link = up ?? (await within(live, waitMs, { setTimer, clearTimer }));
      return link.endpoint.call(method, args);
    },
    subscribe(method, args, emit, lost) {
      const id = ++lastId;
      const subscription: Subscription = { method, args, emit, lost };
      subscriptions.set(id, subscription);
      const held = () => subscriptions.get(id) === subscription;
      let giveUp!: (error: unknown) => void;
      const givenUp = new Promise<never>((_, reject) => (giveUp = reject));
      givenUp.catch(() => {});
      const answered = (async () => {
        /** Asked on a connection that dropped before the host answered: its caller has waited past one connection. */
        let carried = false;
        let notReadySince: number | undefined; // when the host first answered it NotReady
        for (;;) {
          // After close(): ConnectionLost. Given up while no connection is open: rejected at once, asked nowhere.
          const link = await Promise.race([live(), givenUp]);
          // Closed while it waited, before the socket's close event (a browser's comes a task later): the link is not
          // dead yet, and its cached `subscribing` is the old refusal — ConnectionLost, as the comment says (0117, later).
          if (closed) throw new ConnectionLost();
          if (!held()) throw new NotFound("The subscription is no longer watched.");
          try {
            await Promise.race([subscribeOn(link, id, subscription), givenUp]);
            subscription.answered = true;
            served(subscription); // served after a wait: onState hears `open` once none waits
            return id;
          } catch (error) {
            // Its connection dropped before the host answered: it waits on the next one, whose open subscribes it
            // again (decision 0111; before, the caller got ConnectionLost while the reconnect still subscribed it).
            if (error instanceof ConnectionLost && dead.has(link) && held()) {
              carried = true;
              continue;
            }
            // Carried over a drop and answered there with what passes by itself (a hook that threw: AuthorizeFailed):
            // no refusal, and its caller (HostClient's own status subscription among them) was promised an answer on
            // the next connection — it waits and is asked again after its backoff, as an answered one is, `unserved`
            // meanwhile (decision 0117, later: before, it rejected, and HostClient's status stayed `reconnecting`). So
            // does the status subscription at its first ask: its caller (the page's client, asking once) cannot ask
            // again, and the page showed `failed` until the next connection (decision 0123). So does any subscribe the object
            // answers `NotReady` (its switch after a hand-back; its next instance serves it, decision 0139) — for as long
            // as a call is sent again: past that it ends with the `NotReady` (review of 0139, L3; before, for good).
            if (error instanceof NotReady && method !== "onStatus") notReadySince ??= now();
            const over = error instanceof NotReady && notReadySince !== undefined && now() - notReadySince >= NOT_READY_RESEND_MS;
            const waits = !over && (carried || method === "onStatus" || error instanceof NotReady);
            if (waits && held() && !closed && !dead.has(link) && !refusalOf(error)) {
              await Promise.race([new Promise<void>((resume) => askAgain(link, id, subscription, error, resume)), givenUp]);
              continue;
            }
            throw error;
          }
        }
      })();
      // A subscribe that ended unanswered (refused, given up, the endpoint closed) is not subscribed again. One refused
      // on its re-ask after a wait (carried, AuthorizeFailed, then NotAuthorized) ends that wait: `onState` hears `open`
      // once none is left (before, it stayed `unserved`, and the page `reconnecting` on a live socket; 0117, later) —
      // a task later, after its caller has heard the refusal, and only if still `unserved` (a drop meanwhile is kept):
      // told at once, it showed the page the host's stale status first (decision 0117, its review seams2).
      answered.catch(() => {
        if (!held()) return;
        subscriptions.delete(id);
        const waited = subscription.wait !== undefined;
        endWait(subscription, false);
        if (waited && !waiting()) told.ended(); // a wait that begins before the `open` is a stretch of its own (0137)
        if (waited) setTimer(() => !closed && told.last?.state === "unserved" && !waiting() && tell({ state: "open" }), 0);
      });
      // A watch the host answers later, given up before its answer (decision 0107): the host releases it.
      return pendingSubscription(answered, () => {
        if (subscriptions.get(id) !== subscription) return;
        // Given up after its answer too: released as unsubscribe does (its wait ended; decision 0117's third review).
        release(id);
        // While the socket is down it rejects now, as a transport's given-up watch does (decisions 0107, 0111).
        giveUp(new NotFound("The subscription is no longer watched."));
      });
    },
    async unsubscribe(id) {
      release(id);
    },
    close() {
      if (closed) return;
      closed = true;
      for (const subscription of subscriptions.values()) endWait(subscription, false);
      socket?.close(1000, "closed by the page");
      // A call waiting for the next connection gets ConnectionLost instead (a resolved link ignores this). Closing the
      // socket of an attempt not open yet has replaced `current` meanwhile: `refused` is still the awaited link's.
      refused(new ConnectionLost());
    },
    get connections() {
      return connections;
    },
  };
}
