/**
 * The host's endpoint over a WebSocket that comes back: the page side of a Durable Object host
 * (`connectHarness(url)`). Calls wait for the connection; a connection that drops rejects the calls in flight
 * with `ConnectionLost`, reconnects, and subscribes every live subscription again, so the page's listeners
 * keep hearing from the host (an object that restarted sends the current state anew). A subscribe the host had
 * not answered when its connection dropped (a watch waiting for its conversation) keeps waiting: it is asked
 * again on the next connection and answered there (decision 0111); it ends with `cancel()`, with `close()`, or
 * with the host's refusal, and a subscribe that ended is asked nowhere again. One answered on an earlier connection that
 * the host refuses when a reconnect asks it again (the conversation is gone, the caller may no longer watch it) has
 * ended too: it is removed, asked nowhere again, and its owner's `lost` is told the host's error (decision 0114); an
 * answer that passes by itself (`isRetryable`, `HarnessClosed`: a hook that threw, `AuthorizeFailed`) is no refusal: it is
 * kept, and since the open connection would never ask again the page closes it and its reconnect (backing off, a
 * step further for each connection closed so in a row) asks again; meanwhile its status says reconnecting (decision
 * 0117 after review; before, the page stayed silent with status ready).
 * Reconnects back off:
 * `retryMs` after a connection the host answered on, doubling while attempts fail (a socket that opens and
 * drops before the host says anything is a failed attempt), at most `maxRetryMs`, each delay
 * drawn from its upper half so that many pages dropped at once do not come back in step.
 */

import { ConnectionLost, NotFound } from "../errors.ts";
import { type HostEndpoint, refusalOf, type SubscriptionLost } from "../host/endpoint.ts";
import { type HostMessage, type MessageEndpoint, messageEndpoint } from "../host/messages.ts";
import { cancelPending, pendingSubscription } from "../host/pending-subscription.ts";

/** The part of a WebSocket this endpoint uses (the browser's, or any look-alike). */
export interface SocketLike {
  send(data: string): void;
  close(code?: number, reason?: string): void;
  addEventListener(type: "open" | "close" | "error", listener: () => void): void;
  addEventListener(type: "message", listener: (event: { data: unknown }) => void): void;
}

export interface ReconnectingEndpoint extends HostEndpoint {
  /** Stops reconnecting and closes the socket. */
  close(): void;
  /** How many times a connection was opened. */
  readonly connections: number;
}

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
}

/** The connection's state, as `SocketEndpointOptions.onState` hears it. */
export type SocketState = { state: "open" } | { state: "reconnecting"; attempt: number; retryInMs: number };

export interface SocketEndpointOptions {
  /** The delay before the first reconnect after a connection the host answered on. Default 500 ms. */
  retryMs?: number;
  /** The longest delay between attempts. Default 10,000 ms. */
  maxRetryMs?: number;
  /** Told when a connection opens and when one is lost (with the coming attempt). */
  onState?: (state: SocketState) => void;
  /** For tests: the timer and the random source the backoff uses. */
  setTimer?: (fire: () => void, ms: number) => void;
  random?: () => number;
}

export function socketEndpoint(connect: () => SocketLike, options: SocketEndpointOptions = {}): ReconnectingEndpoint {
  const retryMs = options.retryMs ?? 500;
  const maxRetryMs = Math.max(retryMs, options.maxRetryMs ?? 10_000);
  const setTimer = options.setTimer ?? ((fire: () => void, ms: number) => void setTimeout(fire, ms));
  const random = options.random ?? Math.random;
  /** Attempts that failed since a connection the host last answered on (a socket that opens and drops unanswered counts). */
  let failures = 0;
  const subscriptions = new Map<number, Subscription>();
  let lastId = 0;
  let connections = 0;
  let closed = false;
  let socket: SocketLike | undefined;
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
  /** Closes a link's socket to reconnect (below); by link, for the connection that link is. */
  const reconnects = new WeakMap<MessageEndpoint, () => void>();
  /** Connections closed in a row because the host could not serve a subscription now: each one backs off further. */
  let unserved = 0;

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
      // review). Closed, so that the reconnect's backoff asks again — never a loop faster than that backoff.
      if (!dead.has(link)) reconnects.get(link)?.();
      return;
    }
    subscriptions.delete(id);
    subscription.lost?.(refusal);
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
      options.onState?.({ state: "open" });
      const again = [...subscriptions].map(([id, subscription]) => {
        const subscribing = subscribeOn(link, id, subscription);
        subscribing.catch(refusedAgain(link, id, subscription));
        return subscribing;
      });
      // Every subscription served again: a later unserved one backs off from the start.
      Promise.all(again).then(
        () => void (unserved = 0),
        () => {},
      );
      resolve(link);
    });
    let lost = false;
    const drop = () => {
      if (lost) return;
      lost = true;
      dead.add(link);
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
      const ceiling = Math.min(maxRetryMs, retryMs * 2 ** (failures + unserved));
      const delay = Math.round(ceiling / 2 + (random() * ceiling) / 2);
      failures++;
      options.onState?.({ state: "reconnecting", attempt: failures, retryInMs: delay });
      setTimer(open, delay);
    };
    reconnects.set(link, () => {
      if (lost) return;
      unserved++;
      ws.close(4000, "a subscription the host could not serve now: asking again");
      drop(); // now, not at the socket's close event: nothing more is sent on a connection given up
    });
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
    async call(method, args) {
      return (await live()).endpoint.call(method, args);
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
        for (;;) {
          // After close(): ConnectionLost. Given up while no connection is open: rejected at once, asked nowhere.
          const link = await Promise.race([live(), givenUp]);
          if (!held()) throw new NotFound("The subscription is no longer watched.");
          try {
            await Promise.race([subscribeOn(link, id, subscription), givenUp]);
            subscription.answered = true;
            return id;
          } catch (error) {
            // Its connection dropped before the host answered: it waits on the next one, whose open subscribes it
            // again (decision 0111; before, the caller got ConnectionLost while the reconnect still subscribed it).
            if (!(error instanceof ConnectionLost && dead.has(link) && held())) throw error;
          }
        }
      })();
      // A subscribe that ended unanswered (refused, given up, the endpoint closed) is not subscribed again.
      answered.catch(() => held() && subscriptions.delete(id));
      // A watch the host answers later, given up before its answer (decision 0107): the host releases it.
      return pendingSubscription(answered, () => {
        if (subscriptions.get(id) !== subscription) return;
        subscriptions.delete(id);
        // While the socket is down it rejects now, as a transport's given-up watch does (decisions 0107, 0111).
        giveUp(new NotFound("The subscription is no longer watched."));
        cancelPending(subscription.pending);
      });
    },
    async unsubscribe(id) {
      const subscription = subscriptions.get(id);
      subscriptions.delete(id);
      if (subscription?.remote !== undefined && subscription.link && !dead.has(subscription.link)) {
        subscription.link.endpoint.unsubscribe(subscription.remote);
      } else {
        // Subscribed again after a reconnect and not answered there yet (the host may make it wait): given up there.
        cancelPending(subscription?.pending);
      }
    },
    close() {
      if (closed) return;
      closed = true;
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
