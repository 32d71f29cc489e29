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

import type { Clock } from "../../base/clock.ts";
import { ConnectionLost } from "../../errors.ts";
import type { HostEndpoint } from "../../host/endpoint.ts";
import { shapeOf } from "../../host/error-wire.ts";
import { messageEndpoint } from "../../host/messages.ts";
import type { HarnessStatus } from "../../host/protocol.ts";
import { type StatusWatch, watchStatus } from "./own-status.ts";
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
  /** The leader went (gone, its worker died, its status closed or failed, its connection lost). */
  lose(): void;
  /** The link's status changed. */
  changed(): void;
  /** A `gone` dropped it (the leader's, or one who knows the connection): lost, and who leads is asked again. */
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

/** Connects to the leader `id` over the database's `channel`; `clock`'s timers ask its status again. */
export function openLink(id: string, channel: BroadcastChannel, locks: LockManager, on: LinkEvents, clock?: Clock): Link {
  const connection = `pi-durable-web:tab:${crypto.randomUUID()}`;
  const port = new BroadcastChannel(connection);
  const messages = messageEndpoint((message) => !link.closed && port.postMessage(message satisfies FollowerMessage));
  const life = new AbortController();
  let release = () => {};
  let watch: StatusWatch | undefined;
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
  const link: Link = {
    leader: id,
    endpoint: messages.endpoint,
    closed: false,
    again: () => watch?.again() ?? Promise.resolve(),
    close() {
      if (link.closed) return;
      watch?.close();
      messages.fail(new ConnectionLost());
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
    if (data.type === "gone") {
      // Before its `accepted`, the leader may drop it too (it stopped leading first): taken from the `connect` on.
      if (!(connecting || (session && data.session === session.name))) return;
      connecting = false;
      // Gone as it says, or told by one who knows the connection (nothing on these channels is secret): the endpoint
      // asks who leads again, and the leader, if it still leads, answers and is followed again — a link dropped never
      // leaves the tab waiting (decision 0137); on a backoff, so a forger that answers each `connect` with a `gone`
      // costs a few connects, not hundreds a second (its review, M2).
      on.gone();
    } else if (data.type !== "accepted") {
      if (data.id !== null) messages.receive(data); // under no id: answers nothing of this tab's (it sends none such)
    } else if (connecting) {
      connecting = false;
      session = { name: typeof data.session === "string" ? data.session : undefined };
      on.accepted();
      // The leader's worker died (closed, reloaded, crashed) when its life lock is granted to this tab.
      if (typeof data.lifeLock === "string") locks.request(data.lifeLock, { signal: life.signal }, () => on.lose()).catch(() => {});
      watch = watchStatus(
        messages.endpoint,
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
  // Held before asking to connect: the leader queues for it, and is granted it when this tab goes.
  locks
    .request(followerLock(connection), { signal: life.signal }, () => {
      if (!link.closed) {
        connecting = true;
        channel.postMessage({ type: "connect", leader: id, connection } satisfies BrokerMessage);
      }
      return new Promise<void>((resolve) => (release = resolve));
    })
    .catch(() => {});
  return link;
}
