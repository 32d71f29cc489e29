/**
 * The tabs' endpoint's subscriptions to a status (follower.ts): its own worker's, and the leader tab's while it follows
 * one (./link.ts). Refused at its ask (that worker's authorize hook refused `onStatus`), `ended` hears the error (the
 * page's status `failed` with it: decision 0117, later). Answered with what passes by itself (the hook threw:
 * `AuthorizeFailed`), it is asked again after the backoff of the endpoint's other unserved subscriptions (./unserved.ts:
 * 500 ms, doubling to 10 s), the status `reconnecting` with that wait and the error meanwhile — before, it stayed
 * `failed` while that worker lived, and a follower `waiting-for-lock` while its leader lived: nothing asked again
 * (decisions 0123 and its review).
 */

import type { Clock } from "../../base/clock.ts";
import type { HostEndpoint } from "../../host/endpoint.ts";
import { refusalOf } from "../../host/endpoint.ts";
import { shapeOf } from "../../host/error-wire.ts";
import type { HarnessStatus } from "../../host/protocol.ts";
import { type Backoff, UNSERVED_BACKOFF, UnservedWaits } from "./unserved.ts";

/** The one wait's id in its own `UnservedWaits`. */
const STATUS = 0;

export interface StatusWatchOptions {
  /** An error that says the place is gone (no place to ask again): `ended` hears it. Default: `WorkerGone`. */
  gone?: (error: unknown) => boolean;
  /** Refused, or the place gone: nothing is asked again. Default: `told` hears `failed` with the error. */
  ended?: (error: unknown) => void;
  /** The timers the waits ask again on (the page's by default; a test's manual clock). */
  clock?: Clock;
  /**
   * Refused, asked again after this backoff (the leader's door: decision 0132): `ended` is told the first refusal of a
   * stretch only (the status `failed` once, not again at each refusal), and nothing asks again once the place is gone.
   */
  refused?: Backoff;
}

export interface StatusWatch {
  /**
   * The app's answer may have changed (`HarnessClient.askAgain()`, decision 0132): a subscription refused, or waiting
   * to be asked again, is asked now. Nothing while it is served or asked, or once the place is gone.
   */
  again(): void;
  close(): void;
}

/**
 * Watches `endpoint`'s status, telling `told` each one (a wait's `reconnecting` with its last error too) until
 * `close()`.
 */
export function watchStatus(endpoint: HostEndpoint, told: (status: HarnessStatus) => void, options: StatusWatchOptions = {}): StatusWatch {
  const gone = options.gone ?? ((error: unknown) => (error as { name?: unknown } | undefined)?.name === "WorkerGone");
  const ended = options.ended ?? ((error: unknown) => told({ kind: "failed", error: shapeOf(error) }));
  const waits = new UnservedWaits(options.clock, UNSERVED_BACKOFF);
  const refusals = options.refused && new UnservedWaits(options.clock, options.refused);
  /** Refused, and not served or answered otherwise since: a refusal again tells nothing (decision 0132). */
  let refused = false;
  let closed = false;
  /** Not served, not asked, not gone: what `again()` asks now. */
  let idle = false;
  const ask = () => {
    idle = false;
    endpoint
      .subscribe("onStatus", [], (value) => {
        if (closed) return;
        waits.end(STATUS, true); // served (again): its wait, if any, is over
        refusals?.end(STATUS);
        refused = false;
        told(value as HarnessStatus);
      })
      .catch((error: unknown) => {
        if (closed) return;
        idle = !gone(error);
        if (gone(error) || (refusalOf(error) && !refusals)) return ended(error);
        if (refusalOf(error)) {
          // Asked again, slowly: the app's answer may change (a sign-in); `failed` is told once (decision 0132).
          waits.end(STATUS);
          refusals!.next(STATUS, ask);
          if (!refused) ended(error);
          refused = true;
          return;
        }
        refusals?.end(STATUS);
        refused = false;
        // What passes by itself is asked again; the status says why it waits (the review of 0123, L3).
        const wait = waits.next(STATUS, ask);
        told({ kind: "reconnecting", attempt: wait.attempt, retryInMs: wait.retryInMs, error: shapeOf(error) });
      });
  };
  ask();
  return {
    again() {
      if (closed || !idle) return;
      waits.end(STATUS);
      refusals?.end(STATUS);
      ask();
    },
    close() {
      closed = true;
      waits.clear();
      refusals?.clear();
    },
  };
}
