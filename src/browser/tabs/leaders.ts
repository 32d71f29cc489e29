/// <reference lib="webworker" />
/**
 * Which leader the tabs' endpoint follows (follower.ts): the database's channel, the link to the leader it follows
 * (./link.ts), and who leads asked again. Moved out of follower.ts by decision 0141, which added the check of an
 * announcement against Web Locks (./leader-check.ts) and the re-ask after every loss.
 */
import type { Clock } from "../../base/clock.ts";
import { checkLeader } from "./leader-check.ts";
import { type Link, openLink } from "./link.ts";
import { UnservedWaits } from "./unserved.ts";
import { type BrokerMessage, channelName } from "./wire.ts";

export interface Leaders {
  /** The link to the leader followed, if any. */
  readonly link: Link | undefined;
  /** Opens the database's channel (once) and asks who leads; nothing where there is no broker. */
  open(database: string): void;
  /** Drops `link` if it is the one followed (its leader went): nothing is followed until a leader announces itself. */
  lose(link: Link): void;
  /** Stops following: the link, the channel and the re-ask end. */
  close(): void;
}

/** `changed` is told when the link followed or its status changes. */
export function followLeaders(locks: LockManager | undefined, clock: Clock, changed: () => void): Leaders {
  let channel: BroadcastChannel | undefined;
  let database = "";
  let leader: Link | undefined;
  /** Whether Web Locks said the link's leader is the database's holder (./leader-check.ts). */
  let genuine = false;

  const lose = (link: Link) => {
    if (leader !== link) return;
    leader = undefined;
    link.close();
    changed();
  };

  /**
   * Who leads, asked again after a link was dropped (a `gone`: decision 0137; not accepted in time, lost, silent:
   * decision 0141): after 500 ms, doubling to 10 s while links keep being dropped; a link accepted keeps the attempt 10 s,
   * so a `gone` soon after it (a forged `bye` makes the leader send one: the session is in clear) goes on backing off.
   * Before (the review of 0137, M2), asked at once: a forger answering each `connect` with a `gone` made hundreds of
   * connects a second. A leader's real `gone` or death needs no ask (the next leader announces itself, and is followed at
   * once); one that still leads answers it. Before 0141 a lost link asked nothing: one a forger's life lock lost waited
   * for the next announcement.
   */
  const reasks = new UnservedWaits(clock);
  const REASK = 0;
  const askWhoLeads = () => reasks.next(REASK, () => !leader && channel?.postMessage({ type: "who-leads" } satisfies BrokerMessage));

  const follow = (id: string, on: BroadcastChannel, brokers: LockManager, checked: boolean) => {
    const left = leader;
    left?.close();
    genuine = checked;
    const dropped = () => {
      if (leader !== link) return;
      lose(link);
      askWhoLeads();
    };
    const link: Link = openLink(
      id,
      database,
      on,
      brokers,
      {
        lose: dropped,
        changed: () => leader === link && changed(),
        gone: dropped,
        accepted: () => leader === link && reasks.end(REASK, true),
      },
      clock,
    );
    leader = link;
    if (left) changed(); // connecting: no longer the status of the link left
  };

  /**
   * A `leader` announcement, checked against Web Locks first (decision 0141): one the database's holder did not make is
   * ignored (before, any announcement of another id closed the link followed and connected to it — a forger's made the
   * tab wait for good); one Web Locks cannot vouch for either way (a leader of an older build) is followed unless the
   * link followed is vouched for.
   */
  const announced = (id: string) => {
    const asked = channel;
    if (leader?.leader === id || !asked || !locks) return;
    void checkLeader(locks, clock, database, id).then((verdict) => {
      if (channel !== asked || leader?.leader === id) return;
      if (verdict === "forged" || (verdict === "unknown" && leader && genuine)) return;
      follow(id, asked, locks, verdict === "genuine");
    });
  };

  return {
    get link() {
      return leader;
    },
    open(name) {
      if (channel || !locks) return;
      database = name;
      channel = new BroadcastChannel(channelName(database));
      channel.onmessage = ({ data }: MessageEvent<BrokerMessage | null>) =>
        data?.type === "leader" && typeof data.leader === "string" && announced(data.leader);
      channel.postMessage({ type: "who-leads" } satisfies BrokerMessage);
    },
    lose,
    close() {
      const link = leader;
      leader = undefined;
      link?.close();
      channel?.close();
      channel = undefined;
      reasks.clear();
    },
  };
}
