/**
 * A call through the tabs' endpoint (./follower.ts): sent where the database is — this tab's own worker (`OWN`) or the
 * leader tab's over a link — and sent again, where that is safe, when the place went with it in flight.
 */
import type { Clock } from "../../base/clock.ts";
import { ConnectionLost } from "../../errors.ts";
import type { HostEndpoint } from "../../host/endpoint.ts";
import type { Link } from "./link.ts";
import { isLoss, RESEND_WINDOW_MS, retried, withKey } from "./retry.ts";

export const OWN = "own" as const;
export type Target = typeof OWN | Link;

/** What a call needs of the endpoint. */
export interface CallRoute {
  clock: Clock;
  /** Where the call goes now (`fresh`: its first attempt); waits until there is such a place. */
  next(fresh: boolean): Promise<Target>;
  endpointOf(target: Target): HostEndpoint;
  /** Whether this tab's worker failed the call because the database left it (taken over): sent again, where it went. */
  ownLost(error: unknown): Promise<boolean>;
  lose(link: Link): void;
  /**
   * Whether this tab's worker answered that it waits for the database another tab has (decision 0142), while the page
   * cannot see its status: the endpoint follows that tab, and the call, applied nowhere, goes there as a first attempt.
   */
  waitsElsewhere(error: unknown): boolean;
}

export async function sendCall(route: CallRoute, method: string, args: unknown[]): Promise<unknown> {
  let sent = args;
  const started = route.clock.now();
  for (let fresh = true; ; ) {
    const target = await route.next(fresh);
    // Past the window the harness may have let the call's hand-over key expire (decision 0022).
    if (!fresh && route.clock.now() - started > RESEND_WINDOW_MS) throw new ConnectionLost();
    // Keys: every follower call that creates or decides; on this tab's own worker, submissions and decisions
    // only (a submission's key is a column of its row, a decision's a field of its approval record; a task
    // key is a document of its own, kept five minutes for a follower, decision 0022).
    if (target !== OWN || method === "submit" || method === "decide") sent = withKey(method, sent);
    try {
      return await route.endpointOf(target).call(method, sent);
    } catch (error) {
      if (target === OWN && route.waitsElsewhere(error)) continue;
      if (target === OWN ? !(await route.ownLost(error)) : !isLoss(error)) throw error;
      if (target !== OWN) route.lose(target);
      if (!retried(method, sent)) throw new ConnectionLost();
      fresh = false;
    }
  }
}
