/// <reference lib="webworker" />
/** The leader's side of every tab being live (./wire.ts), in the worker that has the database open. */
import { ConnectionLost, HarnessClosed } from "../../errors.ts";
import type { CallerLimits } from "../../host/caller-bounds.ts";
import { type HostEndpoint, hostEndpoint } from "../../host/endpoint.ts";
import { type SerializedError, serializeError } from "../../host/error-wire.ts";
import { clientMessageOf, serveMessages } from "../../host/messages.ts";
import { keepCancel } from "../../host/pending-subscription.ts";
import type { HarnessService } from "../../host/protocol.ts";
import { type WorkerDoors, workerDoor } from "../comlink.ts";
import { leaderMark } from "./leader-check.ts";
import { type BrokerMessage, broker, channelName, type FollowerMessage, followerLock, type LeaderMessage } from "./wire.ts";

/**
 * The leader's side, in the worker: serves the other tabs while this worker has the database open. Each follower tab is
 * one caller: `limits` bounds each one's subscriptions and calls in flight alone (decision 0148), so one tab at its
 * bound stops no other.
 */
export function serveTabs(host: HarnessService, database: string, doors?: WorkerDoors, limits?: CallerLimits): void {
  const locks = broker();
  if (!locks) return; // no broker: the other tabs wait for the database (and may take it over)
  const id = crypto.randomUUID();
  const channel = new BroadcastChannel(channelName(database));
  const endpoint = workerDoor(leaderEndpoint(host), { from: "tab" }, doors);
  const connections = new Set<() => void>();
  /**
   * Every live connection this leader accepted (a follower names each with a fresh UUID): a `connect` for one of them again
   * (a replay: the `connect` goes in clear on the database's channel) is ignored. Before (the review of decision 0137,
   * M3), it opened a second channel on the same name with a second `serveMessages`: every call of that follower ran twice.
   * A dropped one's name is forgotten (the second review, L1: before, every name stayed, so a page posting fresh connects
   * grew the set without end): a replay of it is accepted again and dropped at once, its follower's lock being free.
   */
  const accepted = new Set<string>();
  let leading = false;
  /**
   * Held for the worker's life before this id is ever posted: a follower takes an announcement only from the client
   * that holds the database's lock and this mark (./leader-check.ts, decision 0141).
   */
  let marked = false;
  const announce = () => marked && leading && channel.postMessage({ type: "leader", leader: id } satisfies BrokerMessage);
  void locks
    .request(leaderMark(database, id), () => {
      marked = true;
      announce();
      return new Promise<never>(() => {});
    })
    // Refused (the browser's lock manager failed it): announced anyway, as before 0141 — followers judge it `unknown`
    // and follow it. Before (the review of decision 0141), such a leader never announced itself.
    .catch(() => {
      marked = true;
      announce();
    });

  host.onStatus((status) => {
    if ((status.kind === "ready") === leading) return;
    leading = !leading;
    if (leading) announce();
    else for (const drop of [...connections]) drop();
  });

  const accept = (connection: string) => {
    if (accepted.has(connection)) return;
    accepted.add(connection);
    const port = new BroadcastChannel(connection);
    /** This connection's: its `gone` says it, so the follower ignores one that does not (decision 0137). */
    const session = crypto.randomUUID();
    let open = true;
    // An error as the follower receives it: typed, never the leader's stack (as an object's page sockets; decision 0123).
    const send = (message: LeaderMessage) =>
      open && port.postMessage(message.type === "error" ? { ...message, error: errorOnWire(message.error) } : message);
    const served = serveMessages(endpoint, send, limits ? { limits } : {});
    const stop = new AbortController();
    /**
     * Every drop says `gone`: to a follower that went (its `bye`, its lock) it reaches no one; one that did not (a forged
     * `bye` with the session copied from the `accepted`, its lock stolen or lost) hears it and connects again. Before
     * (the review of decision 0137, M1), only a leader that stopped leading said it: such a follower stayed unanswered.
     */
    const drop = () => {
      if (!connections.delete(drop)) return;
      accepted.delete(connection);
      served.close();
      stop.abort();
      send({ type: "gone", session });
      open = false;
      port.close();
    };
    connections.add(drop);
    // A frame that is no message (another version of the app's tab, a stranger's post) gets a typed error under its id
    // (decision 0123; before, `null` threw out of this listener and a frame without a method reached the host).
    port.onmessage = ({ data }: MessageEvent<unknown>) => {
      // A `bye` that is not this connection's (posted by anyone who knows its name) is ignored: the follower's lock,
      // released when it goes, drops it anyway (decision 0137). One with the session (a forger that listened may have
      // copied it from the `accepted`) drops it with a `gone`, as every drop does.
      // A `ping` (is this leader there?) is answered here, before the app's door: a hook that waits (its auth server down)
      // does not make a follower with a long call in flight drop a live leader (the review of decision 0141, M1).
      if ((data as FollowerMessage | null)?.type === "ping") return void send({ type: "pong" });
      if ((data as FollowerMessage | null)?.type === "bye") return void ((data as { session?: unknown }).session === session && drop());
      const parsed = clientMessageOf(data);
      if ("message" in parsed) served.receive(parsed.message);
      else send({ type: "error", id: parsed.id, error: serializeError(parsed.error) });
    };
    locks.request(followerLock(connection), { signal: stop.signal }, () => drop()).catch(() => {});
    void host.lifeLock().then((lifeLock) => send({ type: "accepted", session, ping: true, ...(lifeLock ? { lifeLock } : {}) }));
  };

  channel.onmessage = ({ data }: MessageEvent<BrokerMessage | null>) => {
    if (!leading) return;
    // Anything else on the database's channel (`null`, a connection that is no name) is no one's: ignored (decision 0123).
    if (data?.type === "who-leads") announce();
    else if (data?.type === "connect" && data.leader === id && typeof data.connection === "string") accept(data.connection);
  };
}

/** An error as a follower receives it: never the leader's stack. */
function errorOnWire(error: SerializedError): SerializedError {
  const { stack: _stack, ...shape } = error;
  return shape;
}

/**
 * The host's endpoint for followers: a call that fails because this leader is closing (its harness closed, its
 * status no longer ready) fails with `ConnectionLost`, which the follower answers like the leader's death.
 */
function leaderEndpoint(host: HarnessService): HostEndpoint {
  const served = hostEndpoint(host);
  const leaving = (error: unknown) => {
    throw error instanceof HarnessClosed || host.status().kind !== "ready" ? new ConnectionLost() : error;
  };
  return {
    call: (method, args) => served.call(method, args).catch(leaving),
    subscribe(method, args, emit, lost) {
      const subscribed = served.subscribe(method, args, emit, lost);
      // A watch still waiting for its conversation is given up with the tab that asked (decision 0107).
      return keepCancel(subscribed, subscribed.catch(leaving));
    },
    unsubscribe: (id) => served.unsubscribe(id),
  };
}
