/**
 * The tabs' endpoint's subscription to this tab's own worker's status (follower.ts). Refused at its ask (the worker's
 * authorize hook refused `onStatus`), the page's status is `failed` with that error (decision 0117, later). Answered with
 * what passes by itself (the hook threw: `AuthorizeFailed`), it is asked again after the backoff of the endpoint's other
 * unserved subscriptions (./unserved.ts: 500 ms, doubling to 10 s), the status `reconnecting` with that wait meanwhile —
 * before, it stayed `failed` while that worker lived: nothing asked again (decision 0123).
 */

import type { HostEndpoint } from "../../host/endpoint.ts";
import { refusalOf } from "../../host/endpoint.ts";
import { serializeError } from "../../host/error-wire.ts";
import type { HarnessStatus } from "../../host/protocol.ts";
import { UnservedWaits } from "./unserved.ts";

/** The one wait's id in its own `UnservedWaits`. */
const STATUS = 0;

/** Watches `own`'s status, telling `told` each one (a wait's `reconnecting`, a refusal's `failed` too) until `close()`. */
export function watchOwnStatus(own: HostEndpoint, told: (status: HarnessStatus) => void): { close(): void } {
  const waits = new UnservedWaits();
  let closed = false;
  const ask = () => {
    own
      .subscribe("onStatus", [], (value) => {
        if (closed) return;
        waits.end(STATUS, true); // served (again): its wait, if any, is over
        told(value as HarnessStatus);
      })
      .catch((error: unknown) => {
        if (closed) return;
        // What passes by itself is asked again (a worker gone is no place to ask: the client hears WorkerGone anyway).
        if (!refusalOf(error) && (error as { name?: unknown } | undefined)?.name !== "WorkerGone") {
          const wait = waits.next(STATUS, ask);
          told({ kind: "reconnecting", attempt: wait.attempt, retryInMs: wait.retryInMs });
          return;
        }
        const { stack: _stack, ...shape } = serializeError(error);
        told({ kind: "failed", error: shape });
      });
  };
  ask();
  return {
    close() {
      closed = true;
      waits.clear();
    },
  };
}
