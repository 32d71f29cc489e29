/**
 * A subscription of a page that cannot see its own worker's status, carried to another place (decision 0144): this
 * tab's worker's door decides it first, as this page's (`{ from: "page" }`), and only what it lets by is carried. Before,
 * such a page's watches went to the leader tab as another tab's (`{ from: "tab" }`), where a door that trusts the
 * origin's tabs let by what this page's own door refuses it (decision 0142's review, "Not done").
 */
import { DurableError } from "../../errors.ts";
import type { HostEndpoint } from "../../host/endpoint.ts";
import { cancelPending, type PendingSubscription, pendingSubscription } from "../../host/pending-subscription.ts";

/**
 * Subscribes `method(args)` at `own` (its door decides; the values it sends are not this page's, the carried one's are),
 * then `carry()` once it is let by, and lets go of the own one when the carried one is answered or fails — held across
 * the carry, so a place that is this same worker (its tabs door) never sees a page's last watch end in between (a page
 * tool watch's claims are released at its last one). Let by: the own worker held it, or answered with an error that
 * `letBy` says its door let by (the host's own "not open" naming the database another tab has, decision 0142: its door
 * decided before the host was asked). Any other error of the own door or host is the answer: nothing is carried.
 */
export function pastOwnDoor(
  own: HostEndpoint,
  method: string,
  args: unknown[],
  letBy: (error: unknown) => boolean,
  carry: () => Promise<number>,
): PendingSubscription<number> {
  let cancelled = false;
  let asked: Promise<number> | undefined; // the own door's, then the carried one: what a cancel gives up
  const answered = (async () => {
    const atDoor = own.subscribe(method, args, () => {});
    asked = atDoor;
    let held: number | undefined;
    try {
      held = await atDoor;
    } catch (error) {
      if (!letBy(error)) throw error;
    }
    try {
      if (cancelled) throw new DurableError("The subscription was given up before it was answered.");
      asked = carry();
      return await asked;
    } finally {
      const release = held;
      if (release !== undefined)
        void Promise.resolve(release)
          .then((id) => own.unsubscribe(id))
          .catch(() => {});
    }
  })();
  return pendingSubscription(answered, () => {
    cancelled = true;
    cancelPending(asked);
  });
}
