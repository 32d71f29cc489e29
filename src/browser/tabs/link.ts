/// <reference lib="webworker" />
/**
 * A follower's link to the leader tab it follows (follower.ts), over its connection's channel: the leader's endpoint,
 * and the leader's status, watched as the page's own worker's is (./own-status.ts). The leader's door failing that
 * subscription with what passes by itself (its hook threw: `AuthorizeFailed`) is asked again after the unserved backoff,
 * the link's status `reconnecting` meanwhile; refused, the link's status is `failed` with the refusal and the link is
 * kept. Before (decision 0123's review, M1), either dropped the link and nothing asked again: the tab stayed
 * `waiting-for-lock` while a healthy leader lived. A refused follower is asked again on `REFUSED_BACKOFF` (and at once
 * when another leader is followed): `failed` is told once, and the tab follows once the leader's hook lets it
 * (decision 0132; before, it stayed `failed` until leadership changed). Accepted, it takes only the `gone` that carries
 * the connection's `session`, and the endpoint asks who leads again after a `gone` dropped a link, on a backoff
 * (decision 0137 and its review, M2).
 */

import { type Clock, systemClock } from "../../base/clock.ts";
import { ConnectionLost } from "../../errors.ts";
import type { HostEndpoint } from "../../host/endpoint.ts";
import { shapeOf } from "../../host/error-wire.ts";
import { messageEndpoint } from "../../host/messages.ts";
import type { HarnessStatus } from "../../host/protocol.ts";
import { checkLeader } from "./leader-check.ts";
import { boundedCalls } from "./link-calls.ts";
import { STATUS_ASK_MS, type StatusWatch, watchStatus } from "./own-status.ts";
import { isLoss } from "./retry.ts";
import type { Backoff } from "./unserved.ts";
import { type BrokerMessage, type FollowerMessage, followerLock, type LeaderMessage } from "./wire.ts";

/** The leader this tab follows, over its connection's channel. */
export interface Link {
  leader: string;
  endpoint: HostEndpoint;
  /**
   * The leader's status, once connected; `reconnecting` while its status subscription waits to be asked again, `failed`
   * (only) when the leader's door refused it.
   */
  status?: HarnessStatus;
  closed: boolean;
  /** Asks the leader's door again now, if it refused this tab or its ask waits (decision 0132); resolves once answered (0138). */
  again(): Promise<void>;
  close(): void;
}

export interface LinkEvents {
  /** The leader went (its worker died, its status closed or failed, its connection lost, it fell silent). */
  lose(): void;
  /** The link's status changed. */
  changed(): void;
  /**
   * A `gone` dropped it (the leader's, or one who knows the connection), or no `accepted` came within `TAB_CONNECT_MS`
   * (decision 0141): lost, and who leads is asked again.
   */
  gone(): void;
  /** The leader accepted it. */
  accepted(): void;
}

/**
 * How often a leader whose door refused this tab's status is asked again: 5 s, doubling to once a minute (decision
 * 0132). A refusal is the app's answer, shown as `failed`; it may change (the app's hook reads a sign-in, a permission),
 * and this tab has no other way to learn it — slowly, so a hook that stays `false` costs a call a minute.
 */
export const REFUSED_BACKOFF: Backoff = { firstMs: 5_000, maxMs: 60_000 };

/**
 * How long a `connect` may wait for its `accepted` (decision 0141): then the link gives that leader up and who leads is
 * asked again, on the endpoint's backoff. Before, a link to an id that nobody accepted (a forged announcement, a leader
 * gone before it answered) waited for good, the tab `waiting-for-lock` and its calls waiting with it. As long as a
 * status ask may take (`STATUS_ASK_MS`).
 */
export const TAB_CONNECT_MS = STATUS_ASK_MS;
/** At most this many `accepted`s are taken on one connection: the leader's is one of the first (see `sessions`). */
const MAX_ACCEPTED = 4;

/**
 * Connects to the leader `id` of `database` over the database's `channel`; `clock`'s timers ask its status again and
 * bound the connect and the calls.
 */
