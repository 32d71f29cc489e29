/// <reference lib="webworker" />
/**
 * Every tab is live (decision record 0017). The tab whose worker holds the database lock is the leader; every
 * other tab of the origin is a follower: its page talks to the leader's worker over a BroadcastChannel that
 * only the two of them open (one per connection), with the host's message protocol (src/host/messages.ts). This file holds the messages both sides add to it.
 *
 *   leader's worker  `serveTabs(host, database)` (./leader.ts): announces itself on the database's channel once ready,
 *                    answers "who leads?", serves each follower that connects, and drops it when that tab
 *                    goes (the follower holds a Web Lock the leader queues for) or says bye.
 *   follower's page  `tabsEndpoint(own)` (./follower.ts): one endpoint over this tab's own worker and the leader's. Calls go
 *                    to whichever of the two has the database open; subscriptions move with it (a moved view
 *                    starts from a new snapshot); the leader's death is told by its worker's life lock.
 *
 * When the leader goes (closed, reloaded, crashed, taken over), the next worker in the lock's queue opens the
 * database and recovers, announces itself, and every follower moves to it. A call in flight then is sent
 * again to the new leader when running it twice changes nothing: reads, waits, aborts, `configure`, and
 * `submit`/`createTask`, which a follower always sends with an idempotency key (`requestId`, `key`) so a
 * second run returns what the first one created (./retry.ts). Any other call rejects with `ConnectionLost`.
 */
import type { SerializedError } from "../../host/error-wire.ts";
import type { ClientMessage, HostMessage } from "../../host/messages.ts";

/** On the database's channel. */
export type BrokerMessage =
  | { type: "who-leads" }
  | { type: "leader"; leader: string }
  | { type: "connect"; leader: string; connection: string };
/** On a connection's channel, besides the host protocol's messages. */
export type LeaderMessage =
  | HostMessage
  /**
   * `session`: the leader's name for this connection (decision 0137); a `gone` that does not carry it is no one's. A
   * leader before 0137 sends none, and its `gone` carries none.
   */
  | { type: "accepted"; lifeLock?: string; session?: string; ping?: true }
  /**
   * The answer to a follower's `ping`, by the connection itself, before the app's door (the review of decision 0141, M1).
   * `accepted` says `ping: true` where the leader answers pings; a leader before that fix answers none.
   */
  | { type: "pong" }
  | { type: "gone"; session?: string }
  /** A frame that had no id (a positive integer) refused: answered under none, as the object's page sockets do. */
  | { type: "error"; id: null; error: SerializedError };
/** `bye` carries the connection's `session` from its `accepted`: the leader takes no other (decision 0137). */
export type FollowerMessage = ClientMessage | { type: "bye"; session?: string } | { type: "ping" };

export const channelName = (database: string) => `pi-durable-web:tabs:${database}`;
/** The Web Lock a follower holds while it is connected: the leader is granted it when that tab goes. */
export const followerLock = (connection: string) => `${connection}:life`;

export function broker(): LockManager | undefined {
  const locks = (globalThis.navigator as Navigator | undefined)?.locks;
  return typeof BroadcastChannel === "function" && locks ? locks : undefined;
}