export function openLink(
  id: string,
  database: string,
  channel: BroadcastChannel,
  locks: LockManager,
  on: LinkEvents,
  clock: Clock = systemClock,
): Link {
  const connection = `pi-durable-web:tab:${crypto.randomUUID()}`;
  const port = new BroadcastChannel(connection);
  const messages = messageEndpoint((message) => !link.closed && port.postMessage(message satisfies FollowerMessage));
  const life = new AbortController();
  let release = () => {};
  let watch: StatusWatch | undefined;
  /** The connect's bound, until the first `accepted` or `gone`. */
  let bound = () => {};
  /**
   * Asked to connect and not yet accepted: the one `accepted` this link takes. A repeated or forged one (the
   * connection's name is posted in clear on the database's channel) is ignored — before, each restarted the status
   * watch, asking at once past the refused backoff (the review of decision 0132, L4).
   */
  let connecting = false;
  /**
   * Accepted, the leader's name for this connection (none from a leader before decision 0137): the `gone` this link
   * takes says it. Before 0137 any `gone` posted on the connection dropped the link, and nothing asked who leads again:
   * the tab waited for the lock until another announcement.
   */
  let session: { name: string | undefined } | undefined;
  /**
   * Every session an `accepted` on this connection named (the first `MAX_ACCEPTED`): the `gone` this link takes says one
   * of them. A forger that listens may post its `accepted` before the leader's; before 0141 the link took that one only
   * and was then deaf to the leader's `gone` (decision 0137's "Not done"): after a drop it waited for good.
   */
  const sessions = new Set<string | undefined>();
  /** The life locks asked for: the leader's death is told by its own; a forged one is checked first. */
  const lifeLocks = new Set<string>();
  /**
   * Whether the leader answers a `ping` itself (its `accepted` says so), and the asks waiting for any frame from it: the
   * link asks a leader whether it is there with a `ping`, not a `status` call through the app's door (the review of
   * decision 0141, M1); a leader before that fix is asked `status`, as 0141 did.
   */
  let pings = false;
  const heard: (() => void)[] = [];
  const hear = () => {
    for (const there of heard.splice(0)) there();
  };
  const ask = (): Promise<unknown> => {
    if (!pings) return messages.endpoint.call("status", []);
    port.postMessage({ type: "ping" } satisfies FollowerMessage);
    return new Promise<void>((resolve) => heard.push(resolve));
  };
  const link: Link = {
    leader: id,
    // A call the leader does not answer is bounded by its silence (./link-calls.ts).
    endpoint: { ...messages.endpoint, call: boundedCalls(messages.endpoint.call, clock, () => !link.closed && on.lose(), ask) },
    closed: false,
    again: () => watch?.again() ?? Promise.resolve(),
    close() {
      if (link.closed) return;
      bound();
      watch?.close();
      messages.fail(new ConnectionLost());
      hear(); // an ask waiting ends (its bound's timer with it); the calls it watched were failed above
      // The leader takes a `bye` with this connection's session only; without one, the lock released below drops it.
      if (session?.name !== undefined) port.postMessage({ type: "bye", session: session.name } satisfies FollowerMessage);
      link.closed = true;
      port.close();
      life.abort();
      release();
    },
  };
  port.onmessage = ({ data }: MessageEvent<LeaderMessage | null>) => {
    if (typeof data !== "object" || data === null) return; // no message: answers nothing (decision 0123)
    hear(); // any frame on the connection says the leader is there (0141's review, M1)
    if (data.type === "pong") return;
    if (data.type === "gone") {
      // Before its `accepted`, the leader may drop it too (it stopped leading first): taken from the `connect` on.
      if (!(connecting || (session && sessions.has(data.session)))) return;
      connecting = false;
      bound();
      // Gone as it says, or told by one who knows the connection (nothing on these channels is secret): the endpoint
      // asks who leads again, and the leader, if it still leads, answers and is followed again — a link dropped never
      // leaves the tab waiting (decision 0137); on a backoff, so a forger that answers each `connect` with a `gone`
      // costs a few connects, not hundreds a second (its review, M2).
      on.gone();
    } else if (data.type !== "accepted") {
      if (data.id !== null) messages.receive(data); // under no id: answers nothing of this tab's (it sends none such)
    } else if (session) {
      // Another `accepted` (the leader's, after a forger's; or a forger's): its session is taken for a `gone`, its life
      // lock only once Web Locks says the database's holder holds it. Nothing else: the watch is not asked again. Past
      // `MAX_ACCEPTED`, only one Web Locks vouches for: four forged ones posted first no longer crowd out the leader's
      // (the review of decision 0141, L2).
      if (sessions.size < MAX_ACCEPTED) {
        if (typeof data.session === "string") sessions.add(data.session);
        watchLife(data.lifeLock, true);
      } else vouched(data.session, data.lifeLock);
    } else if (connecting) {
      connecting = false;
      bound();
      session = { name: typeof data.session === "string" ? data.session : undefined };
      pings = data.ping === true;
      sessions.add(session.name);
      on.accepted();
      watchLife(data.lifeLock);
      watch = watchStatus(
        leaderStatuses(messages.endpoint),
        (status) => {
          link.status = status;
          if (status.kind === "closed" || status.kind === "failed") on.lose();
          else on.changed();
        },
        {
          clock,
          refused: REFUSED_BACKOFF,
          gone: isLoss,
          ended: (error) => {
            if (isLoss(error)) return on.lose();
            link.status = { kind: "failed", error: shapeOf(error) };
            on.changed();
          },
        },
      );
    }
  };
  /**
   * The leader's worker died (closed, reloaded, crashed) when its life lock is granted to this tab. An `accepted`'s lock
   * is asked for only where Web Locks does not say another client than the database's holder holds it (a forger's names a
   * lock it frees at will, and the link would be lost at every connect: decision 0141); a later `accepted`'s (`vouched`)
   * only where Web Locks says the holder holds it, as before 0141 none was.
   */
  const watchLife = (lifeLock: unknown, vouched = false) => {
    if (typeof lifeLock !== "string" || lifeLocks.has(lifeLock) || lifeLocks.size >= MAX_ACCEPTED) return;
    lifeLocks.add(lifeLock);
    void checkLeader(locks, clock, database, id, lifeLock).then((verdict) => {
      if (verdict === "forged" || (vouched && verdict !== "genuine") || link.closed) return;
      locks.request(lifeLock, { signal: life.signal }, () => on.lose()).catch(() => {});
    });
  };
  /** A later `accepted` past the cap: its session and life lock taken only where the database's holder holds the lock. */
  const vouched = (name: unknown, lifeLock: unknown) => {
    if (typeof name !== "string" || typeof lifeLock !== "string" || lifeLocks.has(lifeLock)) return;
    void checkLeader(locks, clock, database, id, lifeLock).then((verdict) => {
      if (verdict !== "genuine" || link.closed || lifeLocks.has(lifeLock)) return;
      sessions.add(name);
      lifeLocks.add(lifeLock);
      locks.request(lifeLock, { signal: life.signal }, () => on.lose()).catch(() => {});
    });
  };
  // Held before asking to connect: the leader queues for it, and is granted it when this tab goes.
  locks
    .request(followerLock(connection), { signal: life.signal }, () => {
      if (!link.closed) {
        connecting = true;
        channel.postMessage({ type: "connect", leader: id, connection } satisfies BrokerMessage);
        // Not accepted in time: that leader is given up, and who leads is asked again (decision 0141).
        bound = clock.setTimer(TAB_CONNECT_MS, () => {
          if (!connecting || link.closed) return;
          connecting = false;
          on.gone();
        });
      }
      return new Promise<void>((resolve) => (release = resolve));
    })
    .catch(() => {});
  return link;
}

/**
 * The leader's status as a link takes it (decision 0141). A leader serves its followers only while it is ready, and
 * says `gone` when it stops; anything else on the status subscription — another status, or what is no status at all (a
 * forger that listens may post an `event` under the subscription's id) — is told as `closed`: the link is lost and who
 * leads is asked again. Before, a forged event set the link's status to whatever it carried, and a value that was no
 * status left the tab `waiting-for-lock` for good.
 */
function leaderStatuses(endpoint: HostEndpoint): HostEndpoint {
  const ready = (value: unknown) =>
    typeof value === "object" &&
    value !== null &&
    (value as { kind?: unknown }).kind === "ready" &&
    typeof (value as { database?: unknown }).database === "string";
  return {
    ...endpoint,
    subscribe: (method, args, emit, lost) =>
      endpoint.subscribe(
        method,
        args,
        (value) => emit(ready(value) ? value : ({ kind: "closed", reason: "close" } satisfies HarnessStatus)),
        lost,
      ),
  };
}
